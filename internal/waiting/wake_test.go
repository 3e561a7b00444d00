package waiting

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting/asynqx"
)

// Wake waits for a task still on its way to being parked, and wakes it
// once it is; one that stays active past WakeTransit is ErrInTransit, and
// a task that is not there is ErrGone at once.
func TestWakeWaitsForATaskInTransit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	k := asynqx.QueueKeys("q")
	// active makes id a run whose handler is returning it to asynq.
	active := func(id string) {
		t.Helper()
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
		pipe := rdb.TxPipeline()
		pipe.LRem(ctx, k.Pending(), 0, id)
		pipe.LPush(ctx, k.Active(), id)
		pipe.HSet(ctx, k.Task(id), "state", "active")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	o := New(Config{Queue: "q", Redis: rdb, Tuning: Tuning{WakeTransit: 300 * time.Millisecond, WakeRetry: 5 * time.Millisecond}})

	active("parking")
	parked := make(chan error, 1)
	time.AfterFunc(30*time.Millisecond, func() {
		// asynq's side of a park: the run ends, the task is scheduled.
		pipe := rdb.TxPipeline()
		pipe.LRem(ctx, k.Active(), 0, "parking")
		pipe.ZAdd(ctx, k.Scheduled(), redis.Z{Score: float64(time.Now().Add(time.Hour).Unix()), Member: "parking"})
		pipe.HSet(ctx, k.Task("parking"), "state", "scheduled")
		_, err := pipe.Exec(ctx)
		parked <- err
	})
	if err := o.Wake(ctx, "parking"); err != nil {
		t.Fatalf("Wake of a task parked 30 ms later = %v, want it woken", err)
	}
	if err := <-parked; err != nil {
		t.Fatal(err)
	}
	if ok, err := o.Pending(ctx, "parking"); err != nil || !ok {
		t.Errorf("after Wake: pending %v, %v; want pending", ok, err)
	}

	active("stuck")
	start := time.Now()
	if err := o.Wake(ctx, "stuck"); !errors.Is(err, ErrInTransit) {
		t.Errorf("Wake of a task that stays active = %v, want ErrInTransit", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("Wake gave up on a task in transit after %v, want at least WakeTransit (300ms)", waited)
	}

	start = time.Now()
	if err := o.Wake(ctx, "missing"); !errors.Is(err, ErrGone) {
		t.Errorf("Wake of a missing task = %v, want ErrGone", err)
	}
	if waited := time.Since(start); waited >= 300*time.Millisecond {
		t.Errorf("Wake of a missing task took %v, want no wait", waited)
	}
}
