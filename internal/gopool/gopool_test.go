package gopool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// handlerFunc is an asynq.Handler that counts its calls.
type handlerFunc struct {
	calls atomic.Int64
	fn    func(ctx context.Context, t *asynq.Task) error
}

func (h *handlerFunc) ProcessTask(ctx context.Context, t *asynq.Task) error {
	h.calls.Add(1)
	return h.fn(ctx, t)
}

func task() *asynq.Task { return asynq.NewTask("deliver", nil) }

func TestTheHandlersErrorAndContextReachTheCaller(t *testing.T) {
	type key struct{}
	want := errors.New("boom")
	p := New(&handlerFunc{fn: func(ctx context.Context, tk *asynq.Task) error {
		if ctx.Value(key{}) != "v" || tk.Type() != "deliver" {
			return errors.New("the handler did not get the caller's context and task")
		}
		return want
	}}, 10, quiet)
	defer p.Close()
	ctx := context.WithValue(context.Background(), key{}, "v")
	if err := p.ProcessTask(ctx, task()); !errors.Is(err, want) {
		t.Fatalf("ProcessTask = %v, want %v", err, want)
	}
}

func TestAPanicIsRaisedAgainOnTheCallersGoroutine(t *testing.T) {
	var once atomic.Bool
	p := New(&handlerFunc{fn: func(context.Context, *asynq.Task) error {
		if once.CompareAndSwap(false, true) {
			panic("kaput")
		}
		return nil
	}}, 10, quiet)
	defer p.Close()
	func() {
		defer func() {
			if x := recover(); x != "kaput" {
				t.Fatalf("recovered %v, want the handler's panic value", x)
			}
		}()
		_ = p.ProcessTask(context.Background(), task())
		t.Fatal("ProcessTask returned after the handler panicked")
	}()
	// The goroutine that recovered is used again.
	_ = p.ProcessTask(context.Background(), task())
	if s := stats(p); s.started != 1 {
		t.Errorf("started %d goroutines, want 1", s.started)
	}
}

// A handler's runtime.Goexit ends the caller's goroutine too, as it would
// have on asynq's own: asynq must not take the task for done.
func TestAGoexitEndsTheCallersGoroutine(t *testing.T) {
	p := New(&handlerFunc{fn: func(context.Context, *asynq.Task) error { runtime.Goexit(); return nil }}, 10, quiet)
	defer p.Close()
	returned := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.ProcessTask(context.Background(), task())
		returned <- true
	}()
	<-done
	if len(returned) != 0 {
		t.Fatal("ProcessTask returned after the handler called runtime.Goexit")
	}
	if s := stats(p); s.started != 1 || s.exited != 1 || s.idle != 0 {
		t.Errorf("%+v, want the goroutine that exited counted and not parked", s)
	}
}

// A goroutine parks before its task's caller resumes: tasks one after
// another run on one goroutine, and a burst leaves at most maxIdle parked.
func TestGoroutinesAreUsedAgainAndAtMostMaxIdleStay(t *testing.T) {
	p := New(&handlerFunc{fn: func(context.Context, *asynq.Task) error { return nil }}, 3, quiet)
	defer p.Close()
	for range 100 {
		_ = p.ProcessTask(context.Background(), task())
	}
	if s := stats(p); s.started != 1 || s.idle != 1 {
		t.Errorf("100 tasks one after another: %+v, want 1 goroutine started, idle", s)
	}
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(5)
	var held atomic.Int64
	q := New(&handlerFunc{fn: func(context.Context, *asynq.Task) error {
		if held.Add(1) <= 5 {
			running.Done()
			<-release
		}
		return nil
	}}, 3, quiet)
	defer q.Close()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = q.ProcessTask(context.Background(), task()) }()
	}
	running.Wait()
	close(release)
	wg.Wait()
	for range 100 {
		_ = q.ProcessTask(context.Background(), task())
	}
	if s := stats(q); s.started != 5 || s.idle != 3 || s.exited != 2 {
		t.Errorf("5 tasks at once, then 100 one after another: %+v, want 5 started, 3 idle, 2 ended", s)
	}
}

// Close ends the idle goroutines at once and a busy one when its task is
// done, without waiting for it; a task given after Close still runs, on
// its caller's goroutine.
func TestCloseEndsTheGoroutinesAndLaterTasksStillRun(t *testing.T) {
	release := make(chan struct{})
	busy := make(chan struct{})
	var first atomic.Bool
	h := &handlerFunc{fn: func(context.Context, *asynq.Task) error {
		if first.CompareAndSwap(false, true) {
			close(busy)
			<-release
		}
		return nil
	}}
	p := New(h, 10, quiet)
	go func() { _ = p.ProcessTask(context.Background(), task()) }()
	<-busy
	_ = p.ProcessTask(context.Background(), task()) // a second goroutine, then idle
	p.Close()
	if err := p.ProcessTask(context.Background(), task()); err != nil || h.calls.Load() != 3 {
		t.Fatalf("a task after Close: err %v, handler calls %d, want nil and 3", err, h.calls.Load())
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for s := stats(p); s.exited != 2 || s.idle != 0; s = stats(p) {
		if time.Now().After(deadline) {
			t.Fatalf("after Close and the busy task's end: %+v, want both goroutines ended", s)
		}
		time.Sleep(time.Millisecond)
	}
	p.Close() // twice is fine
}

type poolStats struct{ started, exited, idle int }

func stats(p *Pool) poolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return poolStats{p.started, p.exited, len(p.idle)}
}
