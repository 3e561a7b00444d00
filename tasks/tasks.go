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
	"github.com/retryd/retryd/internal/retry"
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

// maxWait bounds how long a handler waits out an early hand-over before it
// gives the task back to the queue instead.
const maxWait = 3 * time.Second

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
}

// QueueOf is the asynq queue of request id.
func (e *Enqueuer) QueueOf(id string) string {
	if e.Parts.Len() == 0 {
		return Queue
	}
	return e.Parts.Tag(e.Parts.OfID(id))
}

// Enqueue schedules the delivery of request id for due. The task is handed
// to a worker retry.Lead before due; the handler waits out the rest. A task
// of that id that already exists is not an error.
func (e *Enqueuer) Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error {
	opts := []asynq.Option{
		asynq.TaskID(id),
		asynq.Queue(e.QueueOf(id)),
		asynq.MaxRetry(MaxRetry(maxRetries)),
		asynq.Timeout(TaskTimeout(attemptTimeout)),
	}
	if at := handOverAt(due); !at.IsZero() {
		opts = append(opts, asynq.ProcessAt(at))
	}
	_, err := e.Client.EnqueueContext(ctx, NewDeliver(id), opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	return nil
}

// PendingAtOnce says whether the task of a request due at due is pending as
// soon as it is enqueued (rather than scheduled).
func (e *Enqueuer) PendingAtOnce(due time.Time) bool { return handOverAt(due).IsZero() }

// BellKey is the workers' doorbell list of the queue named tag.
func BellKey(tag string) string { return asynqx.QueueKeys(tag).Bell() }

// handOverAt is when asynq should hand over a task due at due: retry.Lead
// early (the handler waits out the rest), or zero for "now" when that is
// already past.
func handOverAt(due time.Time) time.Time {
	if at := due.Add(-retry.Lead); at.After(time.Now()) {
		return at
	}
	return time.Time{}
}

// TaskTimeout is the asynq deadline of one task run: the attempt's own
// deadline (enforced by the handler, to the millisecond) plus the early
// hand-over wait and room to write the record, rounded up to whole seconds
// because asynq stores it in seconds.
func TaskTimeout(attempt time.Duration) time.Duration {
	d := attempt + maxWait + retry.Lead + 10*time.Second
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
	return asynqx.NewBell(rdb, []string{Queue}, wait)
}

// NewPartitionedBell is NewBell for the queues of parts.
func NewPartitionedBell(rdb redis.UniversalClient, parts partition.Set, wait time.Duration) *asynqx.Bell {
	return asynqx.NewBell(rdb, parts.Tags(), wait)
}

// Wake makes request id's parked task (waiting for a flow-control slot)
// runnable now: flow.Waker, through asynq's Inspector.RunTask (which
// rings the doorbell, so an idle worker takes it at once).
func (e *Enqueuer) Wake(_ context.Context, id string) error {
	q := e.QueueOf(id)
	err := e.Inspector.RunTask(q, id)
	if err == nil {
		return nil
	}
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return flow.ErrGone
	}
	// RunTask refuses a task that is pending or active; which one decides.
	info, ierr := e.Inspector.GetTaskInfo(q, id)
	switch {
	case errors.Is(ierr, asynq.ErrTaskNotFound), errors.Is(ierr, asynq.ErrQueueNotFound):
		return flow.ErrGone
	case ierr != nil:
		return ierr
	}
	switch info.State {
	case asynq.TaskStatePending:
		return nil // runnable already
	case asynq.TaskStateActive:
		return flow.ErrInTransit // on its way to being parked (or running)
	case asynq.TaskStateArchived, asynq.TaskStateCompleted:
		return flow.ErrGone
	}
	return err
}

// Waiting says whether request id's task is runnable and not yet taken by
// a worker (flow.Waker): a woken request still on its way.
func (e *Enqueuer) Waiting(_ context.Context, id string) (bool, error) {
	info, err := e.Inspector.GetTaskInfo(e.QueueOf(id), id)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return info.State == asynq.TaskStatePending, nil
}
