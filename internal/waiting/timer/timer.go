// Package timer is retryd's own timer: it starts a waiting task at its due
// time to the millisecond, holding no worker slot meanwhile.
//
// asynq keeps due times in whole seconds and forwards due tasks on a poll,
// so on its own a retry starts up to a second late, or early. Every task
// that waits for a time (a delayed request, a retry after its backoff, a
// rate-limited request's turn) also gets an entry in its partition's timer,
// a sorted set by due time in ms in the partition's cluster slot. asynq is
// given a due time a little later (internal/waiting's Lag), as a safety
// net only. Every worker runs Run: it sleeps until the earliest entry,
// moves the due tasks to asynq's pending list (asynqx.MoveDue) and rings
// the doorbell, so an idle worker starts them at once. An entry earlier
// than any before is announced on a channel, so the workers sleeping
// towards a later one wake and sleep again until it.
//
// One worker at a time follows a partition's entries: a worker whose look
// finds that another moved the partition's tasks in the last MoverNote
// looks again only FollowGrace after the earliest entry it saw (or after
// MaxSleep; all three are Tuning's), so a due entry is moved by one
// process and the others look once after it, finding it gone. If the
// follower stops, dies or misses an entry, another's look moves it: a
// timed task is late by at most FollowGrace then, and never early.
package timer

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/waiting/asynqx"
)

// Batch is how many due tasks one script moves.
const Batch = 200

// addScript adds (or moves) an entry and says whether it is now the
// earliest: scripts/add.lua.
var addScript = script("add")

// Ringer wakes an idle worker when tasks became pending (asynqx.Bell).
type Ringer interface {
	Ring(ctx context.Context) error
}

// Timer is the timers of a set of asynq queues (the partitions).
type Timer struct {
	Client redis.UniversalClient
	Names  Names
	// Queues are the queues Run serves; Bell is rung when tasks moved
	// (nil: nobody to ring).
	Queues []string
	Bell   Ringer
	Log    *slog.Logger
	Clock  clock.Clock

	tune  Tuning // New's, with its defaults
	local chan struct{}
	mu    sync.Mutex
	// looks is when Run looks at each queue's entries next, holds at its
	// parked tasks (missing: at once).
	looks, holds map[string]time.Time
	// id names this timer in a partition's mover note.
	id string
}

// Names are the timer's Redis names (internal/keys builds them).
type Names struct {
	// Timer names the timer of a queue; Parked its list of tasks just
	// parked; Mover who moved its due tasks last. Bell is the doorbell
	// when it shares the queue's cluster slot (the move rings it), else ""
	// (Run rings through the Ringer); nil: "" for every queue. Channel is
	// where earlier entries are announced.
	Timer, Parked, Mover, Bell func(queue string) string
	Channel                    string
}

// New returns the timer of queues; tune's zero fields take DefaultTuning's.
func New(rdb redis.UniversalClient, queues []string, names Names, bell Ringer, log *slog.Logger, tune Tuning) *Timer {
	return &Timer{Client: rdb, Names: names, Queues: queues, Bell: bell, Log: log, Clock: clock.Real,
		tune: tune.withDefaults(), local: make(chan struct{}, 1), id: strconv.FormatUint(rand.Uint64(), 36)}
}

// Park notes that task id of queue is being parked for flow control: Run
// moves it from asynq's retry set to its scheduled set once asynq put it
// there, so that the dashboard does not show a waiting request as a retry.
func (t *Timer) Park(ctx context.Context, queue, id string) error {
	now := t.Clock.Now()
	z := redis.Z{Score: float64(now.Add(t.tune.ParkDelay).UnixMilli()), Member: asynqx.ParkMember(id, now)}
	if err := t.Client.ZAdd(ctx, t.Names.Parked(queue), z).Err(); err != nil {
		return fmt.Errorf("note the park of %s: %w", id, err)
	}
	t.plan(&t.holds, queue, now.Add(t.tune.ParkDelay))
	return nil
}

// At sets task id of queue to start at due. An entry earlier than every
// other is announced, so the workers' timers wake for it.
func (t *Timer) At(ctx context.Context, queue, id string, due time.Time) error {
	// Rounded up to the millisecond: an entry is never before its time.
	dueMs := due.Add(time.Millisecond - time.Nanosecond).UnixMilli()
	first, err := addScript.Run(ctx, t.Client, []string{t.Names.Timer(queue)}, id, dueMs).Int()
	if err != nil {
		return fmt.Errorf("set the timer of %s: %w", id, err)
	}
	if first == 1 {
		t.plan(&t.looks, queue, due.Add(-t.tune.Early))
		if err := t.Client.Publish(ctx, t.Names.Channel, queue).Err(); err != nil {
			// The other workers look again within MaxSleep.
			t.Log.Warn("could not announce an earlier timer", "requestId", id, "err", err)
		}
	}
	return nil
}

// plan has this process's Run look at queue by at (its entries: looks; its
// parked tasks: holds), and wakes it when that is earlier than it planned.
func (t *Timer) plan(looks *map[string]time.Time, queue string, at time.Time) {
	t.mu.Lock()
	planned, ok := (*looks)[queue]
	earlier := !ok || at.Before(planned)
	if earlier {
		if *looks == nil {
			*looks = map[string]time.Time{}
		}
		(*looks)[queue] = at
	}
	t.mu.Unlock()
	if !earlier || t.local == nil {
		return
	}
	select {
	case t.local <- struct{}{}:
	default:
	}
}

// Run moves due tasks until ctx ends. It looks at a queue only when one
// of its entries is due (or MaxSleep passed), so a park or a retry costs
// the scripts of its own partition, not of every partition.
func (t *Timer) Run(ctx context.Context) {
	sub := t.Client.Subscribe(ctx, t.Names.Channel)
	defer sub.Close()
	announced := sub.ChannelWithSubscriptions()
	// The first look comes with the subscription's confirmation, so none
	// is missed between the two; MaxSleep if it is slow to come.
	sleep := t.Clock.NewTimer(t.tune.MaxSleep)
	defer sleep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sleep.C():
		case msg := <-announced:
			switch m := msg.(type) {
			case *redis.Message:
				// An entry earlier than any before, added by another process.
				t.plan(&t.looks, m.Payload, t.Clock.Now())
			case *redis.Subscription:
				// Subscribed, or subscribed again: announcements made while
				// the channel was down are lost, so every queue is looked
				// at now rather than at the next MaxSleep.
				now := t.Clock.Now()
				for _, q := range t.Queues {
					t.plan(&t.looks, q, now)
				}
			}
		case <-t.local:
		}
		next := t.moveDue(ctx)
		sleep.Reset(max(0, next.Sub(t.Clock.Now())))
	}
}

// moveDue looks at the queues due for a look, moving their due tasks and
// holding their parked ones, and returns when to look again.
func (t *Timer) moveDue(ctx context.Context) time.Time {
	now := t.Clock.Now()
	moved := 0
	for _, q := range t.Queues {
		looked, woke := false, 0
		if t.due(&t.looks, q, now) {
			looked = true
			n, next := t.lookEntries(ctx, q)
			if t.bellOf(q) == "" {
				moved += n // else rung by the move
			}
			t.replan(&t.looks, q, now, next)
		}
		// A hold due soon is done with the look: at rest both come once
		// per MaxSleep, and apart they would wake Run twice.
		asOf := now
		if looked {
			asOf = now.Add(t.tune.HoldAlong)
		}
		if t.due(&t.holds, q, asOf) {
			var next time.Time
			next, woke = t.holdParked(ctx, q)
			t.replan(&t.holds, q, asOf, next)
		}
		if t.bellOf(q) == "" {
			moved += woke // else rung by the hold
		}
	}
	if moved > 0 && t.Bell != nil {
		if err := t.Bell.Ring(ctx); err != nil && ctx.Err() == nil {
			t.Log.Warn("could not ring the doorbell; the workers' next poll takes the due tasks", "err", err)
		}
	}
	next := t.Clock.Now().Add(t.tune.MaxSleep)
	t.mu.Lock()
	for _, q := range t.Queues {
		for _, looks := range []map[string]time.Time{t.looks, t.holds} {
			if at, ok := looks[q]; !ok || at.Before(next) {
				next = at
			}
		}
	}
	t.mu.Unlock()
	return next
}

// bellOf is the doorbell a move of queue's tasks rings itself, or "".
func (t *Timer) bellOf(q string) string {
	if t.Names.Bell == nil {
		return ""
	}
	return t.Names.Bell(q)
}

// due says whether queue's look in looks is due at now.
func (t *Timer) due(looks *map[string]time.Time, q string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := (*looks)[q]
	return !ok || !at.After(now)
}

// replan sets queue's next look in looks to next after a look at now,
// unless a park or an entry asked for an earlier one meanwhile.
func (t *Timer) replan(looks *map[string]time.Time, q string, now, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if *looks == nil {
		*looks = map[string]time.Time{}
	}
	if at, ok := (*looks)[q]; !ok || !at.After(now) || next.Before(at) {
		(*looks)[q] = next
	}
}

// lookEntries moves queue's due tasks, and returns how many it moved and
// when to look again: at its earliest entry left (FollowGrace after it
// while another worker moves the queue's tasks), at most MaxSleep on.
func (t *Timer) lookEntries(ctx context.Context, q string) (int, time.Time) {
	next := t.Clock.Now().Add(t.tune.MaxSleep)
	moved := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, t.tune.CallTimeout)
		d, err := asynqx.MoveDue(cctx, t.Client, q, t.Names.Timer(q), t.Names.Mover(q), t.bellOf(q), t.id,
			t.Clock.Now().Add(t.tune.Early), Batch, t.tune.graces())
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.Log.Warn("could not move due tasks; asynq's own due times will", "queue", q, "err", err)
			}
			return moved, t.Clock.Now().Add(min(t.tune.ErrorRetry, t.tune.MaxSleep))
		}
		moved += d.Moved
		if d.Moved < Batch {
			at := d.First.Add(-t.tune.Early)
			if d.Mover != "" && d.Mover != t.id {
				// Another worker follows this timer: look once after it
				// should have moved the entry.
				at = d.First.Add(t.tune.FollowGrace)
			}
			if !d.First.IsZero() && at.Before(next) {
				next = at
			}
			return moved, next
		}
	}
}

// holdParked moves queue's parked tasks out of asynq's retry set (to
// pending, those woken on their way), and returns when to look again (at
// the earliest parked entry left, at most MaxSleep on) and how many it
// woke.
func (t *Timer) holdParked(ctx context.Context, q string) (time.Time, int) {
	next := t.Clock.Now().Add(t.tune.MaxSleep)
	cctx, cancel := context.WithTimeout(ctx, t.tune.CallTimeout)
	first, woke, err := asynqx.HoldParked(cctx, t.Client, q, t.Names.Parked(q), t.bellOf(q), t.Clock.Now(), Batch, t.tune.graces())
	cancel()
	switch {
	case err != nil:
		if ctx.Err() == nil {
			t.Log.Warn("could not move parked tasks out of the retry list", "queue", q, "err", err)
		}
		next = t.Clock.Now().Add(min(t.tune.ErrorRetry, t.tune.MaxSleep))
	case !first.IsZero() && first.Before(next):
		next = first
	}
	return next, woke
}
