package flow

// The endpoint's moves that are not the gate's: an operator's open and
// close, the wake of a closed endpoint's line, a canceled waiter's leave.

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

// wakeEndpointLine wakes the waiters of closed endpoint name, in line
// order, until its line is empty or it opened again. Those with
// parallelism first get back their places in their keys' lines (ttl: the
// lines' time to live), so that their slots go in arrival order however
// the woken race to them.
func wakeEndpointLine(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string, ttl time.Duration) error {
	state, line, keys, joined := record.FlowEndpointKeys(name)
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		taken, err := epTakeScript.Run(tctx, rdb, []string{state, line, keys, joined}, resumeBatch).StringSlice()
		if err == nil && len(taken)%3 != 0 {
			err = fmt.Errorf("endpoint take script: unexpected reply %v", taken)
		}
		if err == nil {
			err = keepParPlaces(tctx, rdb, taken, ttl)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("take the waiters of %s: %w", name, err)
		}
		moves := make([]Move, 0, len(taken)/3)
		for i := 0; i < len(taken); i += 3 {
			moves = append(moves, Now(taken[i]))
		}
		// A waiter Redis could not wake has its safety net.
		move(ctx, mover, log, moves...)
		if len(taken) < 3*resumeBatch {
			return nil
		}
	}
}

var parKeepScript = script("par_keep")

// keepParPlaces puts the waiters of taken ({id, place, key or "", ...},
// from ep_take.lua) back at their places in their keys' parallelism
// lines, one round trip a key.
func keepParPlaces(ctx context.Context, rdb redis.UniversalClient, taken []string, ttl time.Duration) error {
	byKey := map[string][]any{}
	var order []string
	for i := 0; i < len(taken); i += 3 {
		id, place, key := taken[i], taken[i+1], taken[i+2]
		if key == "" {
			continue
		}
		if byKey[key] == nil {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], id, place)
	}
	for _, key := range order {
		_, wait := keyNames(key)
		args := append([]any{ttl.Milliseconds()}, byKey[key]...)
		if err := parKeepScript.Run(ctx, rdb, []string{wait}, args...).Err(); err != nil {
			return fmt.Errorf("keep places in %s's parallelism line: %w", key, err)
		}
	}
	return nil
}

var epCancelScript = script("ep_cancel", "ep_hand_on")

// EndpointCanceled takes canceled request id out of its endpoint's line
// (endpoint of tenant t); when it was the waiter to be woken for the next
// probe, the next waiter is, in its place.
func EndpointCanceled(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, t, endpoint, id string) error {
	if endpoint == "" {
		return nil
	}
	state, line, keys, joined := record.FlowEndpointKeys(EndpointName(t, endpoint))
	res, err := epCancelScript.Run(ctx, rdb, []string{state, line, keys, joined}, id).StringSlice()
	if err != nil {
		return fmt.Errorf("take %s out of its endpoint's line: %w", id, err)
	}
	if len(res) != 2 {
		return nil
	}
	at, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return fmt.Errorf("endpoint cancel script: unexpected reply %v", res)
	}
	if a := move(ctx, mover, log, At(res[0], time.UnixMilli(at))); len(a.stalled) > 0 {
		return fmt.Errorf("could not wake %s for the next probe", res[0])
	}
	return nil
}

// EndpointChange is a change of an endpoint's state the breaker made.
type EndpointChange struct {
	Tenant, Endpoint string // whose, and scheme://host:port
	Open             bool   // opened; else closed
	// FailureRatio and Attempts are the window's that opened it.
	FailureRatio float64
	Attempts     int
}

// changed tells Config.OnEndpoint of a change of endpoint name.
func (eg *endpointGate) changed(name string, open bool, ratio float64, attempts int) {
	if eg.cfg.OnEndpoint == nil {
		return
	}
	t, endpoint := tenant.Split(name)
	eg.cfg.OnEndpoint(EndpointChange{Tenant: t, Endpoint: endpoint, Open: open, FailureRatio: ratio, Attempts: attempts})
}

// OpenEndpoint opens endpoint name (tenant-qualified scheme://host:port)
// unless it is open already: the breaker's decision (by "breaker"), or an
// operator's ("operator"). opened says it did.
func OpenEndpoint(ctx context.Context, rdb redis.UniversalClient, name string, ratio float64, by string, now time.Time, tune Tuning) (bool, error) {
	tune = tune.withDefaults()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	state, _, _, _ := record.FlowEndpointKeys(name)
	n, err := epOpenScript.Run(ctx, rdb, []string{state}, now.UnixMilli(), tune.BreakerProbe.Milliseconds(),
		strconv.FormatFloat(ratio, 'f', 3, 64), tune.KeyTTL.Milliseconds(), by).Int()
	if err != nil {
		return false, fmt.Errorf("open endpoint %s: %w", name, err)
	}
	// Listed even when it was open already: a list that failed is
	// mended.
	if err := rdb.HSet(ctx, record.FlowEndpointsKey, name, "1").Err(); err != nil {
		return n == 1, fmt.Errorf("list open endpoint %s: %w", name, err)
	}
	return n == 1, nil
}

// ErrEndpointLimit: the tenant has opened its limit of endpoints by hand
// (ENDPOINT_LIMIT); nothing was opened.
var ErrEndpointLimit = errors.New("endpoint limit reached")

var epHandOpenScript = script("ep_hand_open")

// handOpenedKeep is how long an endpoint listed as opened by hand stays
// listed before a full list looks at whether it is still open: an open
// in progress has listed it and not opened it yet.
const handOpenedKeep = time.Minute

// HandOpenEndpoint opens endpoint name (tenant-qualified) as an operator
// of its tenant, who may have at most limit endpoints opened by hand (0:
// no limit; ErrEndpointLimit past it). opened says it was not open.
func HandOpenEndpoint(ctx context.Context, rdb redis.UniversalClient, name string, limit int, now time.Time, tune Tuning) (bool, error) {
	owner, _ := tenant.Split(name)
	hand := record.FlowHandOpenedKey(owner)
	list := func() (bool, error) {
		n, err := epHandOpenScript.Run(ctx, rdb, []string{hand}, name, limit, now.UnixMilli()).Int()
		if err != nil {
			return false, fmt.Errorf("list endpoint %s as opened by hand: %w", name, err)
		}
		return n == 1, nil
	}
	listed, err := list()
	if err == nil && !listed {
		// Full: an endpoint closed since (its state expired unused) no
		// longer counts.
		if err = pruneHandOpened(ctx, rdb, hand, now); err == nil {
			listed, err = list()
		}
	}
	if err != nil {
		return false, err
	}
	if !listed {
		return false, fmt.Errorf("%w: %d endpoints opened by hand", ErrEndpointLimit, limit)
	}
	return OpenEndpoint(ctx, rdb, name, 0, "operator", now, tune)
}

// pruneHandOpened drops from a tenant's endpoints opened by hand (hand)
// those no longer held open by an operator, listed longer than
// handOpenedKeep ago.
func pruneHandOpened(ctx context.Context, rdb redis.UniversalClient, hand string, now time.Time) error {
	listed, err := rdb.HGetAll(ctx, hand).Result()
	if err != nil {
		return fmt.Errorf("read the endpoints opened by hand: %w", err)
	}
	var names []string
	for name, at := range listed {
		if ms, err := strconv.ParseInt(at, 10, 64); err != nil || now.Sub(time.UnixMilli(ms)) > handOpenedKeep {
			names = append(names, name)
		}
	}
	pipe := rdb.Pipeline()
	states := make([]*redis.SliceCmd, len(names))
	for i, name := range names {
		state, _, _, _ := record.FlowEndpointKeys(name)
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
	if err := rdb.HDel(ctx, hand, gone...).Err(); err != nil {
		return fmt.Errorf("forget endpoints no longer opened by hand: %w", err)
	}
	return nil
}

// CloseEndpoint closes endpoint name (an operator's decision) and wakes
// its waiters in line order. closed says it was not closed before.
func CloseEndpoint(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string, now time.Time, tune Tuning) (bool, error) {
	tune = tune.withDefaults()
	state, _, _, _ := record.FlowEndpointKeys(name)
	n, err := epCloseScript.Run(ctx, rdb, []string{state}, now.UnixMilli(), tune.KeyTTL.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("close endpoint %s: %w", name, err)
	}
	owner, _ := tenant.Split(name)
	pipe := rdb.Pipeline()
	pipe.HDel(ctx, record.FlowEndpointsKey, name)
	pipe.HDel(ctx, record.FlowHandOpenedKey(owner), name)
	if _, err := pipe.Exec(ctx); err != nil {
		return n == 1, fmt.Errorf("unlist endpoint %s: %w", name, err)
	}
	return n == 1, wakeEndpointLine(ctx, rdb, mover, log, name, tune.KeyTTL)
}
