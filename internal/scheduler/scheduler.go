// Package scheduler turns schedules into requests. Every worker runs one;
// there is no leader. Each tick becomes an ordinary request created with the
// Idempotency-Key "schedule:{id}:{fireTime}", which retryd's submission
// stores atomically, so however many replicas process the same tick — or
// one dies halfway and another takes over — the tick makes exactly one
// request. The schedule then moves to its next tick with a compare-and-set.
package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/submit"
)

// MissedAfter is how late a tick may be processed and still fire. A tick
// older than that was missed (the schedulers were down): it fires only
// under catchUp "last", and then only the latest missed tick.
const MissedAfter = 2 * time.Second

// Catch-up policies.
const (
	CatchUpNone = "none"
	CatchUpLast = "last"
)

// Parse parses a cron spec (5 fields or a descriptor such as @hourly or
// @every 10s) in timezone (IANA name; empty means UTC).
func Parse(spec, timezone string) (cron.Schedule, error) {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, errors.New("set the time zone in the timezone field, not in the cron expression")
	}
	if timezone == "" {
		timezone = "UTC"
	}
	if _, err := time.LoadLocation(timezone); err != nil {
		return nil, fmt.Errorf("unknown time zone %q", timezone)
	}
	// robfig/cron silently rounds a sub-second @every up to a second;
	// say so instead: a schedule fires at most once a second.
	if d, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		if every, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && every < MinInterval {
			return nil, fmt.Errorf("@every %s is more often than once a second; a schedule fires at most once a second", every)
		}
	}
	return cron.ParseStandard("CRON_TZ=" + timezone + " " + spec)
}

// MinInterval is the shortest time between two fires of a schedule.
const MinInterval = time.Second

// Store is what the scheduler needs of the record store.
type Store interface {
	DueSchedules(ctx context.Context, now time.Time, n int) ([]string, time.Time, error)
	ScheduleChanges(ctx context.Context) (string, error)
	GetSchedule(ctx context.Context, id string) (*record.Schedule, error)
	AdvanceSchedule(ctx context.Context, id string, from, next time.Time, fires []record.Fire) (bool, error)
	Create(ctx context.Context, r *record.Request, idemKey string, body []byte, opts record.CreateOptions) (*record.Replay, error)
	Partitions() partition.Set
}

// Queue hands a new request to the workers.
type Queue interface {
	Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error
}

// Scheduler fires due schedules.
type Scheduler struct {
	Store    Store
	Queue    Queue
	Log      *slog.Logger
	Interval time.Duration
	Clock    clock.Clock
}

// Run fires due schedules until ctx ends. It wakes at the next fire it
// knows of, at most MaxSleep on, and looks at every partition only when
// that fire is due, when a schedule was created or resumed since its last
// look (one read of a change mark), or FullLook after its last look: an idle
// worker pays one command a MaxSleep, not one per partition.
func (s *Scheduler) Run(ctx context.Context) {
	t := s.Clock.NewTimer(0)
	defer t.Stop()
	var w watch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := s.Clock.Now()
		changes, err := s.Store.ScheduleChanges(ctx)
		if err != nil {
			s.Log.Warn("scheduler could not read the schedules' changes; it looks at every one", "err", err)
		}
		if w.due(now, changes, err) {
			next, err := s.tick(ctx)
			if err != nil {
				s.Log.Warn("scheduler tick failed", "err", err)
			}
			w.looked(now, next, err)
		}
		t.Reset(s.sleep(w.next))
	}
}

// MaxSleep bounds the wait for the next known fire: a schedule created (or
// moved earlier) meanwhile is seen within it.
const MaxSleep = time.Second

// FullLook bounds the time between two looks at every partition, however
// little changed: the safety net of the change counter.
const FullLook = 30 * time.Second

// watch is what a scheduler knows between its looks at every partition.
type watch struct {
	looks   int       // full looks made
	last    time.Time // the last one
	next    time.Time // the earliest fire it found (zero: none)
	changes string    // the change mark it last acted on
	again   bool      // look once more: a change is counted just before it is stored
	failed  bool      // the last look failed
}

// due says whether a scheduler looks at every partition now, the change
// mark reading changes (err: unread).
func (w *watch) due(now time.Time, changes string, err error) bool {
	moved := err != nil || changes != w.changes
	if err == nil {
		w.changes = changes
	}
	look := w.looks == 0 || moved || w.again || w.failed || now.Sub(w.last) >= FullLook ||
		(!w.next.IsZero() && !now.Before(w.next))
	w.again = moved
	return look
}

// looked notes a full look made at now that found next (or failed).
func (w *watch) looked(now, next time.Time, err error) {
	w.looks++
	w.last, w.next, w.failed = now, next, err != nil
}

// sleep is how long Run waits before looking again, for the earliest known
// fire at next (zero: none): at least Interval, at most MaxSleep.
func (s *Scheduler) sleep(next time.Time) time.Duration {
	d := MaxSleep
	if !next.IsZero() {
		d = min(d, next.Sub(s.Clock.Now()))
	}
	return max(d, s.Interval)
}

// Tick fires every schedule due now.
func (s *Scheduler) Tick(ctx context.Context) error {
	_, err := s.tick(ctx)
	return err
}

// tick fires every schedule due now and returns the next fire time known.
func (s *Scheduler) tick(ctx context.Context) (time.Time, error) {
	now := s.Clock.Now()
	due, next, err := s.Store.DueSchedules(ctx, now, 100)
	if err != nil {
		return time.Time{}, err
	}
	var errs []error
	for _, id := range due {
		if err := s.fire(ctx, id, now); err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", id, err))
		}
	}
	if len(due) > 0 {
		next = now // more may be due
	}
	return next, errors.Join(errs...)
}

// IdempotencyKey is the key of the request a schedule makes at fireTime.
func IdempotencyKey(scheduleID string, fireTime time.Time) string {
	return "schedule:" + scheduleID + ":" + fireTime.UTC().Format(time.RFC3339)
}

func (s *Scheduler) fire(ctx context.Context, id string, now time.Time) error {
	sc, err := s.Store.GetSchedule(ctx, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if sc.Paused || sc.NextFireAt.After(now) {
		return nil
	}
	spec, err := Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return err
	}
	var recent, missed []time.Time
	for t := sc.NextFireAt; !t.After(now); t = spec.Next(t) {
		if now.Sub(t) <= MissedAfter {
			recent = append(recent, t)
		} else {
			missed = append(missed, t)
		}
		if len(recent)+len(missed) > 100000 {
			break // a schedule idle for ages; the rest is missed anyway
		}
	}
	toFire := recent
	if sc.CatchUp == CatchUpLast && len(recent) == 0 && len(missed) > 0 {
		toFire = []time.Time{missed[len(missed)-1]}
	}
	fires := make([]record.Fire, 0, len(toFire))
	for _, t := range toFire {
		reqID, err := s.makeRequest(ctx, sc, t, now)
		if err != nil {
			return err
		}
		fires = append(fires, record.Fire{FireTime: t, RequestID: reqID})
	}
	if len(missed) > 0 && len(toFire) == 0 {
		s.Log.Info("schedule missed ticks while no scheduler ran", "scheduleId", id, "missed", len(missed), "catchUp", sc.CatchUp)
	}
	_, err = s.Store.AdvanceSchedule(ctx, id, sc.NextFireAt, spec.Next(now), fires)
	return err
}

// makeRequest creates the request of one tick (or finds the one another
// replica created) and returns its id.
func (s *Scheduler) makeRequest(ctx context.Context, sc *record.Schedule, t, now time.Time) (string, error) {
	r, err := submit.Parse(sc.Request, now)
	if err != nil {
		return "", fmt.Errorf("stored request no longer valid: %w", err)
	}
	key := IdempotencyKey(sc.ID, t)
	// Every replica makes the tick's request in the partition its key
	// picks, so their idempotency claims meet there.
	r.ID = s.Store.Partitions().NewID(now, key)
	r.IdempotencyKey = key
	r.Tenant = sc.Tenant // and so is its idempotency claim
	if q := sc.QStash; q != nil {
		// A QStash schedule's ticks are QStash messages: signed and
		// headed as such, carrying the schedule's id and extras.
		msg := q.Message
		msg.ScheduleID = cmp.Or(q.Alias, sc.ID)
		r.Dialect, r.QStash = record.DialectQStash, &msg
		if q.DelayMs > 0 {
			r.NextAttemptAt = now.Add(time.Duration(q.DelayMs) * time.Millisecond)
		}
	}
	// Schedules are capped by SCHEDULE_LIMIT; their requests count
	// against no owner.
	replay, err := s.Store.Create(ctx, r, key, sc.Request, record.CreateOptions{})
	if err != nil {
		return "", err
	}
	if replay != nil {
		return replay.ID, nil
	}
	// A failed enqueue leaves a record without a task: the sweeper
	// enqueues it.
	if err := s.Queue.Enqueue(ctx, r.ID, r.NextAttemptAt, time.Duration(r.TimeoutMs)*time.Millisecond, r.MaxRetries); err != nil {
		s.Log.Warn("could not enqueue a scheduled request; the sweeper will", "requestId", r.ID, "err", err)
	}
	s.Log.Info("schedule fired", "scheduleId", sc.ID, "fireTime", t.UTC().Format(time.RFC3339), "requestId", r.ID)
	return r.ID, nil
}
