package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting"
	"github.com/retryd/retryd/tasks"
)

// calls counts the commands a client sends, pipelines as one call.
type calls struct {
	mu sync.Mutex
	n  int
}

func (c *calls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (c *calls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// A submission pending at once costs one call to Redis: the script that
// stores the record also writes its asynq task, which asynq then reads as
// one its own client enqueued (queue, retries, timeout), and rings.
func TestSubmissionWritesItsTaskInOneCall(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := srv.Client()
	counted := &calls{}
	rdb.AddHook(counted)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	api := &handlers.API{
		Store: record.NewStore(rdb, time.Hour),
		Queue: &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: inspector,
			Waiting: tasks.NewWaiting(rdb, partition.Set{}, nil, waiting.Tuning{}, nil)},
		Destinations: &egress.Guard{AllowPrivate: true},
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:          time.Now,
	}
	ts := httptest.NewServer(app.NewEngine(api, app.Access{}, api.Log))
	t.Cleanup(ts.Close)

	const body = `{"url":"https://example.com/x","method":"POST","body":"hi","maxRetries":3,"timeoutMs":5000}`
	// The first submission also registers the tenant and the queue.
	if a := post(t, ts, body); a.status != http.StatusAccepted {
		t.Fatalf("status %d %s", a.status, a.raw)
	}
	before := counted.count()
	a := post(t, ts, body)
	if a.status != http.StatusAccepted {
		t.Fatalf("status %d %s", a.status, a.raw)
	}
	if n := counted.count() - before; n != 1 {
		t.Errorf("a submission made %d calls to Redis, want 1", n)
	}
	id, _ := a.body["id"].(string)
	info, err := inspector.GetTaskInfo(tasks.Queue, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStatePending || info.Type != tasks.TypeDeliver || string(info.Payload) != id ||
		info.MaxRetry != tasks.MaxRetry(3) || info.Timeout != tasks.TaskTimeout(5*time.Second) {
		t.Errorf("task %+v", info)
	}
	if qs, err := inspector.Queues(); err != nil || len(qs) != 1 || qs[0] != tasks.Queue {
		t.Errorf("asynq's queues %v, %v", qs, err)
	}
	if n := rdb.LLen(context.Background(), tasks.BellKey(tasks.Queue)).Val(); n != 1 {
		t.Errorf("doorbell holds %d tokens, want 1", n)
	}
}
