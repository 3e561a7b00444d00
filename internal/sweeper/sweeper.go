// Package sweeper reconciles retryd's records with asynq's task state. The
// records are the source of truth; asynq can lose or strand a task (a crash
// between writing a record and enqueueing, a worker killed mid-attempt whose
// task stays "active", a task archived while its record says pending, Redis
// eviction). The sweeper finds every pending or retrying request whose task
// is missing, archived, or active without a live lease, and hands it back
// to the workers; every due callback whose task is missing; it deletes
// the requests past their retention (Store.TrimIndexes: no key of a
// finished request has a TTL), and erases the payloads whose payload
// retention ended. Every
// worker runs a sweeper; they take turns, so all of them together sweep
// once per interval, and never two at once (a Redis lock).
//
// It is a safety net, and its cost must not grow with the backlog: every
// sweep reads asynq's active tasks (as many as attempts in flight) for
// stranded ones, but looks at the unfinished records a slice at a time,
// continuing where the last sweep stopped, so each waiting request is
// looked at about once per SafetyNetPeriod (more often only while the
// backlog is small: a sweep looks at MinPerSweep at least).
package sweeper

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/waiting"
	"github.com/retryd/retryd/tasks"
)

// Store is the part of the record store the sweeper reads.
type Store interface {
	UnfinishedCount(ctx context.Context, part int, tenant string, status record.Status) (int64, error)
	UnfinishedIDs(ctx context.Context, part int, tenant string, status record.Status, cursor string, n int) ([]string, string, error)
	UnfinishedRecords(ctx context.Context, part int, ids []string) ([]record.Unfinished, error)
	Tenants(ctx context.Context) ([]string, error)
	Partitions() partition.Set
	CallbacksDue(ctx context.Context, n int) ([]string, error)
	TrimIndexes(ctx context.Context, now time.Time, n int) (removed int, more bool, err error)
	ExpirePayloads(ctx context.Context, now time.Time, n int) (erased int, more bool, err error)
}

// Queue hands tasks back to asynq.
type Queue interface {
	Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error
	Requeue(ctx context.Context, id string, attemptTimeout time.Duration, maxRetries int) error
	EnqueueCallback(ctx context.Context, id string) error
}

// Stats counts what one sweep did.
type Stats struct {
	Checked      int // unfinished requests looked at
	Missing      int // had no task: enqueued
	Archived     int // task archived while the record is unfinished: requeued
	Stranded     int // task active without a live lease: put back to pending
	CallbackLost int // due callback without a task: enqueued
	Trimmed      int // index entries removed by the trim (of requests past their retention, deleted with them)
	// PayloadsExpired: payloads erased at the end of their tenant's
	// payload retention.
	PayloadsExpired int
	// Full: the sweep looked at the records (the interval's turn), not
	// only at the tasks of dead workers.
	Full bool
}

func (s Stats) changed() bool { return s.Missing+s.Archived+s.Stranded+s.CallbackLost > 0 }

// Sweeper is the reconciler.
type Sweeper struct {
	RDB      redis.UniversalClient // for the lock and asynq's task state (through internal/waiting)
	Store    Store
	Queue    Queue
	Log      *slog.Logger
	Interval time.Duration
	// Grace skips records changed this recently: the API or a worker is
	// probably between writing the record and enqueueing.
	Grace time.Duration
	Owner string // unique per process, for the lock
	// Clock is the clock (clock.Real when nil); tests set it.
	Clock clock.Clock
	// OnSweep, when set, receives every sweep's counts (metrics).
	OnSweep func(Stats)
	// Bell, when set, is rung after stranded tasks go back to pending, so
	// an idle worker takes them at once rather than at its next poll.
	Bell interface {
		Ring(ctx context.Context) error
	}

	batch int // index entries trimmed and payloads erased per call (0: 500); tests set it
}

const (
	lockKey   = record.SweeperLockKey
	turnKey   = record.SweeperTurnKey
	cursorKey = record.SweeperCursorKey
)

// The safety net's pace.
const (
	// SafetyNetPeriod is about how often each unfinished request is looked
	// at, once the backlog is larger than MinPerSweep per sweep covers.
	SafetyNetPeriod = 5 * time.Minute
	// MinPerSweep is the records of one status and partition one sweep
	// looks at, at least: a small backlog (a crash test's, say) is
	// covered in a sweep or two, at a cost that stays bounded.
	MinPerSweep = 200
)

// budget is how many of total unfinished records one sweep looks at.
func (s *Sweeper) budget(total int64) int64 {
	if s.Interval <= 0 || s.Interval >= SafetyNetPeriod {
		return total
	}
	per := (total*int64(s.Interval) + int64(SafetyNetPeriod) - 1) / int64(SafetyNetPeriod)
	return min(total, max(per, MinPerSweep))
}

// lockTTL bounds how long a crashed sweeper holds the lock: a worker killed
// mid-sweep stops every sweep for that long. A sweep is paced (a bounded
// slice of the records), so it ends well within it; were one slower, two
// sweeps at once repair the same things twice, which is harmless (an
// enqueue of an existing task id is a no-op).
const lockTTL = 10 * time.Second

// Run sweeps every Interval until ctx ends, taking turns with the other
// workers' sweepers: one of them sweeps per interval.
func (s *Sweeper) Run(ctx context.Context) {
	clock.Every(ctx, s.clock(), s.Interval, func() {
		// Every worker runs a sweeper. The look at the records goes by
		// turns, one per interval over all workers: the pace its budget
		// is made for. The turn's TTL is a little short of the interval,
		// so a tick late by a few milliseconds still finds it free. The
		// tasks of dead workers are put back on every worker's tick: that
		// costs as many commands as attempts in flight, and with more
		// workers they come back sooner.
		mine, err := s.RDB.SetNX(ctx, turnKey, s.Owner, s.Interval*9/10).Result()
		if err != nil {
			s.Log.Warn("sweep failed", "err", err)
			return
		}
		var st Stats
		var ran bool
		if mine {
			st, ran, err = s.SweepOnce(ctx)
		} else {
			st, ran, err = s.locked(ctx, s.repairAllStranded)
		}
		switch {
		case err != nil:
			s.Log.Warn("sweep failed", "err", err)
		case ran && st.changed():
			s.Log.Warn("sweeper repaired requests", "checked", st.Checked, "missing", st.Missing,
				"archived", st.Archived, "stranded", st.Stranded, "callbacks", st.CallbackLost)
		}
		if st.PayloadsExpired > 0 {
			s.Log.Info("payloads erased at the end of their payload retention", "requests", st.PayloadsExpired)
		}
		if ran && s.OnSweep != nil {
			s.OnSweep(st)
		}
	})
}

// sweepBudget bounds the time one sweep spends on each of its batched
// jobs (trimming indexes, erasing payloads), well inside its lock.
const sweepBudget = 2 * time.Second

// repeat calls step until it reports nothing more to do, fails, or has
// spent sweepBudget (real time spent, whatever the sweeper's clock).
func repeat(step func() (more bool, err error)) error {
	start := time.Now()
	for {
		more, err := step()
		if err != nil || !more || time.Since(start) >= sweepBudget {
			return err
		}
	}
}

// releaseScript deletes the lock only if this owner holds it.
//
//go:embed scripts/release_lock.lua
var releaseLock string

var releaseScript = redis.NewScript(releaseLock)

// SweepOnce runs one sweep if no other process is sweeping. ran says
// whether this process held the lock.
func (s *Sweeper) SweepOnce(ctx context.Context) (st Stats, ran bool, err error) {
	return s.locked(ctx, s.sweep)
}

// locked runs job under the sweeper's lock, if no other process holds it.
func (s *Sweeper) locked(ctx context.Context, job func(context.Context) (Stats, error)) (st Stats, ran bool, err error) {
	ok, err := s.RDB.SetNX(ctx, lockKey, s.Owner, lockTTL).Result()
	if err != nil || !ok {
		return st, false, err
	}
	defer releaseScript.Run(context.WithoutCancel(ctx), s.RDB, []string{lockKey}, s.Owner)
	st, err = job(ctx)
	return st, true, err
}

func (s *Sweeper) clock() clock.Clock {
	if s.Clock != nil {
		return s.Clock
	}
	return clock.Real
}

func (s *Sweeper) now() time.Time { return s.clock().Now() }

// repairAllStranded puts back the tasks of dead workers in every
// partition.
func (s *Sweeper) repairAllStranded(ctx context.Context) (Stats, error) {
	var st Stats
	now, parts := s.now(), s.Store.Partitions()
	for part := 0; part < parts.Len(); part++ {
		if err := s.repairStranded(ctx, parts.Tag(part), now, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (s *Sweeper) sweep(ctx context.Context) (Stats, error) {
	st, err := s.repairAllStranded(ctx)
	if err != nil {
		return st, err
	}
	st.Full = true
	now, parts := s.now(), s.Store.Partitions()
	tenants, err := s.Store.Tenants(ctx)
	if err != nil {
		return st, err
	}
	for part := 0; part < parts.Len(); part++ {
		for _, t := range tenants {
			for _, status := range []record.Status{record.Pending, record.Retrying} {
				if err := s.sweepSlice(ctx, part, t, status, now, &st); err != nil {
					return st, err
				}
			}
		}
	}
	batch := s.batch
	if batch <= 0 {
		batch = 500
	}
	// Both go batch after batch, so that they keep up with requests
	// finishing faster than a batch a sweep.
	err = repeat(func() (bool, error) {
		n, more, err := s.Store.TrimIndexes(ctx, now, batch)
		st.Trimmed += n
		return more, err
	})
	if err != nil {
		return st, err
	}
	err = repeat(func() (bool, error) {
		n, more, err := s.Store.ExpirePayloads(ctx, now, batch)
		st.PayloadsExpired += n
		return more, err
	})
	if err != nil {
		return st, err
	}
	due, err := s.Store.CallbacksDue(ctx, 1000)
	if err != nil {
		return st, err
	}
	byPart := map[int][]string{}
	for _, id := range due {
		byPart[parts.OfID(id)] = append(byPart[parts.OfID(id)], id)
	}
	for part, ids := range byPart {
		if err := s.repairCallbacks(ctx, parts.Tag(part), ids, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sweepSlice looks at the next slice of tenant t's unfinished records of
// status in partition part, going on from where the last sweep stopped.
func (s *Sweeper) sweepSlice(ctx context.Context, part int, t string, status record.Status, now time.Time, st *Stats) error {
	total, err := s.Store.UnfinishedCount(ctx, part, t, status)
	if err != nil || total == 0 {
		return err
	}
	field := fmt.Sprintf("%d:%s", part, status) // the default tenant's, as before tenants
	if t != tenant.Default {
		field += ":" + t
	}
	cursor, err := s.RDB.HGet(ctx, cursorKey, field).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	queue := s.Store.Partitions().Tag(part)
	wrapped := cursor == ""
	for left := s.budget(total); left > 0; {
		n := min(left, 500)
		ids, next, err := s.Store.UnfinishedIDs(ctx, part, t, status, cursor, int(n))
		if err != nil {
			return err
		}
		if err := s.repair(ctx, part, queue, ids, now, st); err != nil {
			return err
		}
		left -= n
		cursor = next
		if next == "" {
			if wrapped {
				break
			}
			wrapped = true // the end: go on from the start
		}
	}
	return s.RDB.HSet(ctx, cursorKey, field, cursor).Err()
}

// repairStranded puts back to pending the active tasks of queue whose
// worker died (lease gone or ended).
func (s *Sweeper) repairStranded(ctx context.Context, queue string, now time.Time, st *Stats) error {
	ids, err := waiting.Stranded(ctx, s.RDB, queue, now)
	if err != nil {
		return err
	}
	requeued := 0
	for _, id := range ids {
		moved, err := waiting.RequeueStranded(ctx, s.RDB, queue, id, now)
		if err != nil {
			return fmt.Errorf("requeue stranded %s: %w", id, err)
		}
		if moved {
			requeued++
			st.Stranded++
			s.Log.Warn("sweeper: task was active without a live lease (worker gone); back to pending", "taskId", id)
		}
	}
	if requeued > 0 && s.Bell != nil {
		if err := s.Bell.Ring(ctx); err != nil {
			s.Log.Warn("sweeper could not ring the doorbell; the workers' next poll takes the requeued tasks", "err", err)
		}
	}
	return nil
}

// repairCallbacks enqueues the due callbacks among ids (of the queue) that
// have no task.
func (s *Sweeper) repairCallbacks(ctx context.Context, queue string, due []string, st *Stats) error {
	cbIDs := make([]string, len(due))
	for i, id := range due {
		cbIDs[i] = tasks.CallbackTaskID(id)
	}
	cbStates, err := waiting.TaskStates(ctx, s.RDB, queue, cbIDs)
	if err != nil {
		return err
	}
	for i, id := range due {
		if cbStates[i].State == "" {
			if err := s.Queue.EnqueueCallback(ctx, id); err != nil {
				return fmt.Errorf("enqueue callback of %s: %w", id, err)
			}
			st.CallbackLost++
		}
	}
	return nil
}

// repair looks at the tasks of ids (unfinished, as their index says) and
// hands back those missing or archived. Only those few records are read:
// the task's state first, so a request that finished between the two
// reads shows as finished, never as missing its task.
func (s *Sweeper) repair(ctx context.Context, part int, queue string, ids []string, now time.Time, st *Stats) error {
	states, err := waiting.TaskStates(ctx, s.RDB, queue, ids)
	if err != nil {
		return err
	}
	state := make(map[string]string)
	var suspect []string
	for i, id := range ids {
		switch states[i].State {
		case "", "archived":
			suspect = append(suspect, id)
			state[id] = states[i].State
		}
	}
	batch, err := s.Store.UnfinishedRecords(ctx, part, suspect)
	if err != nil {
		return err
	}
	st.Checked += len(ids) - len(suspect) + len(batch)
	for _, u := range batch {
		if now.Sub(u.UpdatedAt) < s.Grace {
			continue
		}
		timeout := time.Duration(u.TimeoutMs) * time.Millisecond
		switch state[u.ID] {
		case "":
			if err := s.Queue.Enqueue(ctx, u.ID, u.NextAttemptAt, timeout, u.MaxRetries); err != nil {
				return fmt.Errorf("enqueue %s: %w", u.ID, err)
			}
			st.Missing++
			s.Log.Warn("sweeper: request had no task; enqueued", "requestId", u.ID)
		case "archived":
			if err := s.Queue.Requeue(ctx, u.ID, timeout, u.MaxRetries); err != nil {
				return fmt.Errorf("requeue %s: %w", u.ID, err)
			}
			st.Archived++
			s.Log.Warn("sweeper: unfinished request's task was archived; requeued", "requestId", u.ID)
		}
		// An active task is repairStranded's: it reads them all, every
		// sweep.
	}
	return nil
}
