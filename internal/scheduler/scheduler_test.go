package scheduler

import (
	"context"
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
