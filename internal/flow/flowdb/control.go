package flowdb

// An operator's settings on a flow-control key (paused, pins) and the
// key's paused line.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var (
	pausedTakeScript = script("paused_take")
	holdPausedScript = script("hold_paused")
)

// ControlIO reads and writes the operators' settings of keys.
type ControlIO struct{ rdb redis.UniversalClient }

// controlNames are the Redis keys of key's Control and of its waiters
// held while it is paused.
func controlNames(k string) (ctl, paused string) {
	return keys.FlowControl(k)
}

// Control is what an operator set on a key, as stored.
type Control struct {
	Paused         bool
	PinParallelism int
	PinRate        int
	PinPeriod      time.Duration
}

// Read reads key's Control.
func (c ControlIO) Read(ctx context.Context, key string) (Control, error) {
	ctl, _ := controlNames(key)
	h, err := c.rdb.HGetAll(ctx, ctl).Result()
	if err != nil {
		return Control{}, err
	}
	atoi := func(f string) int { n, _ := strconv.Atoi(h[f]); return n }
	return Control{Paused: h["paused"] == "1", PinParallelism: atoi("parallelism"), PinRate: atoi("rate"),
		PinPeriod: time.Duration(atoi("periodMs")) * time.Millisecond}, nil
}

// Pause marks key paused and lists it among the paused keys.
func (c ControlIO) Pause(ctx context.Context, key string) error {
	ctl, _ := controlNames(key)
	if err := c.rdb.HSet(ctx, ctl, "paused", "1").Err(); err != nil {
		return fmt.Errorf("pause %s: %w", key, err)
	}
	if err := c.rdb.SAdd(ctx, keys.FlowPaused, key).Err(); err != nil {
		return fmt.Errorf("list paused key %s: %w", key, err)
	}
	return nil
}

// Unpause marks key not paused and unlists it (its paused line stays:
// TakePaused empties it).
func (c ControlIO) Unpause(ctx context.Context, key string) error {
	ctl, _ := controlNames(key)
	if err := c.rdb.HDel(ctx, ctl, "paused").Err(); err != nil {
		return fmt.Errorf("resume %s: %w", key, err)
	}
	if err := c.rdb.SRem(ctx, keys.FlowPaused, key).Err(); err != nil {
		return fmt.Errorf("unlist paused key %s: %w", key, err)
	}
	return nil
}

// PausedKeys are the paused keys, each with how many requests wait in its
// paused line.
func (c ControlIO) PausedKeys(ctx context.Context) (map[string]int64, error) {
	keys, err := c.rdb.SMembers(ctx, keys.FlowPaused).Result()
	if err != nil {
		return nil, fmt.Errorf("read the paused keys: %w", err)
	}
	pipe := c.rdb.Pipeline()
	cards := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		_, paused := controlNames(k)
		cards[i] = pipe.ZCard(ctx, paused)
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("count the paused keys' waiters: %w", err)
		}
	}
	out := make(map[string]int64, len(keys))
	for i, k := range keys {
		out[k] = cards[i].Val()
	}
	return out, nil
}

// TakePaused takes up to n first waiters out of resumed key's paused
// line.
func (c ControlIO) TakePaused(ctx context.Context, key string, n int) ([]string, error) {
	ctl, paused := controlNames(key)
	return pausedTakeScript.Run(ctx, c.rdb, []string{ctl, paused}, n).StringSlice()
}

// HoldPaused parks id in key's paused line if key is still paused (one
// step, so a resume cannot slip between the check and the park); held
// says it did.
func (c ControlIO) HoldPaused(ctx context.Context, key, id string, now time.Time, ttl time.Duration) (held bool, err error) {
	ctl, paused := controlNames(key)
	n, err := holdPausedScript.Run(ctx, c.rdb, []string{ctl, paused}, id, now.UnixMilli(), ttl.Milliseconds()).Int()
	return n == 1, err
}

// Pin writes key's pinned parallelism (parallelism > 0) and rate per
// period (rate > 0); nothing when neither is set.
func (c ControlIO) Pin(ctx context.Context, key string, parallelism, rate int, period time.Duration) error {
	ctl, _ := controlNames(key)
	var fields []any
	if parallelism > 0 {
		fields = append(fields, "parallelism", parallelism)
	}
	if rate > 0 {
		fields = append(fields, "rate", rate, "periodMs", period.Milliseconds())
	}
	if len(fields) == 0 {
		return nil
	}
	return c.rdb.HSet(ctx, ctl, fields...).Err()
}

// Unpin drops key's pinned parallelism and/or rate.
func (c ControlIO) Unpin(ctx context.Context, key string, parallelism, rate bool) error {
	ctl, _ := controlNames(key)
	var fields []string
	if parallelism {
		fields = append(fields, "parallelism")
	}
	if rate {
		fields = append(fields, "rate", "periodMs")
	}
	if len(fields) == 0 {
		return nil
	}
	return c.rdb.HDel(ctx, ctl, fields...).Err()
}

// KeyCounts are a key's waiters and slots as Redis holds them.
type KeyCounts struct {
	// Paused, Waiting, Given and Line wait in its paused line, its
	// parallelism line, for a rate turn given, and in its cut line.
	Paused, Waiting, Given, Line int64
	// Taken are its parallelism slots whose leases end after now.
	Taken int64
	// NextTurn is its rate's next turn (µs), when HasTurn.
	NextTurn int64
	HasTurn  bool
}

// Counts reads key's waiters, slots taken and next rate turn in one round
// trip.
func (c ControlIO) Counts(ctx context.Context, key string, now time.Time) (KeyCounts, error) {
	_, paused := controlNames(key)
	slots, wait := keyNames(key)
	next, given := keys.FlowRate(key)
	line := CutNames(key)[0]
	pipe := c.rdb.Pipeline()
	nPaused := pipe.ZCard(ctx, paused)
	nWait := pipe.ZCard(ctx, wait)
	nGiven := pipe.HLen(ctx, given)
	nLine := pipe.ZCard(ctx, line)
	tat := pipe.Get(ctx, next)
	taken := pipe.ZCount(ctx, slots, strconv.FormatInt(now.UnixMilli(), 10), "+inf")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return KeyCounts{}, fmt.Errorf("flow-control info of %s: %w", key, err)
	}
	out := KeyCounts{Paused: nPaused.Val(), Waiting: nWait.Val(), Given: nGiven.Val(), Line: nLine.Val(), Taken: taken.Val()}
	if at, err := strconv.ParseInt(tat.Val(), 10, 64); err == nil {
		out.NextTurn, out.HasTurn = at, true
	}
	return out, nil
}
