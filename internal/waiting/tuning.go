package waiting

import (
	"time"

	"github.com/retryd/retryd/internal/tuning"
	"github.com/retryd/retryd/internal/waiting/timer"
)

// Tuning are the timing constants of waiting, in one place so that a test
// can shrink them (Config.Tuning, NewTimer); a zero field takes its
// default (DefaultTuning). They are not settings: a deployment has no
// reason to change them.
type Tuning struct {
	// Lag is how much later than the timer's entry asynq's own due time is:
	// the safety net, for an entry lost with its worker before it was
	// written.
	Lag time.Duration
	// BellWait is the longest a worker's empty fetch waits on the
	// doorbell (every path that makes a task pending rings, so it bounds
	// only a lost ring, and at rest costs an idle worker one empty
	// dequeue per queue each BellWait); BellErrorPause how long a failed
	// fetch is held, so an outage does not turn asynq's fetch loop into a
	// busy loop;
	// BellLatePause how far apart a worker woken by a ring that found the
	// queue empty looks again (covering the submission's own enqueue, one
	// round trip after its ring).
	BellWait, BellErrorPause, BellLatePause time.Duration
	// AsynqPoll is asynq's pause after a doorbell wait that ended empty
	// (its TaskCheckInterval); AsynqForward how often asynq itself moves
	// due retries and scheduled tasks to pending (its
	// DelayedTaskCheckInterval): the timer starts them to the
	// millisecond, so asynq's forwarding is only the safety net (for an
	// entry lost with its worker: the task then starts Lag to
	// Lag+AsynqForward late), and at two calls per queue and interval it
	// is what an idle worker costs per partition.
	AsynqPoll, AsynqForward time.Duration
	// EarlyWait bounds how long a handler waits out a task handed over
	// early (the timer's Early, and a clock a few milliseconds off between
	// workers) before it gives the task back to the timer.
	EarlyWait time.Duration
	// TroubleBase and TroubleMax are the capped backoff of a task that
	// retryd's own trouble (Redis) kept from its attempt, or that asynq's
	// recoverer found crashed: the record decides the real schedule.
	TroubleBase, TroubleMax time.Duration
	// Timer are the timer's: how early it hands a task over, how its
	// workers share a partition, how long it keeps the entry of a task
	// still active.
	Timer timer.Tuning
}

// DefaultTuning are the timings retryd runs with.
var DefaultTuning = Tuning{
	Lag:            2 * time.Second,
	BellWait:       2 * time.Second,
	BellErrorPause: 100 * time.Millisecond,
	BellLatePause:  time.Millisecond,
	AsynqPoll:      2 * time.Millisecond,
	AsynqForward:   5 * time.Second,
	EarlyWait:      20 * time.Millisecond,
	TroubleBase:    500 * time.Millisecond,
	TroubleMax:     30 * time.Second,
	Timer:          timer.DefaultTuning,
}

// WithDefaults is t with each zero field set to its default.
func (t Tuning) WithDefaults() Tuning { return tuning.WithDefaults(t, DefaultTuning) }
