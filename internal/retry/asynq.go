package retry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"
)

// DueError asks for the task to come back at Due. It is returned by the
// handler after a retryable failure (the next attempt's exact due time),
// when a request is parked and when a task arrived too early. retryd's
// timer starts it then; asynq's own due time is only the safety net.
type DueError struct {
	Due time.Time
	Err error
	// Untimed says no timer entry starts the task: asynq's own due time
	// does.
	Untimed bool
}

func (e *DueError) Error() string {
	return fmt.Sprintf("next attempt due at %s: %v", e.Due.UTC().Format(time.RFC3339Nano), e.Err)
}

func (e *DueError) Unwrap() error { return e.Err }

// At wraps err with the time the task must run again.
func At(due time.Time, err error) error { return &DueError{Due: due, Err: err} }

// NotBefore wraps err with the earliest time a task that has no timer entry
// (a callback) may run again: asynq's whole-second precision is enough.
func NotBefore(due time.Time, err error) error { return &DueError{Due: due, Err: err, Untimed: true} }

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

// DelayFunc is asynq's RetryDelayFunc for retryd tasks. For a DueError it
// is the due time plus lag: retryd's timer starts the task at its due
// time, and asynq's own (whole seconds, on a poll) is the safety net; one
// due already runs again at once. For anything else (retryd's own
// trouble, a crash found by asynq's recoverer) it is trouble's short
// capped backoff, since the record still decides the real schedule.
func DelayFunc(now func() time.Time, lag time.Duration, trouble Policy) asynq.RetryDelayFunc {
	return func(n int, err error, _ *asynq.Task) time.Duration {
		var due *DueError
		if errors.As(err, &due) {
			wait := due.Due.Sub(now())
			if wait <= 0 {
				return 0
			}
			net := lag
			if due.Untimed {
				net = 0
			}
			// asynq truncates to whole seconds: a second more is never early.
			return wait + max(net, time.Second)
		}
		return trouble.Delay(n+1, rand.Float64())
	}
}

// IsFailure is asynq's IsFailure: a task that arrived early, that waits
// for a flow-control slot, or that retryd's own trouble (Redis) kept from
// its attempt is not a failure. So asynq's retry count is the request's
// failed attempts (and crashes), within the MaxRetry retryd gives it.
func IsFailure(err error) bool {
	return err != nil && !errors.Is(err, ErrNotDue) && !errors.Is(err, ErrParked) && !errors.Is(err, ErrInfrastructure)
}
