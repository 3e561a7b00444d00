package flowdb

// A flow-control key's parallelism: its slots (with leases), its line and
// the requests handed a slot and not yet started.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var (
	acquireScript = script("acquire", "par_hand_back")
	parNextScript = script("par_next", "par_hand_back")
	parKeepScript = script("par_keep")
)

// ParIO takes, hands on and counts the keys' parallelism slots.
type ParIO struct{ rdb redis.UniversalClient }

// keyNames are the Redis keys of a flow-control key's parallelism.
func keyNames(k string) (slots, wait string) {
	slots, wait, _ = keys.FlowParallelism(k)
	return slots, wait
}

// parNames are the keys of the parallelism scripts: the slots, the line,
// and the requests handed a slot and not yet started.
func parNames(k string) []string {
	slots, wait, handed := keys.FlowParallelism(k)
	return []string{slots, wait, handed}
}

// ParReply is what the parallelism scripts answer.
type ParReply struct {
	// Taken: the slot is taken (Acquire only).
	Taken bool
	// N are the waiters left in the line.
	N int
	// First is the end of the key's earliest lease (zero: no lease).
	First time.Time
	// Woken are the waiters handed a slot, to wake.
	Woken []string
}

// parseParReply reads a script's reply; flagged says it starts with
// acquire's flag.
func parseParReply(name string, v any, flagged bool) (ParReply, error) {
	bad := func() (ParReply, error) { return ParReply{}, fmt.Errorf("%s script: unexpected reply %v", name, v) }
	res, ok := v.([]any)
	var r ParReply
	if flagged {
		if !ok || len(res) < 1 {
			return bad()
		}
		flag, ok := res[0].(int64)
		if !ok || flag < 0 || flag > 1 {
			return bad()
		}
		r.Taken, res = flag == 1, res[1:]
	}
	if !ok || len(res) < 2 {
		return bad()
	}
	n, ok1 := res[0].(int64)
	first, ok2 := res[1].(int64)
	if !ok1 || !ok2 || n < 0 || first < 0 {
		return bad()
	}
	r.N = int(n)
	if first > 0 {
		r.First = time.UnixMilli(first)
	}
	for _, id := range res[2:] {
		s, ok := id.(string)
		if !ok || s == "" {
			return bad()
		}
		r.Woken = append(r.Woken, s)
	}
	return r, nil
}

// Acquire takes one of key's parallelism slots for id, leased until
// leaseEnd, or puts id in the key's line at place; the slots of leases
// ended are handed on, each held for its waiter until handOverEnd.
func (p ParIO) Acquire(ctx context.Context, key, id string, parallelism int, now, leaseEnd time.Time, ttl time.Duration, handOverEnd, place time.Time) (ParReply, error) {
	v, err := acquireScript.Run(ctx, p.rdb, parNames(key), id, parallelism, now.UnixMilli(),
		leaseEnd.UnixMilli(), ttl.Milliseconds(), handOverEnd.UnixMilli(), place.UnixMilli()).Result()
	if err != nil {
		return ParReply{}, err
	}
	return parseParReply("acquire", v, true)
}

// Next gives back ended's slot of key ("": only the slots whose leases
// ended) and hands the free slots to the line's first waiters, each held
// for it until handOverEnd.
func (p ParIO) Next(ctx context.Context, key, ended string, parallelism int, now, handOverEnd time.Time, ttl time.Duration) (ParReply, error) {
	v, err := parNextScript.Run(ctx, p.rdb, parNames(key), ended, parallelism, now.UnixMilli(),
		handOverEnd.UnixMilli(), ttl.Milliseconds()).Result()
	if err != nil {
		return ParReply{}, err
	}
	return parseParReply("par_next", v, false)
}

// KeepPlaces puts waiters back at their places in their keys'
// parallelism lines, one round trip a key.
func (p ParIO) KeepPlaces(ctx context.Context, waiters []Waiter, ttl time.Duration) error {
	byKey := map[string][]any{}
	var order []string
	for _, w := range waiters {
		if w.Key == "" {
			continue
		}
		if byKey[w.Key] == nil {
			order = append(order, w.Key)
		}
		byKey[w.Key] = append(byKey[w.Key], w.ID, w.Place)
	}
	for _, key := range order {
		_, wait := keyNames(key)
		args := append([]any{ttl.Milliseconds()}, byKey[key]...)
		if err := parKeepScript.Run(ctx, p.rdb, []string{wait}, args...).Err(); err != nil {
			return fmt.Errorf("keep places in %s's parallelism line: %w", key, err)
		}
	}
	return nil
}

// Slots are how many of key's slots are taken (leases ending after now)
// and how many requests wait for one, in one round trip.
func (p ParIO) Slots(ctx context.Context, key string, now time.Time) (taken, waiting int64, err error) {
	slots, wait := keyNames(key)
	pipe := p.rdb.Pipeline()
	n := pipe.ZCount(ctx, slots, strconv.FormatInt(now.UnixMilli(), 10), "+inf")
	w := pipe.ZCard(ctx, wait)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, err
	}
	return n.Val(), w.Val(), nil
}
