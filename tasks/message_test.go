package tasks

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/submit"
)

// The task a submission writes next to its record must be exactly what
// asynq v0.26 would have enqueued: its Inspector reads it back, and a real
// asynq server runs it.
func TestNewTaskIsAsynqs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	store := record.NewStore(srv.Client(), time.Hour)
	now := createWithTask(t, store, `{"url":"https://e.com"}`, 2*time.Second)
	later := createWithTask(t, store, `{"url":"https://e.com","delayMs":60000}`, 2*time.Second)

	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr})
	defer insp.Close()
	info, err := insp.GetTaskInfo(Queue, now)
	if err != nil {
		t.Fatalf("asynq cannot read the task: %v", err)
	}
	if info.State != asynq.TaskStatePending || info.Type != TypeDeliver || string(info.Payload) != now ||
		info.Queue != Queue || info.MaxRetry != maxAsynqRetry || info.Timeout != TaskTimeout(2*time.Second) {
		t.Errorf("task as asynq reads it: %+v", info)
	}
	info, err = insp.GetTaskInfo(Queue, later)
	if err != nil || info.State != asynq.TaskStateScheduled || time.Until(info.NextProcessAt) < 55*time.Second {
		t.Errorf("delayed task: %+v, %v", info, err)
	}

	var ran atomic.Value
	server := asynq.NewServer(asynq.RedisClientOpt{Addr: srv.Addr}, asynq.Config{
		Queues: map[string]int{Queue: 1}, TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeDeliver, func(_ context.Context, task *asynq.Task) error {
		ran.Store(string(task.Payload()))
		return nil
	})
	if err := server.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer server.Shutdown()
	deadline := time.Now().Add(5 * time.Second)
	for ran.Load() != now {
		if time.Now().After(deadline) {
			t.Fatal("a real asynq server did not run the task")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// createWithTask stores a request parsed from body with its asynq task, as
// the API does, and returns its id.
func createWithTask(t *testing.T, store *record.Store, body string, attemptTimeout time.Duration) string {
	t.Helper()
	now := time.Now()
	r, err := submit.Parse([]byte(body), now)
	if err != nil {
		t.Fatal(err)
	}
	r.ID = ids.New(now)
	if _, err := store.Create(context.Background(), r, "", nil, NewTask(r.ID, r.NextAttemptAt, attemptTimeout)); err != nil {
		t.Fatal(err)
	}
	return r.ID
}
