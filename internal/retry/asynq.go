package retry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"
)

// Lead is how long before an attempt's exact due time retryd asks asynq to
// hand the task over. asynq keeps due times in whole seconds and moves due
// tasks on a polling interval, so it can be up to a second early or a poll
// late; asking a second early and waiting out the rest in the handler makes
// the attempt start on time and never early.
const Lead = 1100 * time.Millisecond

// DueError asks for the task to come back at Due. It is returned by the
// handler after a retryable failure (the next attempt's exact due time) and
// when a task arrived too early to wait out.
type DueError struct {
	Due time.Time
	Err error
	// WaitsOut says the handler itself waits from the hand-over to Due, so
	// asynq may hand the task over Lead early.
	WaitsOut bool
}

func (e *DueError) Error() string {
	return fmt.Sprintf("next attempt due at %s: %v", e.Due.UTC().Format(time.RFC3339Nano), e.Err)
}

func (e *DueError) Unwrap() error { return e.Err }

// At wraps err with the time the task must run again; the handler waits
// out an early hand-over itself.
func At(due time.Time, err error) error { return &DueError{Due: due, Err: err, WaitsOut: true} }

// NotBefore wraps err with the earliest time the task may run again, for
// handlers that do not wait (asynq's whole-second precision is enough).
func NotBefore(due time.Time, err error) error { return &DueError{Due: due, Err: err} }

// ErrNotDue is wrapped in a DueError when a task was handed over before its
// due time. It is not a failure: IsFailure says so, and asynq's retry
// counter does not move.
var ErrNotDue = errors.New("not due yet")

// ErrParked is wrapped in a DueError when a request waits for a
// flow-control slot. It is not a failure either: no attempt was made.
var ErrParked = errors.New("waiting for a flow-control slot")

// ErrInfrastructure marks failures of retryd itself (its Redis record could
// not be read or written): nothing was learned about the destination, so the
// attempt budget is untouched and asynq retries the task soon.
var ErrInfrastructure = errors.New("retryd infrastructure error")

// DelayFunc is asynq's RetryDelayFunc for retryd tasks: a DueError's due
// time (minus Lead when the handler waits out the rest); for anything else (retryd's own trouble, a crash found by
// asynq's recoverer) a short capped backoff, since the record still decides
// the real schedule.
func DelayFunc(now func() time.Time) asynq.RetryDelayFunc {
	return func(n int, err error, _ *asynq.Task) time.Duration {
		var due *DueError
		if errors.As(err, &due) {
			if due.WaitsOut {
				return max(0, due.Due.Sub(now())-Lead)
			}
			// asynq truncates to whole seconds; round up so it is not early.
			return max(0, due.Due.Sub(now())+time.Second)
		}
		p := Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second}
		return p.Delay(n+1, rand.Float64())
	}
}

// IsFailure is asynq's IsFailure: a task that arrived early, that waits
// for a flow-control slot, or that retryd's own trouble (Redis) kept from
// its attempt is not a failure. So asynq's retry count is the request's
// failed attempts (and crashes), within the MaxRetry retryd gives it.
func IsFailure(err error) bool {
	return err != nil && !errors.Is(err, ErrNotDue) && !errors.Is(err, ErrParked) && !errors.Is(err, ErrInfrastructure)
}
