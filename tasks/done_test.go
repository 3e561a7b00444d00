package tasks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/retry"
)

// countCalls counts the commands matching match that reach Redis (add it
// after the hooks under test).
type countCalls struct {
	match func(args []any) bool
	n     atomic.Int64
}

func (c *countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.match(cmd.Args()) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// countBegins counts the handler's own Begin calls per request.
type countBegins struct {
	*record.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *countBegins) Begin(ctx context.Context, id string, now time.Time) (*record.Begin, error) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[id]++
	c.mu.Unlock()
	return c.Store.Begin(ctx, id, now)
}

func (c *countBegins) n(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// TestFetchBeginsAndRecordWriteEndsTheTaskRun runs deliveries through a real
// asynq server wired as the worker is: the fetch starts the attempt (the
// handler does not ask Redis again), and a completion leaves asynq exactly
// as asynq's own "done" would (task gone, counted processed) without
// asynq's round trip; a retried request still goes through asynq's retry.
func TestFetchBeginsAndRecordWriteEndsTheTaskRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	done := NewDoneByRecord()
	rdb.AddHook(done)
	reached := &countCalls{match: func(args []any) bool { return asynqDoneTaskKey(args) != "" }}
	rdb.AddHook(reached) // inner: sees only what reaches Redis
	store := record.NewStore(rdb, time.Hour)
	prefetch := &Prefetch{Store: store, Now: time.Now}
	rdb.AddHook(prefetch)
	counted := &countBegins{Store: store}
	var calls atomic.Int64
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(500) // the first attempt of the retried request
		}
	}))
	defer dest.Close()
	h := &Handler{Store: counted, Prefetched: prefetch, Client: (&egress.Guard{AllowPrivate: true}).Client(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Rand: func() float64 { return 0 }, Done: done}
	var warnings atomic.Int64
	server := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{Queue: 1},
		TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.WarnLevel, Logger: countingLogger{&warnings},
		DelayedTaskCheckInterval: 100 * time.Millisecond, RetryDelayFunc: retry.DelayFunc(time.Now), IsFailure: retry.IsFailure})
	mux := asynq.NewServeMux()
	mux.Handle(TypeDeliver, h)
	if err := server.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer server.Shutdown()

	retried := createWithTask(t, store, `{"url":"`+dest.URL+`","backoffMs":100}`, time.Second)
	waitUntil(t, "the retried request to complete", func() bool {
		r, err := store.Get(context.Background(), retried)
		return err == nil && r.Status == record.Completed
	})
	completed := createWithTask(t, store, `{"url":"`+dest.URL+`"}`, time.Second)
	waitUntil(t, "the request to complete", func() bool {
		r, err := store.Get(context.Background(), completed)
		return err == nil && r.Status == record.Completed
	})

	insp := asynq.NewInspectorFromRedisClient(srv.Client())
	for _, id := range []string{retried, completed} {
		if _, err := insp.GetTaskInfo(Queue, id); !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Errorf("task %s after completion: %v, want it gone", id, err)
		}
	}
	// Three runs: the retried request's failed one (asynq's retry counts
	// it) and two completions (counted by the record writes).
	waitUntil(t, "asynq to count the three runs processed", func() bool {
		q, err := insp.GetQueueInfo(Queue)
		return err == nil && q.Processed == 3 && q.ProcessedTotal == 3 && q.Failed == 1 && q.Active == 0
	})
	if n := reached.n.Load(); n != 0 {
		t.Errorf("asynq's done reached Redis %d times, want 0", n)
	}
	if n := counted.n(completed); n != 0 {
		t.Errorf("the handler asked Redis to begin the attempt %d times; the fetch began it", n)
	}
	if r, _ := store.Get(context.Background(), completed); len(r.Attempts) != 1 || r.Attempts[0].N != 1 {
		t.Errorf("attempts %+v, want the one prefetched attempt", r.Attempts)
	}
	if n := warnings.Load(); n != 0 {
		t.Errorf("asynq logged %d warnings", n)
	}
	if n := done.done.len(); n != 0 {
		t.Errorf("%d marks left unclaimed", n)
	}
}

type countingLogger struct{ n *atomic.Int64 }

func (l countingLogger) Debug(...any) {}
func (l countingLogger) Info(...any)  {}
func (l countingLogger) Warn(...any)  { l.n.Add(1) }
func (l countingLogger) Error(...any) { l.n.Add(1) }
func (l countingLogger) Fatal(...any) { l.n.Add(1) }

// TestFetchRespectsAPausedQueue: the fetch that replaces asynq's dequeue
// takes nothing from a queue paused (from the dashboard), as asynq's would.
func TestFetchRespectsAPausedQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	store := record.NewStore(rdb, time.Hour)
	prefetch := &Prefetch{Store: store, Now: time.Now}
	rdb.AddHook(prefetch)
	fetches := &countCalls{match: func(args []any) bool { // DequeueBegin's script
		keys, _ := asynqScriptCall(args, 5)
		return keys != nil && keys[0] == dequeueKeys.Pending
	}}
	rdb.AddHook(fetches)
	insp := asynq.NewInspectorFromRedisClient(srv.Client())
	id := createWithTask(t, store, `{"url":"https://e.com"}`, time.Second)
	if err := insp.PauseQueue(Queue); err != nil {
		t.Fatal(err)
	}
	ran := recordingServer(t, rdb, asynq.Config{TaskCheckInterval: 10 * time.Millisecond})

	waitUntil(t, "the worker to try a few fetches", func() bool { return fetches.n.Load() >= 3 })
	if info, err := insp.GetTaskInfo(Queue, id); err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("task of a paused queue: %+v %v, want it pending", info, err)
	}
	if r, _ := store.Get(context.Background(), id); r.AttemptCount != 0 {
		t.Fatalf("attempt started on a paused queue: %+v", r)
	}
	if err := insp.UnpauseQueue(Queue); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("ran %q, want %q", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not run after the queue was resumed")
	}
}
