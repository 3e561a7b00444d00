// Package gopool runs asynq handlers on goroutines that are used again.
//
// asynq starts a new goroutine for every task. A delivery's calls (the
// HTTP client, go-redis pipelines, JSON) need more stack than a new
// goroutine starts with, so on a new goroutine the stack grows and is
// copied two or three times on every task. A goroutine of the pool takes
// the next task with the stack it grew (a GC halves the stack of one left
// idle). The handler's result, a panic's value and a runtime.Goexit reach
// asynq's goroutine as if the handler had run there; a panic's stack,
// which asynq would print from its own goroutine, is logged first.
package gopool

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/hibiken/asynq"
)

// Pool is an asynq.Handler that runs its handler on the pool's goroutines.
// It takes an idle goroutine, the last one parked first, or starts one; a
// goroutine parks once its task is done, before the task's caller resumes,
// unless maxIdle are parked already. Busy goroutines are exactly the
// handlers running.
type Pool struct {
	handler asynq.Handler
	maxIdle int
	log     *slog.Logger

	mu      sync.Mutex
	idle    []*worker
	closed  bool
	started int // goroutines started
	exited  int // goroutines ended
}

// worker is one goroutine of the pool and its next task.
type worker struct{ jobs chan *job } // buffered: a hand-off never blocks

// job is one task's call and its outcome.
type job struct {
	ctx    context.Context
	task   *asynq.Task
	err    error
	panic  any  // the handler's panic value
	goexit bool // the handler called runtime.Goexit
	done   chan struct{}
}

// New returns a pool that runs h and keeps at most maxIdle goroutines
// idle (asynq's concurrency: at load every slot finds one).
func New(h asynq.Handler, maxIdle int, log *slog.Logger) *Pool {
	return &Pool{handler: h, maxIdle: maxIdle, log: log}
}

// ProcessTask runs the handler on a goroutine of the pool and returns its
// error; a panic or a runtime.Goexit of the handler happens again here.
func (p *Pool) ProcessTask(ctx context.Context, t *asynq.Task) error {
	w := p.take()
	if w == nil { // closed: the task runs here, as without the pool
		return p.handler.ProcessTask(ctx, t)
	}
	j := &job{ctx: ctx, task: t, done: make(chan struct{})}
	w.jobs <- j
	<-j.done
	switch {
	case j.panic != nil:
		panic(j.panic)
	case j.goexit:
		runtime.Goexit()
	}
	return j.err
}

// take returns an idle goroutine of the pool, or a new one; nil once the
// pool is closed.
func (p *Pool) take() *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return w
	}
	w := &worker{jobs: make(chan *job, 1)}
	p.started++
	go p.serve(w)
	return w
}

// park makes w idle, unless the pool is closed or has maxIdle idle.
func (p *Pool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.maxIdle {
		p.exited++
		return false
	}
	p.idle = append(p.idle, w)
	return true
}

func (p *Pool) serve(w *worker) {
	for j := range w.jobs {
		if !p.run(w, j) {
			return
		}
	}
	p.mu.Lock()
	p.exited++
	p.mu.Unlock()
}

// run runs j's task, then parks w and only then lets j's caller go on, so
// that the caller's next task finds w idle. It reports whether w parked.
func (p *Pool) run(w *worker, j *job) (parked bool) {
	returned := false
	defer func() {
		if !returned {
			// A nil recover here is a runtime.Goexit (panic(nil) recovers
			// as a *runtime.PanicNilError): this goroutine ends with it.
			if x := recover(); x != nil {
				j.panic = x
				p.log.Error("task handler panicked", "panic", x, "stack", string(debug.Stack()))
			} else {
				j.goexit = true
			}
		}
		if !j.goexit {
			parked = p.park(w)
		} else {
			p.mu.Lock()
			p.exited++
			p.mu.Unlock()
		}
		close(j.done)
	}()
	j.err = p.handler.ProcessTask(j.ctx, j.task)
	returned = true
	return false // set by the deferred call
}

// Close ends the idle goroutines, and each busy one when its task is done;
// it does not wait for them. Tasks given after Close run on their caller's
// goroutine. Call it once asynq's server has stopped.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, w := range p.idle {
		close(w.jobs)
	}
	p.idle = nil
}
