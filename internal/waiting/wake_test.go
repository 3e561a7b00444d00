package waiting

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting/asynqx"
	"github.com/retryd/retryd/internal/waiting/timer"
)

// A wake that finds its task on its way to being parked answers at once
// and is not lost: the park, as it lands, is started by the timer's next
// look (a little after Park) instead of sleeping until its deadline. A
// task that is not there is ErrGone.
func TestWakeOfATaskInTransitStartsItAsItLands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q := "q"
	running(t, rdb, q, "w") // its handler decides to park it
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm := NewTimer(rdb, partition.Set{}, q, nil, log, Tuning{})
	o := New(Config{Queue: q, Redis: rdb, Timer: tm})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go tm.Run(runCtx)

	start := time.Now()
	if err := o.wake(ctx, "w"); err != nil {
		t.Fatalf("Wake of a task in transit = %v, want nil (woken as it lands)", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("Wake of a task in transit took %v, want no wait", waited)
	}
	if ok, err := rdb.HExists(ctx, asynqx.QueueKeys(q).Task("w"), asynqx.WokenField).Result(); err != nil || !ok {
		t.Fatalf("no woken mark (%v)", err)
	}
	// The handler notes the park and returns; asynq's side of the park:
	// the run ends, the task is a retry due in five minutes.
	if err := o.park(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	startsSoon(t, o, "w", lands(t, rdb, q, "w"))

	if err := o.wake(ctx, "missing"); !errors.Is(err, ErrGone) {
		t.Errorf("Wake of a missing task = %v, want ErrGone", err)
	}
}

// A timed wake (a rate or cut turn, through the timer) that comes while
// its task is on its way to being parked is not lost either, however long
// the park takes to land: the timer looks at the entry for ActiveGrace,
// and past it the woken mark it left is read as the park lands.
func TestTimedWakeOfATaskInTransitStartsItAsItLands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q := "q"
	running(t, rdb, q, "w")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tune := Tuning{Timer: timer.Tuning{ActiveGrace: 20 * time.Millisecond}}
	tm := NewTimer(rdb, partition.Set{}, q, nil, log, tune)
	o := New(Config{Queue: q, Redis: rdb, Timer: tm, Tuning: tune})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go tm.Run(runCtx)
	if err := o.wakeAt(ctx, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	// The entry is looked at while the task is active, then dropped.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, err := rdb.ZCard(ctx, keys.Timer(q)).Result(); err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timer kept the entry of a task active past ActiveGrace")
		}
	}
	if err := o.park(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	startsSoon(t, o, "w", lands(t, rdb, q, "w"))
}

// running makes request id's task of queue q a run a worker took.
func running(t *testing.T, rdb *redis.Client, q, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("t", nil), asynq.Queue(q), asynq.TaskID(id)); err != nil {
		t.Fatal(err)
	}
	k := asynqx.QueueKeys(q)
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Pending(), 0, id)
	pipe.LPush(ctx, k.Active(), id)
	pipe.HSet(ctx, k.Task(id), "state", "active")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// lands is asynq's side of a park of id: the run ends, the task is a
// retry due in five minutes. It returns when.
func lands(t *testing.T, rdb *redis.Client, q, id string) time.Time {
	t.Helper()
	ctx := context.Background()
	k := asynqx.QueueKeys(q)
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Active(), 0, id)
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(time.Now().Add(5 * time.Minute).Unix()), Member: id})
	pipe.HSet(ctx, k.Task(id), "state", "retry")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// startsSoon waits for id's task, landed at landed, to be pending.
func startsSoon(t *testing.T, o *Owner, id string, landed time.Time) {
	t.Helper()
	for deadline := landed.Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if ok, err := o.Pending(context.Background(), id); err != nil || ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task woken in transit was not pending 10 s after it landed")
		}
	}
	t.Logf("pending %v after it landed", time.Since(landed).Round(100*time.Microsecond))
}
