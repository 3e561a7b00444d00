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
	// Timer are the timer's: how early it hands a task over, how its
	// workers share a partition, how long it keeps the entry of a task
	// still active.
	Timer timer.Tuning
}

// DefaultTuning are the timings retryd runs with.
var DefaultTuning = Tuning{
	Lag:   2 * time.Second,
	Timer: timer.DefaultTuning,
}

// withDefaults is t with each zero field set to its default.
func (t Tuning) withDefaults() Tuning { return tuning.WithDefaults(t, DefaultTuning) }
