package timer

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/redistest"
)

type countingBell struct{ rings atomic.Int64 }

func (b *countingBell) Ring(context.Context) error { b.rings.Add(1); return nil }

var names = Names{Timer: func(q string) string { return "{" + q + "}:timer" }, Parked: func(q string) string { return "{" + q + "}:parked" },
	Channel: "test:timer"}

// A task whose entry another process adds (earlier than anything the
// running timer sleeps towards) becomes pending at its due time, never
// more than Early before, long before asynq's own due time, and the doorbell is rung.
func TestTimerStartsTasksAtTheirEntryNotAsynqsTime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	queues := []string{"p0", "p1"}

	bell := &countingBell{}
	running := New(rdb, queues, names, bell, log)
	done := make(chan struct{})
	go func() { defer close(done); running.Run(ctx) }()
	defer func() { cancel(); <-done }()
	adder := New(rdb, queues, names, nil, log)

	// Something far away first, so the running timer sleeps long.
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("p0"), asynq.TaskID("far"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := adder.At(ctx, "p0", "far", time.Now().Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("p1"), asynq.TaskID("soon"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(300 * time.Millisecond)
	if err := adder.At(ctx, "p1", "soon", due); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := inspector.GetTaskInfo("p1", "soon")
		if err != nil {
			t.Fatal(err)
		}
		if info.State == asynq.TaskStatePending {
			break
		}
		if time.Now().Before(due.Add(-Early)) && info.State != asynq.TaskStateScheduled {
			t.Fatalf("state %v before its due time", info.State)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task is still %v 10 s after its due time", info.State)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if now := time.Now(); now.Before(due.Add(-Early)) {
		t.Errorf("pending %v before its due time, more than Early", due.Sub(now))
	}
	// The ring follows the move (once every queue was looked at).
	for bell.rings.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the doorbell was never rung")
		}
		time.Sleep(time.Millisecond)
	}
	info, err := inspector.GetTaskInfo("p0", "far")
	if err != nil || info.State != asynq.TaskStateScheduled {
		t.Errorf("far: %v, %v; want still scheduled", info, err)
	}
}
