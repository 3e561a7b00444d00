package flow

// Operators' control of a flow-control key (QStash's flow-control API):
// pause and resume it, pin its parallelism or rate over what requests ask
// for, reset its rate. The settings live in Redis next to the key's
// state; workers read them at most once per ControlTTL per key.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/tenant"
)

// Control is what an operator set on a key.
type Control struct {
	Paused         bool
	PinParallelism int
	PinRate        int
	PinPeriod      time.Duration
}

// ReadControl reads key's Control.
func ReadControl(ctx context.Context, rdb redis.UniversalClient, key string) (Control, error) {
	return readControl(ctx, flowdb.New(rdb), key)
}

// readControl is ReadControl on db.
func readControl(ctx context.Context, db *flowdb.DB, key string) (Control, error) {
	c, err := db.Control.Read(ctx, key)
	return Control(c), err
}

// Pause holds key's requests: none starts until Resume; each waits in the
// key's paused line. A destination's own key (host:port, as its tenant
// names it) holds every request of the tenant to that destination, with a
// flowControl key or without.
func Pause(ctx context.Context, rdb redis.UniversalClient, key string) error {
	return flowdb.New(rdb).Control.Pause(ctx, key)
}

// PausedKeys are the keys an operator paused, each with how many requests
// wait in its paused line.
func PausedKeys(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	return flowdb.New(rdb).Control.PausedKeys(ctx)
}

// resumeBatch is how many waiters of a resumed key one script takes.
const resumeBatch = 100

// Resume lets key's requests start again and wakes those it held,
// answering how many it took out of the paused line (after the resume its
// line is empty, so only Resume can say).
func Resume(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, key string) (released int, err error) {
	db := flowdb.New(rdb)
	if err := db.Control.Unpause(ctx, key); err != nil {
		return 0, err
	}
	for {
		ids, err := db.Control.TakePaused(ctx, key, resumeBatch)
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
	if rate > 0 && period <= 0 {
		period = time.Second
	}
	return flowdb.New(rdb).Control.Pin(ctx, key, parallelism, rate, period)
}

// Unpin drops the pinned parallelism and/or rate of key.
func Unpin(ctx context.Context, rdb redis.UniversalClient, key string, parallelism, rate bool) error {
	return flowdb.New(rdb).Control.Unpin(ctx, key, parallelism, rate)
}

// ResetRate forgets the turns key's rate gave: its next request starts at
// once. Turns given to waiters are dropped; they take new ones.
func ResetRate(ctx context.Context, rdb redis.UniversalClient, key string) error {
	return flowdb.New(rdb).Rate.Reset(ctx, key)
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
	db := flowdb.New(rdb)
	c, err := readControl(ctx, db, key)
	if err != nil {
		return KeyInfo{}, err
	}
	n, err := db.Control.Counts(ctx, key, now)
	if err != nil {
		return KeyInfo{}, err
	}
	info := KeyInfo{Control: c, Waiting: n.Paused + n.Waiting + n.Given + n.Line, InFlight: n.Taken}
	if at := n.NextTurn; n.HasTurn && rate > 0 {
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

// holdPaused parks id in key's paused line if key is still paused in
// Redis (one step, so a resume cannot slip between the check and the
// park); held says it did.
func (op *operatorGate) holdPaused(ctx context.Context, key, id string, now time.Time) (bool, error) {
	return op.db.Control.HoldPaused(ctx, key, id, now, op.tune.KeyTTL)
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
	ctl, err := readControl(rctx, op.db, key)
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
		return &Parked{Until: t.start.Add(op.tune.ParkFallback), Reason: keys.WaitingPaused}
	}
	return nil
}

// MaxControls bounds the keys' Controls a worker keeps.
const MaxControls = 10000

type controlEntry struct {
	Control
	at time.Time
}
