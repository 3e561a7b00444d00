package scheduler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/tasks"
)

// setup returns two schedulers (replicas) over one fresh Redis, both on the
// clock clk, and the store.
func setup(t *testing.T, clk *clock.Fake) (a, b *Scheduler, store *record.Store) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	store = record.NewStore(rdb, time.Hour)
	queue := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb)}
	mk := func() *Scheduler {
		return &Scheduler{Store: store, Queue: queue, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Interval: time.Hour, Clock: clk}
	}
	return mk(), mk(), store
}

func schedule(t *testing.T, store *record.Store, cron, catchUp string, next time.Time) string {
	t.Helper()
	id := "01m8mhyychtfy2pdj6g9"
	sc := &record.Schedule{ID: id, Cron: cron, CatchUp: catchUp, Request: []byte(`{"url":"https://example.com"}`),
		NextFireAt: next, CreatedAt: next.Add(-time.Hour)}
	if err := store.CreateSchedule(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	return id
}

func requests(t *testing.T, store *record.Store) int {
	t.Helper()
	page, err := store.List(context.Background(), tenant.All, "", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Requests)
}

func TestADueTickMakesOneRequestAcrossReplicas(t *testing.T) {
	t.Parallel()
	tick := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(tick.Add(100 * time.Millisecond))
	a, b, store := setup(t, clk)
	id := schedule(t, store, "@every 1m", CatchUpNone, tick)

	for _, s := range []*Scheduler{a, b, a} {
		if err := s.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := requests(t, store); n != 1 {
		t.Fatalf("%d requests for one tick over two replicas, want 1", n)
	}
	sc, _ := store.GetSchedule(context.Background(), id)
	if want := tick.Add(time.Minute); !sc.NextFireAt.Equal(want) || len(sc.Fires) != 1 {
		t.Errorf("next fire %v (want %v), %d fires", sc.NextFireAt, want, len(sc.Fires))
	}
	// Not yet due: nothing.
	clk.Set(tick.Add(30 * time.Second))
	_ = a.Tick(context.Background())
	if n := requests(t, store); n != 1 {
		t.Errorf("%d requests before the next tick, want 1", n)
	}
	clk.Set(tick.Add(time.Minute + 10*time.Millisecond))
	_ = b.Tick(context.Background())
	if n := requests(t, store); n != 2 {
		t.Errorf("%d requests after the second tick, want 2", n)
	}
}

func TestMissedTicksFollowTheCatchUpPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		catchUp string
		want    int
	}{{CatchUpNone, 0}, {CatchUpLast, 1}} {
		t.Run(c.catchUp, func(t *testing.T) {
			t.Parallel()
			tick := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
			now := tick.Add(10*time.Minute + 30*time.Second) // ticks missed while no scheduler ran
			a, _, store := setup(t, clock.NewFake(now))
			id := schedule(t, store, "@every 1m", c.catchUp, tick)
			if err := a.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := requests(t, store); n != c.want {
				t.Errorf("%d requests, want %d", n, c.want)
			}
			sc, _ := store.GetSchedule(context.Background(), id)
			if !sc.NextFireAt.After(now) {
				t.Errorf("next fire %v is not after now %v", sc.NextFireAt, now)
			}
		})
	}
}

func TestAPausedScheduleDoesNotFire(t *testing.T) {
	t.Parallel()
	tick := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	a, _, store := setup(t, clock.NewFake(tick.Add(100*time.Millisecond)))
	id := schedule(t, store, "@every 1m", CatchUpNone, tick)
	if err := store.SetPaused(context.Background(), id, true, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := requests(t, store); n != 0 {
		t.Errorf("a paused schedule made %d requests", n)
	}
}

func TestParseRefusesMoreThanOnceASecond(t *testing.T) {
	t.Parallel()
	for spec, ok := range map[string]bool{"@every 500ms": false, "@every 999ms": false, "@every 1s": true, "*/5 * * * *": true, "@hourly": true} {
		if _, err := Parse(spec, ""); (err == nil) != ok {
			t.Errorf("Parse(%q) = %v, want ok=%v", spec, err, ok)
		}
	}
}

// A scheduler looks at every partition only when it has to: first, when
// a fire it knows of is due, when the change mark moved (and once more
// after, as a change lands just after its first mark), when the mark
// cannot be read, after a failed look, and FullLook after its last look.
func TestWatchLooksOnlyWhenItHasTo(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 7, 0, 0, 0, time.UTC)
	var w watch
	step := func(at time.Duration, mark string, err error, want bool, next time.Time, lookErr error) {
		t.Helper()
		now := t0.Add(at)
		if got := w.due(now, mark, err); got != want {
			t.Fatalf("at %v (mark %q, err %v): look %v, want %v", at, mark, err, got, want)
		}
		if want {
			w.looked(now, next, lookErr)
		}
	}
	fire := t0.Add(10 * time.Second)
	step(0, "a", nil, true, fire, nil)                    // the first wake looks
	step(100*time.Millisecond, "a", nil, true, fire, nil) // and once more: a change may have landed since its mark
	step(time.Second, "a", nil, false, fire, nil)         // nothing moved, nothing due
	step(2*time.Second, "b", nil, true, fire, nil)        // a schedule was created
	step(3*time.Second, "b", nil, true, fire, nil)        // and once more, in case it was not stored yet
	step(4*time.Second, "b", nil, false, fire, nil)       // then quiet again
	step(5*time.Second, "b", errors.New("down"), true, fire, nil)
	step(6*time.Second, "b", nil, true, fire, errors.New("look failed")) // the mark unread last time
	step(7*time.Second, "b", nil, true, fire, nil)                       // the last look failed
	step(8*time.Second, "b", nil, false, fire, nil)
	step(10*time.Second, "b", nil, true, time.Time{}, nil) // the known fire is due
	step(11*time.Second, "b", nil, false, time.Time{}, nil)
	step(10*time.Second+FullLook-time.Millisecond, "b", nil, false, time.Time{}, nil)
	step(10*time.Second+FullLook, "b", nil, true, time.Time{}, nil) // the safety net
}

// A schedule created while a scheduler runs fires at its first tick,
// however its creation interleaves with the scheduler's looks: the change
// mark is set before and after the schedule is stored.
func TestScheduleChangeMarksBracketTheChange(t *testing.T) {
	t.Parallel()
	store := record.NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	before, err := store.ScheduleChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc := &record.Schedule{ID: "sc1", Cron: "@every 1m", Request: []byte(`{"url":"http://e.com"}`), NextFireAt: time.Now().Add(time.Minute), CreatedAt: time.Now()}
	if err := store.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	after, err := store.ScheduleChanges(ctx)
	if err != nil || after == before || after == "" {
		t.Fatalf("the change mark after a create: %q (before %q), %v", after, before, err)
	}
	if err := store.SetPaused(ctx, "sc1", true, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if m, _ := store.ScheduleChanges(ctx); m != after {
		t.Errorf("a pause moved the change mark: %q, want %q", m, after)
	}
	if err := store.SetPaused(ctx, "sc1", false, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if m, _ := store.ScheduleChanges(ctx); m == after {
		t.Errorf("a resume left the change mark at %q", m)
	}
}
