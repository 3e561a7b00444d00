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

	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting/asynqx"
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
	client := asynq.NewClientFromRedisClient(rdb)
	k := asynqx.QueueKeys(q)
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue(q), asynq.TaskID("w")); err != nil {
		t.Fatal(err)
	}
	// The run of w: taken by a worker, whose handler decides to park it.
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Pending(), 0, "w")
	pipe.LPush(ctx, k.Active(), "w")
	pipe.HSet(ctx, k.Task("w"), "state", "active")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tm := NewTimer(rdb, partition.Set{}, q, nil, log, Tuning{})
	o := New(Config{Queue: q, Redis: rdb, Timer: tm})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go tm.Run(runCtx)

	start := time.Now()
	if err := o.Wake(ctx, "w"); err != nil {
		t.Fatalf("Wake of a task in transit = %v, want nil (woken as it lands)", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("Wake of a task in transit took %v, want no wait", waited)
	}
	if n, err := rdb.Exists(ctx, record.WokenPrefix(q)+"w").Result(); err != nil || n != 1 {
		t.Fatalf("no woken mark (%d, %v)", n, err)
	}
	// The handler notes the park and returns; asynq's side of the park:
	// the run ends, the task is a retry due in five minutes.
	if err := o.Park(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	pipe = rdb.TxPipeline()
	pipe.LRem(ctx, k.Active(), 0, "w")
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(time.Now().Add(5 * time.Minute).Unix()), Member: "w"})
	pipe.HSet(ctx, k.Task("w"), "state", "retry")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	landed := time.Now()
	for deadline := landed.Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if ok, err := o.Pending(ctx, "w"); err != nil || ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task woken in transit was not pending 10 s after it landed")
		}
	}
	t.Logf("pending %v after it landed", time.Since(landed).Round(100*time.Microsecond))

	if err := o.Wake(ctx, "missing"); !errors.Is(err, ErrGone) {
		t.Errorf("Wake of a missing task = %v, want ErrGone", err)
	}
}
