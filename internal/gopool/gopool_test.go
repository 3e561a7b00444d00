package gopool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

// counting is a handler that counts its calls.
type counting struct {
	calls atomic.Int64
	fn    func(ctx context.Context, t *asynq.Task) error
}

func (c *counting) ProcessTask(ctx context.Context, t *asynq.Task) error {
	c.calls.Add(1)
	return c.fn(ctx, t)
}

func TestTheHandlersErrorAndContextReachTheCaller(t *testing.T) {
	type key struct{}
	want := errors.New("boom")
	h := &counting{fn: func(ctx context.Context, tk *asynq.Task) error {
		if ctx.Value(key{}) != "v" || tk.Type() != "deliver" {
			return errors.New("the handler did not get the caller's context and task")
		}
		return want
	}}
	p := New(h)
	defer p.Close()
	ctx := context.WithValue(context.Background(), key{}, "v")
	if err := p.ProcessTask(ctx, asynq.NewTask("deliver", nil)); !errors.Is(err, want) {
		t.Fatalf("ProcessTask = %v, want %v", err, want)
	}
}

func TestAPanicIsRaisedAgainOnTheCallersGoroutineWithTheHandlersStack(t *testing.T) {
	p := New(&counting{fn: func(context.Context, *asynq.Task) error { panicHere(); return nil }})
	defer p.Close()
	defer func() {
		x := recover()
		s, _ := x.(string)
		if !strings.Contains(s, "kaput") || !strings.Contains(s, "panicHere") {
			t.Fatalf("recovered %v, want the handler's panic with its stack", x)
		}
	}()
	_ = p.ProcessTask(context.Background(), asynq.NewTask("deliver", nil))
	t.Fatal("ProcessTask returned after the handler panicked")
}

func panicHere() { panic("kaput") }

// Sequential tasks share the pool's goroutines: a second one starts only
// when the next task comes before the first is back waiting. Concurrent
// tasks start no more than twice as many as run at once.
func TestGoroutinesAreKeptAndStartedOnlyWhenNoneIsIdle(t *testing.T) {
	p := New(&counting{fn: func(context.Context, *asynq.Task) error { return nil }})
	for i := 0; i < 100; i++ {
		_ = p.ProcessTask(context.Background(), asynq.NewTask("deliver", nil))
	}
	if n := started(p); n < 1 || n > 2 {
		t.Errorf("100 tasks one after another started %d goroutines, want 1 or 2", n)
	}
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(5)
	var held atomic.Int64
	q := New(&counting{fn: func(context.Context, *asynq.Task) error {
		if held.Add(1) <= 5 {
			running.Done()
			<-release
		}
		return nil
	}})
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _ = q.ProcessTask(context.Background(), asynq.NewTask("deliver", nil)) }()
	}
	running.Wait()
	close(release)
	wg.Wait()
	for i := 0; i < 100; i++ {
		_ = q.ProcessTask(context.Background(), asynq.NewTask("deliver", nil))
	}
	if n := started(q); n < 5 || n > 10 {
		t.Errorf("5 tasks at once, then 100 one after another, started %d goroutines, want 5 to 10", n)
	}
	p.Close()
	q.Close()
}

// After Close no goroutine of the pool is left, and a task still runs, on
// its caller's goroutine.
func TestCloseEndsTheGoroutinesAndLaterTasksStillRun(t *testing.T) {
	h := &counting{fn: func(context.Context, *asynq.Task) error { return nil }}
	p := New(h)
	_ = p.ProcessTask(context.Background(), asynq.NewTask("deliver", nil))
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: a goroutine of the pool is left")
	}
	if err := p.ProcessTask(context.Background(), asynq.NewTask("deliver", nil)); err != nil || h.calls.Load() != 2 {
		t.Fatalf("a task after Close: err %v, handler calls %d, want nil and 2", err, h.calls.Load())
	}
	p.Close() // twice is fine
}

func started(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}
