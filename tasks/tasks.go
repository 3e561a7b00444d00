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

	"github.com/retryd/retryd/internal/asynqx"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/timer"
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

// maxWait bounds how long a handler waits out a task that came early
// (retryd's timer moves tasks timer.Early before their due time; a clock a
// few milliseconds off between workers adds to it) before it gives the
// task back to the timer instead.
const maxWait = 20 * time.Millisecond

// NewDeliver returns the delivery task of request id.
func NewDeliver(id string) *asynq.Task {
	return asynq.NewTask(TypeDeliver, []byte(id))
}

// Enqueuer hands requests to asynq.
type Enqueuer struct {
	Client    *asynq.Client
	Inspector *asynq.Inspector
	// Parts are the partitions; each has its own queue, named like its
	// tag. The zero value is the single queue Queue.
	Parts partition.Set
	// Timer starts waiting tasks on time; nil leaves it to asynq's whole
	// seconds.
	Timer *timer.Timer
	// Redis is the client Wake moves tasks with (asynq's own).
	Redis redis.UniversalClient
}

// QueueOf is the asynq queue of request id.
func (e *Enqueuer) QueueOf(id string) string {
	if e.Parts.Len() == 0 {
		return Queue
	}
	return e.Parts.Tag(e.Parts.OfID(id))
}

// Enqueue schedules the delivery of request id for due: retryd's timer
// starts it then, and asynq's own due time (timer.Lag later) is the safety
// net. A task of that id that already exists is not an error.
func (e *Enqueuer) Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error {
	opts := []asynq.Option{
		asynq.TaskID(id),
		asynq.Queue(e.QueueOf(id)),
		asynq.MaxRetry(MaxRetry(maxRetries)),
		asynq.Timeout(TaskTimeout(attemptTimeout)),
	}
	later := !e.PendingAtOnce(due)
	if later {
		opts = append(opts, asynq.ProcessAt(e.safetyNet(due)))
	}
	_, err := e.Client.EnqueueContext(ctx, NewDeliver(id), opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	if later {
		return e.At(ctx, id, due)
	}
	return nil
}

// At starts request id's waiting task at due (flow.Waker): an entry in its
// partition's timer. Without a timer asynq's own due time does.
func (e *Enqueuer) At(ctx context.Context, id string, due time.Time) error {
	if e.Timer == nil {
		return nil
	}
	return e.Timer.At(ctx, e.QueueOf(id), id, due)
}

// Park notes that request id's task is being parked for flow control, so
// that it waits in asynq's scheduled set, not among the retries.
func (e *Enqueuer) Park(ctx context.Context, id string) error {
	if e.Timer == nil {
		return nil
	}
	return e.Timer.Park(ctx, e.QueueOf(id), id)
}

// safetyNet is asynq's own due time of a task retryd's timer starts at due.
func (e *Enqueuer) safetyNet(due time.Time) time.Time {
	if e.Timer == nil {
		return due
	}
	return due.Add(timer.Lag)
}

// PendingAtOnce says whether the task of a request due at due is pending as
// soon as it is enqueued (rather than scheduled).
func (e *Enqueuer) PendingAtOnce(due time.Time) bool { return !due.After(time.Now()) }

// BellKey is the workers' doorbell list of the queue named tag.
func BellKey(tag string) string { return record.BellKey(tag) }

// TaskTimeout is the asynq deadline of one task run: the attempt's own
// deadline (enforced by the handler, to the millisecond) plus room to
// write the record, rounded up to whole seconds because asynq stores it in
// seconds.
func TaskTimeout(attempt time.Duration) time.Duration {
	d := attempt + maxWait + 10*time.Second
	return d.Truncate(time.Second) + time.Second
}

// Delete removes the task of request id from the queue. A task that is not
// there (already done) is not an error; a running one cannot be deleted.
func (e *Enqueuer) Delete(ctx context.Context, id string) error {
	err := e.Inspector.DeleteTask(e.QueueOf(id), id)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	return err
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

// NewBell returns the doorbell of retryd's queue, to add as a hook to the
// Redis client asynq uses (see asynqx.Bell): a worker's waits up to wait on
// an empty fetch; wait 0 makes one that only rings.
func NewBell(rdb redis.UniversalClient, wait time.Duration) *asynqx.Bell {
	return asynqx.NewBell(rdb, record.BellKey(Queue), []string{Queue}, wait)
}

// NewPartitionedBell is NewBell for the queues of parts.
func NewPartitionedBell(rdb redis.UniversalClient, parts partition.Set, wait time.Duration) *asynqx.Bell {
	return asynqx.NewBell(rdb, record.BellKey(parts.Tag(0)), parts.Tags(), wait)
}

// Wake makes request id's parked task (waiting for a flow-control slot)
// runnable now (flow.Waker). Only a waiting task is moved: an archived one
// run again would be a redrive.
func (e *Enqueuer) Wake(ctx context.Context, id string) error {
	q := e.QueueOf(id)
	state, err := asynqx.Run(ctx, e.Redis, q, e.bellIn(q), id, time.Now())
	if err != nil {
		return err
	}
	switch state {
	case asynqx.Moved:
		return e.ring(ctx, q)
	case asynqx.Pending:
		return nil // runnable already
	case asynqx.Active:
		return flow.ErrInTransit // on its way to being parked (or running)
	}
	return flow.ErrGone
}

// WakeParked makes request id's task runnable now if it sleeps in a park
// (flow.Waker): never a retry waiting out its backoff.
func (e *Enqueuer) WakeParked(ctx context.Context, id string) (bool, error) {
	q := e.QueueOf(id)
	moved, err := asynqx.RunParked(ctx, e.Redis, q, e.bellIn(q), id, time.Now())
	if err != nil || !moved {
		return false, err
	}
	return true, e.ring(ctx, q)
}

// bellIn is the doorbell a script of queue rings itself, or "".
func (e *Enqueuer) bellIn(queue string) string {
	if e.Parts.Len() == 0 {
		return record.BellKey(queue)
	}
	return record.RingableBell(e.Parts, queue)
}

// ring rings the doorbell after a task of queue became pending, unless the
// script that moved it rang (bellIn).
func (e *Enqueuer) ring(ctx context.Context, queue string) error {
	if e.bellIn(queue) != "" || e.Timer == nil || e.Timer.Bell == nil {
		return nil
	}
	return e.Timer.Bell.Ring(ctx)
}

// Waiting says whether request id's task is runnable and not yet taken by
// a worker (flow.Waker): a woken request still on its way.
func (e *Enqueuer) Waiting(ctx context.Context, id string) (bool, error) {
	state, err := asynqx.State(ctx, e.Redis, e.QueueOf(id), id)
	return state == "pending", err
}
