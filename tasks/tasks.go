// Package tasks defines retryd's asynq task — one delivery of one request —
// how it is enqueued, and the handler that performs one attempt.
package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/waiting"
)

// TypeDeliver is the asynq task type of a delivery. Its payload is the
// request id; everything else is read from retryd's record.
const TypeDeliver = "retryd:deliver"

// Queue is the asynq queue retryd uses.
const Queue = "retryd"

// maxAsynqRetry keeps asynq from ever deciding a callback is exhausted:
// its record decides, and the handler ends the task itself (SkipRetry).
const maxAsynqRetry = 1 << 20

// MaxRetry is the asynq MaxRetry of a delivery task of a request with
// maxRetries, so the dashboard shows the request's own budget. asynq counts
// a run as retried when the handler returns a failure (a failed attempt)
// and when its recoverer finds a lease expired (a crash), never for a park
// or retryd's own trouble (retry.IsFailure), so the count stays within the
// budget plus the interrupted-attempt allowance; the record still decides
// when the request ends (the handler returns SkipRetry).
func MaxRetry(maxRetries int) int { return maxRetries + record.MaxInterruptions }

// recordRoom is how much longer than its attempt a task run may take:
// waiting out an early hand-over (waiting.Tuning's EarlyWait) and writing
// the record.
const recordRoom = 10 * time.Second

// NewDeliver returns the delivery task of request id.
func NewDeliver(id string) *asynq.Task {
	return asynq.NewTask(TypeDeliver, []byte(id))
}

// Enqueuer hands requests to asynq: it makes and deletes tasks; making
// a task wait or run is internal/waiting's.
type Enqueuer struct {
	Client    *asynq.Client
	Inspector *asynq.Inspector
	// Parts are the partitions; each has its own queue, named like its
	// tag. The zero value is the single queue Queue.
	Parts partition.Set
	// Waiting starts a task enqueued for later at its due time; nil leaves
	// it to asynq's whole seconds.
	Waiting *waiting.Owner
}

// QueueOf is the asynq queue of request id.
func (e *Enqueuer) QueueOf(id string) string {
	if e.Parts.Len() == 0 {
		return Queue
	}
	return e.Parts.Tag(e.Parts.OfID(id))
}

// Enqueue schedules the delivery of request id for due: retryd's timer
// starts it then, and asynq's own due time (the owner's Lag later) is the
// safety net. A task of that id that already exists is not an error.
func (e *Enqueuer) Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error {
	opts := []asynq.Option{
		asynq.TaskID(id),
		asynq.Queue(e.QueueOf(id)),
		asynq.MaxRetry(MaxRetry(maxRetries)),
		asynq.Timeout(TaskTimeout(attemptTimeout)),
	}
	err := e.Waiting.Enqueue(ctx, e.Client, NewDeliver(id), id, due, opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	return nil
}

// PendingTask is the task of request id, pending at once, for the
// submission script to write with the record (record.CreateOptions.Task);
// nil when it must be enqueued afterwards with Enqueue.
func (e *Enqueuer) PendingTask(ctx context.Context, id string, attemptTimeout time.Duration, maxRetries int) (*record.Task, error) {
	t, err := e.Waiting.PendingTask(ctx, TypeDeliver, []byte(id), id, MaxRetry(maxRetries), TaskTimeout(attemptTimeout))
	if err != nil {
		return nil, fmt.Errorf("task of %s: %w", id, err)
	}
	if t == nil {
		return nil, nil
	}
	return &record.Task{Key: t.Key, List: t.List, Fields: t.Fields}, nil
}

// PendingAtOnce says whether the task of a request due at due is pending as
// soon as it is enqueued (rather than scheduled).
func (e *Enqueuer) PendingAtOnce(due time.Time) bool { return !due.After(time.Now()) }

// BellKey is the workers' doorbell list of the queue named tag.
func BellKey(tag string) string { return keys.Bell(tag) }

// TaskTimeout is the asynq deadline of one task run: the attempt's own
// deadline (enforced by the handler, to the millisecond) plus room to
// write the record, rounded up to whole seconds because asynq stores it in
// seconds.
func TaskTimeout(attempt time.Duration) time.Duration {
	d := attempt + waiting.DefaultTuning.EarlyWait + recordRoom
	return d.Truncate(time.Second) + time.Second
}

// Delete removes the task of request id from the queue. A task that is not
// there (already done) is not an error; a running one cannot be deleted.
func (e *Enqueuer) Delete(ctx context.Context, id string) error {
	return e.Waiting.Delete(e.Inspector, e.QueueOf(id), id)
}

// Requeue replaces request id's task with a fresh one due now: the archived
// task of a failed request is deleted (asynq's RunTask would keep its retry
// counter) and a new one enqueued. A task still active is left to finish;
// the record decides what it does.
func (e *Enqueuer) Requeue(ctx context.Context, id string, attemptTimeout time.Duration, maxRetries int) error {
	if err := e.Delete(ctx, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return fmt.Errorf("delete task of %s: %w", id, err)
	}
	return e.Enqueue(ctx, id, time.Now(), attemptTimeout, maxRetries)
}

// NewBell returns the doorbell of retryd's single queue (see
// waiting.NewBell).
func NewBell(rdb redis.UniversalClient, wait time.Duration) *waiting.Bell {
	return waiting.NewBell(rdb, partition.Set{}, Queue, wait, waiting.Tuning{})
}

// NewPartitionedBell is NewBell for the queues of parts.
func NewPartitionedBell(rdb redis.UniversalClient, parts partition.Set, wait time.Duration, tune waiting.Tuning) *waiting.Bell {
	return waiting.NewBell(rdb, parts, Queue, wait, tune)
}

// NewWaiting returns the owner of the waiting of parts' tasks, with its
// timer (internal/waiting) unless timers is nil; tune's zero fields take
// waiting.DefaultTuning's.
func NewWaiting(rdb redis.UniversalClient, parts partition.Set, timers *waiting.Timer, tune waiting.Tuning, onWake func(string, error)) *waiting.Owner {
	return waiting.New(waiting.Config{Parts: parts, Queue: Queue, Redis: rdb, Timer: timers, Tuning: tune, OnWake: onWake})
}
