// Package gopool runs asynq handlers on long-lived goroutines.
//
// asynq starts a new goroutine for every task. A delivery's calls (the
// HTTP client, go-redis pipelines, JSON) need more stack than a new
// goroutine starts with, so every task's stack grew and was copied two or
// three times on the way: a few percent of a worker's CPU, spent again on
// each task. A goroutine of the pool keeps the stack it grew for the next
// task. The handler's result, and a panic, reach asynq's goroutine as if
// the handler had run there.
package gopool

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/hibiken/asynq"
)

// Pool is an asynq.Handler that runs its Handler on the pool's goroutines.
// It starts a goroutine when none is idle, and keeps it until Close: the
// pool holds at most twice as many as tasks ran at once (asynq's
// concurrency; a goroutine that has just finished a task is not idle yet).
type Pool struct {
	handler asynq.Handler
	jobs    chan *job     // to an idle goroutine; unbuffered
	quit    chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	started int // goroutines started
	wg      sync.WaitGroup
}

// job is one task's call and its outcome.
type job struct {
	ctx   context.Context
	task  *asynq.Task
	err   error
	panic any // what the handler panicked with, and where
	done  chan struct{}
}

// New returns a pool that runs h.
func New(h asynq.Handler) *Pool {
	return &Pool{handler: h, jobs: make(chan *job), quit: make(chan struct{})}
}

// ProcessTask runs the handler on an idle goroutine of the pool, or on a
// new one, and returns its error. A panic of the handler is raised again
// here, with the handler's stack in its value, so that asynq recovers it
// as its own.
func (p *Pool) ProcessTask(ctx context.Context, t *asynq.Task) error {
	j := &job{ctx: ctx, task: t, done: make(chan struct{})}
	select {
	case p.jobs <- j:
	default:
		if !p.start(j) {
			// Closed: the task runs here, as without the pool.
			return p.handler.ProcessTask(ctx, t)
		}
	}
	<-j.done
	if j.panic != nil {
		panic(j.panic)
	}
	return j.err
}

// start starts a goroutine that runs j, then waits for more; false when
// the pool is closed.
func (p *Pool) start(j *job) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.started++
	p.wg.Add(1)
	go p.serve(j)
	return true
}

func (p *Pool) serve(j *job) {
	defer p.wg.Done()
	for {
		p.run(j)
		select {
		case j = <-p.jobs:
		case <-p.quit:
			return
		}
	}
}

func (p *Pool) run(j *job) {
	defer close(j.done)
	defer func() {
		if x := recover(); x != nil {
			j.panic = fmt.Sprintf("%v\n%s", x, debug.Stack())
		}
	}()
	j.err = p.handler.ProcessTask(j.ctx, j.task)
}

// Close ends the pool's goroutines once idle; tasks given after Close run
// on their caller's goroutine. Call it once asynq's server has stopped.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
