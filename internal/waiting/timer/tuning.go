package timer

import (
	"time"

	"github.com/retryd/retryd/internal/tuning"

	"github.com/retryd/retryd/internal/waiting/asynqx"
)

// Tuning are the timer's timing constants, in one place so that a test
// can shrink them (New; internal/waiting's Tuning carries them); a zero
// field takes its default (DefaultTuning). They are not settings: a
// deployment has no reason to change them.
type Tuning struct {
	// Early is how long before its due time a task is moved: the hand-off
	// (the doorbell, a fetch, the record's Begin) takes a few milliseconds,
	// and the handler waits out what is left of Early, so the attempt
	// starts on time and never early.
	Early time.Duration
	// MaxSleep bounds a worker's sleep between looks at the timers, in case
	// an announcement was lost: one whose publish failed (a worker that
	// published still looks at its own time; the API's entry is then up to
	// MaxSleep late) or that came while the channel was down (a
	// resubscription looks at every queue at once). At rest it is what
	// an idle worker pays per partition: two scripts each MaxSleep.
	MaxSleep time.Duration
	// ErrorRetry is how soon a look that failed (Redis busy, timed out,
	// out of memory) is made again: sooner than MaxSleep, as the tasks it
	// was to move are due.
	ErrorRetry time.Duration
	// HoldAlong is how early a look at a queue's parked tasks is made
	// when Run looks at its entries anyway.
	HoldAlong time.Duration
	// FollowGrace is how long after an entry's due time a worker that
	// leaves the partition to another looks at it: the bound on how late
	// a hand-off between workers makes a task.
	FollowGrace time.Duration
	// MoverNote is how long the last mover of a partition's tasks is
	// remembered: while it is, the other workers leave the partition to it.
	MoverNote time.Duration
	// ActiveGrace is how long past its due time an entry whose task is
	// still active (its handler is returning it to asynq) is kept;
	// ActiveRetry how soon it is looked at again.
	ActiveGrace time.Duration
	ActiveRetry time.Duration
	// ParkDelay is how long after a park its entry is first looked at
	// (asynq moves the task within it, mostly); ParkRetry how soon an
	// entry whose task is still active is looked at again.
	ParkDelay time.Duration
	ParkRetry time.Duration
	// ParkGrace is how long a parked task may still be active before its
	// entry is dropped: its handler has returned, asynq moves it within
	// milliseconds, and a task still active later was woken and runs.
	ParkGrace time.Duration
	// Woken is how long a woken mark is in force: a wake that finds its
	// task still active (its park on its way to asynq) leaves one, and
	// the look that sees the park land starts the task at once. It bounds
	// how long a park may take to land and still be woken by it.
	Woken time.Duration
	// CallTimeout bounds each of the timer's Redis calls.
	CallTimeout time.Duration
}

// DefaultTuning are the timings retryd runs with.
var DefaultTuning = Tuning{
	Early:       10 * time.Millisecond,
	MaxSleep:    5 * time.Second,
	ErrorRetry:  time.Second,
	HoldAlong:   100 * time.Millisecond,
	FollowGrace: 100 * time.Millisecond,
	MoverNote:   2 * time.Second,
	ActiveGrace: 2 * time.Second,
	ActiveRetry: 5 * time.Millisecond,
	ParkDelay:   3 * time.Millisecond,
	ParkRetry:   25 * time.Millisecond,
	ParkGrace:   250 * time.Millisecond,
	Woken:       10 * time.Second,
	CallTimeout: 5 * time.Second,
}

// withDefaults is t with each zero field set to its default.
func (t Tuning) withDefaults() Tuning { return tuning.WithDefaults(t, DefaultTuning) }

// graces are the values the moving scripts take from t.
func (t Tuning) graces() asynqx.Graces {
	return asynqx.Graces{Active: t.ActiveGrace, ActiveRetry: t.ActiveRetry, Park: t.ParkGrace, ParkRetry: t.ParkRetry,
		MoverNote: t.MoverNote, Woken: t.Woken}
}
