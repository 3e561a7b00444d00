package flow

// Operators' control of a flow-control key (QStash's flow-control API):
// pause and resume it, pin its parallelism or rate over what requests ask
// for, reset its rate. The settings live in Redis next to the key's
// state; workers read them at most once per ControlTTL per key.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
)

// Control is what an operator set on a key.
type Control struct {
	Paused         bool
	PinParallelism int
	PinRate        int
	PinPeriod      time.Duration
}

// controlNames are the Redis keys of key's Control and of its waiters
// held while it is paused.
func controlNames(k string) (ctl, paused string) {
	return record.FlowControlKeys(k)
}

// ReadControl reads key's Control.
func ReadControl(ctx context.Context, rdb redis.UniversalClient, key string) (Control, error) {
	ctl, _ := controlNames(key)
	h, err := rdb.HGetAll(ctx, ctl).Result()
	if err != nil {
		return Control{}, err
	}
	atoi := func(f string) int { n, _ := strconv.Atoi(h[f]); return n }
	return Control{Paused: h["paused"] == "1", PinParallelism: atoi("parallelism"), PinRate: atoi("rate"),
		PinPeriod: time.Duration(atoi("periodMs")) * time.Millisecond}, nil
}

// Pause holds key's requests: none starts until Resume; each waits in the
// key's paused line. A destination's own key (host:port, as its tenant
// names it) holds every request of the tenant to that destination, with a
// flowControl key or without.
func Pause(ctx context.Context, rdb redis.UniversalClient, key string) error {
	ctl, _ := controlNames(key)
	if err := rdb.HSet(ctx, ctl, "paused", "1").Err(); err != nil {
		return fmt.Errorf("pause %s: %w", key, err)
	}
	if err := rdb.SAdd(ctx, record.FlowPausedKey, key).Err(); err != nil {
		return fmt.Errorf("list paused key %s: %w", key, err)
	}
	return nil
}

// PausedKeys are the keys an operator paused, each with how many requests
// wait in its paused line.
func PausedKeys(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	keys, err := rdb.SMembers(ctx, record.FlowPausedKey).Result()
	if err != nil {
		return nil, fmt.Errorf("read the paused keys: %w", err)
	}
	pipe := rdb.Pipeline()
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

// pausedTakeScript takes the first waiters out of a resumed key's paused
// line: scripts/paused_take.lua.
var pausedTakeScript = script("paused_take")

// resumeBatch is how many waiters of a resumed key one script takes.
const resumeBatch = 100

// Resume lets key's requests start again and wakes those it held,
// answering how many it took out of the paused line (after the resume its
// line is empty, so only Resume can say).
func Resume(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, key string) (released int, err error) {
	ctl, paused := controlNames(key)
	if err := rdb.HDel(ctx, ctl, "paused").Err(); err != nil {
		return 0, fmt.Errorf("resume %s: %w", key, err)
	}
	if err := rdb.SRem(ctx, record.FlowPausedKey, key).Err(); err != nil {
		return 0, fmt.Errorf("unlist paused key %s: %w", key, err)
	}
	for {
		ids, err := pausedTakeScript.Run(ctx, rdb, []string{ctl, paused}, resumeBatch).StringSlice()
		if err != nil {
			return released, fmt.Errorf("release the waiters of %s: %w", key, err)
		}
		released += len(ids)
		moves := make([]Move, len(ids))
		for i, id := range ids {
			moves[i] = Now(id)
		}
		// One Redis could not start has its safety net (ParkFallback),
		// and is no longer held.
		move(ctx, mover, log, moves...)
		if len(ids) < resumeBatch {
			return released, nil
		}
	}
}

// Pin sets key's parallelism (parallelism > 0) and rate per period (rate
// > 0) over what its requests ask for.
func Pin(ctx context.Context, rdb redis.UniversalClient, key string, parallelism, rate int, period time.Duration) error {
	ctl, _ := controlNames(key)
	var fields []any
	if parallelism > 0 {
		fields = append(fields, "parallelism", parallelism)
	}
	if rate > 0 {
		if period <= 0 {
			period = time.Second
		}
		fields = append(fields, "rate", rate, "periodMs", period.Milliseconds())
	}
	if len(fields) == 0 {
		return nil
	}
	return rdb.HSet(ctx, ctl, fields...).Err()
}

// Unpin drops the pinned parallelism and/or rate of key.
func Unpin(ctx context.Context, rdb redis.UniversalClient, key string, parallelism, rate bool) error {
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
	return rdb.HDel(ctx, ctl, fields...).Err()
}

// ResetRate forgets the turns key's rate gave: its next request starts at
// once. Turns given to waiters are dropped; they take new ones.
func ResetRate(ctx context.Context, rdb redis.UniversalClient, key string) error {
	next, given := turnNames(key)
	return rdb.Del(ctx, next, given).Err()
}

// KeyInfo is a key's state as the flow-control API shows it.
type KeyInfo struct {
	Control
	// Waiting are its requests waiting for a slot, a turn or a resume.
	Waiting int64
	// InFlight are the parallelism slots taken.
	InFlight int64
	// RateCount is how many turns are given ahead of now: how far the
	// rate is used.
	RateCount int64
}

// Info reads key's state: its Control, its waiters, its slots taken and
// its rate's use. rate and period are its rate (pinned or asked for), to
// count turns ahead.
func Info(ctx context.Context, rdb redis.UniversalClient, key string, rate int, period time.Duration, now time.Time) (KeyInfo, error) {
	c, err := ReadControl(ctx, rdb, key)
	if err != nil {
		return KeyInfo{}, err
	}
	_, paused := controlNames(key)
	slots, wait := keyNames(key)
	next, given := turnNames(key)
	line := cutNames(key)[0]
	pipe := rdb.Pipeline()
	nPaused := pipe.ZCard(ctx, paused)
	nWait := pipe.ZCard(ctx, wait)
	nGiven := pipe.HLen(ctx, given)
	nLine := pipe.ZCard(ctx, line)
	tat := pipe.Get(ctx, next)
	taken := pipe.ZCount(ctx, slots, strconv.FormatInt(now.UnixMilli(), 10), "+inf")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return KeyInfo{}, fmt.Errorf("flow-control info of %s: %w", key, err)
	}
	info := KeyInfo{Control: c, Waiting: nPaused.Val() + nWait.Val() + nGiven.Val() + nLine.Val(), InFlight: taken.Val()}
	if at, err := strconv.ParseInt(tat.Val(), 10, 64); err == nil && rate > 0 {
		if period <= 0 {
			period = time.Second
		}
		interval := period.Microseconds() / int64(rate)
		if ahead := at - now.UnixMicro(); ahead > 0 && interval > 0 {
			info.RateCount = min((ahead+interval-1)/interval, int64(rate))
		}
	}
	return info, nil
}

// operatorGate is the operator gate: an operator's pause and pins of a
// key, and the keys' Controls as this worker last read them.
type operatorGate struct {
	*core
	// controls are the keys' Controls, at most ControlTTL old (core.mu).
	controls map[string]controlEntry
}

var holdPausedScript = script("hold_paused")

// holdPaused parks id in key's paused line if key is still paused in
// Redis (one step, so a resume cannot slip between the check and the
// park); held says it did.
func (op *operatorGate) holdPaused(ctx context.Context, key, id string, now time.Time) (bool, error) {
	ctl, paused := controlNames(key)
	n, err := holdPausedScript.Run(ctx, op.rdb, []string{ctl, paused}, id, now.UnixMilli(), op.tune.KeyTTL.Milliseconds()).Int()
	return n == 1, err
}

// control is key's Control as this worker last read it (at most
// ControlTTL ago).
func (op *operatorGate) control(ctx context.Context, key string, now time.Time) Control {
	op.mu.Lock()
	e, ok := op.controls[key]
	op.mu.Unlock()
	if ok && now.Sub(e.at) < op.tune.ControlTTL {
		return e.Control
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ctl, err := ReadControl(rctx, op.rdb, key)
	if err != nil {
		op.log.Warn("could not read a flow-control key's settings; the last ones hold", "key", key, "err", err)
		return e.Control
	}
	op.mu.Lock()
	if len(op.controls) > MaxControls {
		clear(op.controls) // a bound on memory; they are read again
	}
	op.controls[key] = controlEntry{Control: ctl, at: now}
	op.mu.Unlock()
	return ctl
}

// enter runs the operator gate: it holds a request of a paused key
// until the key is resumed, and applies the key's pins to the request. A
// request's keys are its destination's own (host:port, as its tenant
// names it) and its flowControl key, if any: a pause of either holds it.
func (op *operatorGate) enter(ctx context.Context, t *Ticket) error {
	if err := op.holdIfPaused(ctx, t, tenant.Qualify(t.req.Tenant, t.req.HostPort)); err != nil {
		return err
	}
	if !t.req.Named {
		return nil
	}
	if err := op.holdIfPaused(ctx, t, t.req.Key); err != nil {
		return err
	}
	ctl := op.control(ctx, t.req.Key, t.start)
	if ctl.PinParallelism > 0 {
		t.req.Parallelism = ctl.PinParallelism
	}
	if ctl.PinRate > 0 {
		t.req.Rate, t.req.Period = ctl.PinRate, ctl.PinPeriod
	}
	return nil
}

// holdIfPaused parks t in key's paused line while key is paused.
func (op *operatorGate) holdIfPaused(ctx context.Context, t *Ticket, key string) error {
	if !op.control(ctx, key, t.start).Paused {
		return nil
	}
	held, err := op.holdPaused(ctx, key, t.req.ID, t.start)
	if err != nil {
		return fmt.Errorf("hold %s behind paused key %s: %w", t.req.ID, key, err)
	}
	if held {
		return &Parked{Until: t.start.Add(op.tune.ParkFallback), Reason: record.WaitingPaused}
	}
	return nil
}

// MaxControls bounds the keys' Controls a worker keeps.
const MaxControls = 10000

type controlEntry struct {
	Control
	at time.Time
}
