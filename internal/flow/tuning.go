package flow

import (
	"time"

	"github.com/retryd/retryd/internal/tuning"
)

// Tuning are flow control's timing constants, in one place so that a
// test can shrink them (Config.Tuning); a zero field takes its default
// (DefaultTuning). They are not settings: a deployment has no reason to
// change them.
type Tuning struct {
	// AdaptiveWindow is how long adaptive backpressure counts a key's
	// outcomes before it starts counting anew (the last window's kept).
	AdaptiveWindow time.Duration
	// CutEvery bounds how often a key is cut: one burst of failures (every
	// attempt in flight answering 503) is one cut, not many.
	CutEvery time.Duration
	// RateHorizon is how far ahead a worker gives turns of a cut key's
	// rate; a request beyond it waits in the key's line (cutline.go).
	RateHorizon time.Duration
	// ControlTTL is how long a worker keeps a key's Control before reading
	// it again: a pin or a pause takes effect within it. A paused key's
	// waiters are parked against its Redis state, never against this copy.
	ControlTTL time.Duration
	// TurnEarly is how early a request may take its turn: the timer hands
	// tasks over a little early, and workers' clocks differ by a little.
	TurnEarly time.Duration
	// TurnGrace is how late a request may take its turn; a request back
	// later (its worker died, its task was held up) has lost it and waits
	// again at its place, so turns never bunch.
	TurnGrace time.Duration
	// HeadRecheck is how often a worker looks at a line whose first
	// waiter is not due within RateHorizon.
	HeadRecheck time.Duration
	// LineMemory is how long a worker keeps looking (every RebalanceEvery)
	// at a destination's fairness line it last saw non-empty.
	LineMemory time.Duration
	// WakeTTL is how long a woken waiter holds a free slot of the worker that
	// woke it before that worker wakes another in its place.
	WakeTTL time.Duration
	// HandOverCheck is how long after its promotion a request not heard of
	// since (its attempt ended on a worker that knew the line, or it waits in
	// line again) is looked at. One still parked was never woken: the worker
	// that promoted it died first. It is woken then, instead of sleeping
	// until its safety net.
	HandOverCheck time.Duration
	// ParkFallback is the longest a task parked for a slot sleeps before it
	// looks again without being woken: only a safety net, since its place
	// is kept in Redis (fairness lines, parallelism lines) and any worker
	// with a free slot wakes it.
	ParkFallback time.Duration
	// LineFallbackMax bounds a line waiter's safety-net deadline.
	LineFallbackMax time.Duration
	// KeyTTL is how long a key's Redis state lives untouched.
	KeyTTL time.Duration
	// ShortWait is the longest wait for a rate turn that an admission sleeps
	// out in its slot instead of parking: about what retryd's timer hands a
	// task over early by, and less than a park and a wake-up cost.
	ShortWait time.Duration
	// AdoptEvery is how often a worker looks for lines it does not know, and
	// how often it lists again the lines it knows.
	AdoptEvery time.Duration
	// LeaseMargin is added to an attempt's timeout for its slot's lease;
	// HandOverLease is the lease of a slot handed to a woken request.
	LeaseMargin   time.Duration
	HandOverLease time.Duration
	// StalledWakeFor is how long a request handed a slot that could not be
	// woken (Redis could not say) is tried again, every StalledWakeEvery. A
	// task still active is not such a request: the owner starts it as it
	// lands, or the sweeper puts back the task of a worker that died.
	StalledWakeFor   time.Duration
	StalledWakeEvery time.Duration
	// RebalanceEvery is how often a worker wakes waiters of destinations that
	// have free slots on it without an attempt ending (the woken ones went to
	// other workers), while it watches a line.
	RebalanceEvery time.Duration
	// PublishEvery is how often a worker publishes its keys.
	PublishEvery time.Duration
	// StaleAfter drops a worker that stopped publishing.
	StaleAfter time.Duration
	// ForgetAfter drops a key idle this long from a worker's memory.
	ForgetAfter time.Duration
	// BreakerProbe is the first wait of an open endpoint for its probe;
	// each failed probe doubles it, up to BreakerConfig.ProbeMax.
	BreakerProbe time.Duration
	// BreakerRead is how often a worker reads again the state of an
	// endpoint it delivers to (that endpoint's only): an endpoint opened on
	// another worker, or by an operator, holds this worker's requests
	// within it.
	BreakerRead time.Duration
	// TenantMemory is how long a tenant whose request this worker admitted
	// counts as about. A tenant Redis lists (one that ever stored a request,
	// besides the default tenant) always does.
	TenantMemory time.Duration
}

// DefaultTuning are the timings retryd runs with.
var DefaultTuning = Tuning{
	AdaptiveWindow:   time.Minute,
	CutEvery:         time.Second,
	RateHorizon:      5 * time.Second,
	ControlTTL:       time.Second,
	TurnEarly:        50 * time.Millisecond,
	TurnGrace:        2 * time.Second,
	HeadRecheck:      time.Second,
	LineMemory:       time.Minute,
	WakeTTL:          2 * time.Second,
	HandOverCheck:    5 * time.Second,
	ParkFallback:     5 * time.Minute,
	LineFallbackMax:  6 * time.Hour,
	KeyTTL:           24 * time.Hour,
	ShortWait:        20 * time.Millisecond,
	AdoptEvery:       5 * time.Second,
	LeaseMargin:      5 * time.Second,
	HandOverLease:    15 * time.Second,
	StalledWakeFor:   5 * time.Minute,
	StalledWakeEvery: time.Second,
	RebalanceEvery:   50 * time.Millisecond,
	PublishEvery:     time.Second,
	StaleAfter:       5 * time.Second,
	ForgetAfter:      10 * time.Minute,
	TenantMemory:     24 * time.Hour,
	BreakerProbe:     5 * time.Second,
	BreakerRead:      time.Second,
}

// withDefaults is t with each zero field set to its default.
func (t Tuning) withDefaults() Tuning { return tuning.WithDefaults(t, DefaultTuning) }
