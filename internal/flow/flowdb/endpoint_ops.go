package flowdb

// The endpoints' breakers outside the gate: an open (the breaker's or an
// operator's), a close, the tenants' endpoints opened by hand, and the
// reads of the lists.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/tenant"
)

// Open opens endpoint name unless it is open already (by "breaker" or
// "operator", its failure ratio ratio, probed after probe), and lists it
// even when it was open (a list that failed is mended). opened says it
// was not open.
func (e EndpointIO) Open(ctx context.Context, name string, now time.Time, probe time.Duration, ratio float64, ttl time.Duration, by string) (opened bool, err error) {
	state, _, _, _ := keys.FlowEndpoint(name)
	n, err := epOpenScript.Run(ctx, e.rdb, []string{state}, now.UnixMilli(), probe.Milliseconds(),
		strconv.FormatFloat(ratio, 'f', 3, 64), ttl.Milliseconds(), by).Int()
	if err != nil {
		return false, fmt.Errorf("open endpoint %s: %w", name, err)
	}
	if err := e.rdb.HSet(ctx, keys.FlowEndpoints, name, "1").Err(); err != nil {
		return n == 1, fmt.Errorf("list open endpoint %s: %w", name, err)
	}
	return n == 1, nil
}

// ListHandOpened lists endpoint name among its tenant's endpoints opened
// by hand, unless limit (0: none) are listed; listed says it is.
func (e EndpointIO) ListHandOpened(ctx context.Context, name string, limit int, now time.Time) (listed bool, err error) {
	owner, _ := tenant.Split(name)
	n, err := epHandOpenScript.Run(ctx, e.rdb, []string{keys.FlowHandOpened(owner)}, name, limit, now.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("list endpoint %s as opened by hand: %w", name, err)
	}
	return n == 1, nil
}

// PruneHandOpened drops from tenant owner's endpoints opened by hand
// those no longer held open by an operator, listed longer than keep ago.
func (e EndpointIO) PruneHandOpened(ctx context.Context, owner string, now time.Time, keep time.Duration) error {
	hand := keys.FlowHandOpened(owner)
	listed, err := e.rdb.HGetAll(ctx, hand).Result()
	if err != nil {
		return fmt.Errorf("read the endpoints opened by hand: %w", err)
	}
	var names []string
	for name, at := range listed {
		if ms, err := strconv.ParseInt(at, 10, 64); err != nil || now.Sub(time.UnixMilli(ms)) > keep {
			names = append(names, name)
		}
	}
	pipe := e.rdb.Pipeline()
	states := make([]*redis.SliceCmd, len(names))
	for i, name := range names {
		state, _, _, _ := keys.FlowEndpoint(name)
		states[i] = pipe.HMGet(ctx, state, "state", "by")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the endpoints opened by hand: %w", err)
	}
	var gone []string
	for i, name := range names {
		v := states[i].Val()
		state, _ := v[0].(string)
		by, _ := v[1].(string)
		if by != "operator" || (state != EndpointOpen && state != EndpointHalfOpen) {
			gone = append(gone, name)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	if err := e.rdb.HDel(ctx, hand, gone...).Err(); err != nil {
		return fmt.Errorf("forget endpoints no longer opened by hand: %w", err)
	}
	return nil
}

// Close closes endpoint name and unlists it (from the endpoints not
// closed and its tenant's opened by hand); closed says it was not closed.
func (e EndpointIO) Close(ctx context.Context, name string, now time.Time, ttl time.Duration) (closed bool, err error) {
	state, _, _, _ := keys.FlowEndpoint(name)
	n, err := epCloseScript.Run(ctx, e.rdb, []string{state}, now.UnixMilli(), ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("close endpoint %s: %w", name, err)
	}
	owner, _ := tenant.Split(name)
	pipe := e.rdb.Pipeline()
	pipe.HDel(ctx, keys.FlowEndpoints, name)
	pipe.HDel(ctx, keys.FlowHandOpened(owner), name)
	if _, err := pipe.Exec(ctx); err != nil {
		return n == 1, fmt.Errorf("unlist endpoint %s: %w", name, err)
	}
	return n == 1, nil
}

// Listed are the names of the endpoints listed as not closed.
func (e EndpointIO) Listed(ctx context.Context) ([]string, error) {
	return e.rdb.HKeys(ctx, keys.FlowEndpoints).Result()
}

// readBatch bounds the endpoints read in one round trip.
const readBatch = 500

// Breaker is an endpoint's breaker as stored: its state hash and its
// waiters.
type Breaker struct {
	Name    string
	Hash    map[string]string
	Waiting int64
}

// Read reads the breakers of names, in order, a round trip per readBatch
// of them.
func (e EndpointIO) Read(ctx context.Context, names []string) ([]Breaker, error) {
	out := make([]Breaker, 0, len(names))
	for batch := range slices.Chunk(names, readBatch) {
		pipe := e.rdb.Pipeline()
		hs := make([]*redis.MapStringStringCmd, len(batch))
		ns := make([]*redis.IntCmd, len(batch))
		for i, name := range batch {
			state, line, _, _ := keys.FlowEndpoint(name)
			hs[i] = pipe.HGetAll(ctx, state)
			ns[i] = pipe.ZCard(ctx, line)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("read endpoints: %w", err)
		}
		for i, name := range batch {
			out = append(out, Breaker{Name: name, Hash: hs[i].Val(), Waiting: ns[i].Val()})
		}
	}
	return out, nil
}

// States reads the state of each of names ("": none), in order, a round
// trip per readBatch of them.
func (e EndpointIO) States(ctx context.Context, names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	for batch := range slices.Chunk(names, readBatch) {
		pipe := e.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, len(batch))
		for i, name := range batch {
			state, _, _, _ := keys.FlowEndpoint(name)
			cmds[i] = pipe.HGet(ctx, state, "state")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read the states of endpoints: %w", err)
		}
		for _, c := range cmds {
			out = append(out, c.Val())
		}
	}
	return out, nil
}
