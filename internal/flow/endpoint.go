package flow

// The endpoint gate: a circuit breaker per endpoint (scheme://host:port)
// of each tenant, so that one tenant's failures never hold another's
// deliveries to the same host. An endpoint is closed (healthy), open
// (failing: no attempt but a probe) or half_open (its probe is out).
//
// Closed, the gate costs about no Redis command per attempt: a worker
// counts the outcomes of its own attempts in memory (Ticket.Done), and
// learns whether an endpoint it delivers to is not closed by reading that
// endpoint's state, at most once per BreakerRead: never another
// endpoint's, so that no tenant's endpoints slow another's deliveries.
// Open, a request runs the endpoint's script once: it goes as the probe
// when one is due, or waits in the endpoint's line (the line library),
// holding nothing, until a probe that succeeds wakes the line in order.
// Only the first waiter has a timer, at the next probe; the others sleep
// on a long safety net, or until they may end (BreakerConfig.FailAfter).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/tenant"
)

// BreakerConfig are the breaker's settings (BREAKER_*).
type BreakerConfig struct {
	// Off turns the breaker off (BREAKER=off).
	Off bool
	// Window is how long an endpoint's attempts are counted
	// (BREAKER_WINDOW, default 30 s).
	Window time.Duration
	// MinAttempts are the attempts of a window an endpoint needs before it
	// may open (BREAKER_MIN_ATTEMPTS, default 20).
	MinAttempts int
	// FailureRatio is the share of them that must be the endpoint's
	// failures (BREAKER_FAILURE_RATIO, default 0.9).
	FailureRatio float64
	// ProbeMax is the longest wait between probes (BREAKER_PROBE_MAX,
	// default 5 min).
	ProbeMax time.Duration
	// FailAfter ends a request that has waited this long for its open
	// endpoint as failed (BREAKER_FAIL_AFTER), once a probe made while it
	// waited failed (an endpoint an operator opened is never probed: its
	// waiters end on time); zero: never.
	FailAfter time.Duration
}

// DefaultBreaker are the breaker's default settings.
var DefaultBreaker = BreakerConfig{Window: 30 * time.Second, MinAttempts: 20, FailureRatio: 0.9, ProbeMax: 5 * time.Minute}

// withDefaults is b with each zero field set to its default.
func (b BreakerConfig) withDefaults() BreakerConfig {
	if b.Window <= 0 {
		b.Window = DefaultBreaker.Window
	}
	if b.MinAttempts <= 0 {
		b.MinAttempts = DefaultBreaker.MinAttempts
	}
	if b.FailureRatio <= 0 {
		b.FailureRatio = DefaultBreaker.FailureRatio
	}
	if b.ProbeMax <= 0 {
		b.ProbeMax = DefaultBreaker.ProbeMax
	}
	return b
}

// The endpoint states.
const (
	EndpointClosed   = flowdb.EndpointClosed
	EndpointOpen     = flowdb.EndpointOpen
	EndpointHalfOpen = flowdb.EndpointHalfOpen
)

// ErrEndpointDown is the endpoint gate's answer for a request that waited
// for its open endpoint longer than BreakerConfig.FailAfter: it ends as
// failed (failureClass endpoint_down).
var ErrEndpointDown = errors.New("the endpoint stayed open too long")

// windowBuckets are the parts of a window an endpoint's outcomes are
// counted in: the window slides by one part at a time.
const windowBuckets = 10

// MaxEndpoints bounds the endpoints whose outcomes a worker counts.
const MaxEndpoints = 10000

// endpoints are the breakers as this worker knows them. core.mu guards them.
type endpoints struct {
	byName map[string]*endpoint
	// states are the endpoints' states as this worker last read or set
	// them, each on its own.
	states map[string]readState
}

// readState is whether an endpoint is not closed, as read (or set) at at.
type readState struct {
	open bool
	at   time.Time
}

// isOpen says whether endpoint name is not closed as far as this worker
// knows. Called with core.mu held.
func (e *endpoints) isOpen(name string) bool { return e.states[name].open }

// setState notes endpoint name's state, as of at. Called with core.mu held.
func (e *endpoints) setState(name string, open bool, at time.Time, fresh time.Duration) {
	if _, known := e.states[name]; !known && len(e.states) >= MaxEndpoints {
		// Bounded: a state older than fresh is read again anyway.
		for n, s := range e.states {
			if at.Sub(s.at) >= fresh {
				delete(e.states, n)
			}
		}
	}
	e.states[name] = readState{open: open, at: at}
}

// endpoint counts one endpoint's recent attempts on this worker.
type endpoint struct {
	buckets [windowBuckets]struct {
		at               int64 // which part of time it counts
		attempts, failed int
	}
	lastUsed time.Time
}

// count adds an attempt (failed or not) at now, and returns the window's
// attempts and failures.
func (e *endpoint) count(failed bool, now time.Time, window time.Duration) (attempts, failures int) {
	part := max(window/windowBuckets, time.Millisecond)
	at := now.UnixNano() / int64(part)
	b := &e.buckets[at%windowBuckets]
	if b.at != at {
		b.at, b.attempts, b.failed = at, 0, 0
	}
	b.attempts++
	if failed {
		b.failed++
	}
	for _, b := range e.buckets {
		if b.at > at-windowBuckets {
			attempts += b.attempts
			failures += b.failed
		}
	}
	return attempts, failures
}

// reset forgets the counted attempts (the endpoint opened).
func (e *endpoint) reset() {
	for i := range e.buckets {
		e.buckets[i].attempts, e.buckets[i].failed = 0, 0
	}
}

// EndpointName is the breaker's name of an endpoint of tenant t.
func EndpointName(t, endpoint string) string { return tenant.Qualify(t, endpoint) }

// endpointGate is the endpoint gate: the breakers of the endpoints as
// this worker knows them (their counts and states, under core.mu).
type endpointGate struct {
	*core
	endpoints endpoints
}

// enter runs the endpoint gate: a request to an endpoint that is
// not closed goes as its probe, or waits in its line for a probe that
// succeeds (keys.WaitingEndpointOpen), or ends when it waited too long
// (ErrEndpointDown).
func (eg *endpointGate) enter(ctx context.Context, t *Ticket) error {
	if eg.cfg.Breaker.Off || t.req.Endpoint == "" {
		return nil
	}
	t.endpoint = EndpointName(t.req.Tenant, t.req.Endpoint)
	if !eg.notClosed(ctx, t.endpoint, t.start) {
		return nil
	}
	br := eg.cfg.Breaker.withDefaults()
	lease := t.req.Timeout + eg.tune.LeaseMargin
	parKey := ""
	if t.req.Parallelism > 0 {
		parKey = t.req.Key
	}
	r, err := eg.db.Endpoint.Enter(ctx, t.endpoint, t.req.ID, t.start, eg.tune.KeyTTL, lease, parPlace(t.req, t.start), parKey, br.FailAfter)
	if err != nil {
		return fmt.Errorf("endpoint gate of %s: %w", t.req.ID, err)
	}
	switch r.Code {
	case flowdb.EnterGo:
		eg.mu.Lock()
		eg.endpoints.setState(t.endpoint, false, t.start, eg.tune.BreakerRead)
		eg.mu.Unlock()
		if r.Expired {
			// Its state expired, unused: the list forgets it too (an
			// endpoint opened meanwhile is listed again by its next
			// failure).
			if err := eg.db.Endpoint.Unlist(ctx, t.endpoint); err != nil {
				eg.log.Warn("could not unlist an endpoint whose state expired", "endpoint", t.endpoint, "err", err)
			}
		}
		return nil
	case flowdb.EnterProbe:
		t.probe = true
		return nil
	case flowdb.EnterEnd:
		if r.Next != "" {
			// It was first in line: the next waiter is woken for the
			// probe in its place.
			t.moves = append(t.moves, At(r.Next, r.NextAt))
		}
		return fmt.Errorf("%w: %s, waited since %s", ErrEndpointDown, t.req.Endpoint, r.Began.UTC().Format(time.RFC3339))
	}
	until := t.start.Add(max(r.NextProbe.Sub(t.start), 0) + max(eg.tune.ParkFallback, 2*br.ProbeMax))
	if !r.EndAt.IsZero() && r.EndAt.Before(until) {
		until = r.EndAt
	}
	if r.Head && !r.NextProbe.IsZero() {
		// The first in line is woken for the next probe; the others
		// follow it once one succeeds.
		t.moves = append(t.moves, At(t.req.ID, r.NextProbe))
	}
	return &Parked{Until: until, Reason: keys.WaitingEndpointOpen, Starts: r.NextProbe}
}

// notClosed says whether endpoint name is open or half open as far
// as this worker knows: it reads that endpoint's state, and no other's,
// at most once per BreakerRead.
func (eg *endpointGate) notClosed(ctx context.Context, name string, now time.Time) bool {
	eg.mu.Lock()
	known, ok := eg.endpoints.states[name]
	eg.mu.Unlock()
	if ok && now.Sub(known.at) < eg.tune.BreakerRead {
		return known.open
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := eg.db.Endpoint.State(rctx, name)
	if err != nil {
		eg.log.Warn("could not read whether an endpoint is open; the last read holds", "endpoint", name, "err", err)
		return known.open
	}
	open := v == EndpointOpen || v == EndpointHalfOpen
	eg.mu.Lock()
	defer eg.mu.Unlock()
	if open && !eg.endpoints.isOpen(name) {
		if ep := eg.endpoints.byName[name]; ep != nil {
			// Opened elsewhere: the failures counted here decided it
			// already, and must not open it again once it closes.
			ep.reset()
		}
	}
	eg.endpoints.setState(name, open, now, eg.tune.BreakerRead)
	return open
}

// exit learns what an attempt said of its endpoint: a probe's
// answer closes the endpoint or opens it again; another attempt is
// counted, and opens the endpoint when the window's failures say so.
func (eg *endpointGate) exit(ctx context.Context, t *Ticket, e ending) {
	if t.endpoint == "" {
		return
	}
	if e.outcome == NoCall {
		e.started = false // no call: not an attempt, nor a probe's answer
	}
	failed := e.outcome == Overloaded || e.outcome == Failed
	if t.probe {
		verdict := "back" // held by a later gate: the next probe is due
		switch {
		case e.started && failed:
			verdict = "failed"
		case e.started:
			verdict = "ok"
		}
		eg.probed(ctx, t, verdict, e.at)
		return
	}
	if !e.started {
		return
	}
	br := eg.cfg.Breaker.withDefaults()
	eg.mu.Lock()
	ep := eg.endpoints.byName[t.endpoint]
	if ep == nil {
		if len(eg.endpoints.byName) >= MaxEndpoints {
			for n, old := range eg.endpoints.byName {
				if e.at.Sub(old.lastUsed) > br.Window {
					delete(eg.endpoints.byName, n)
				}
			}
		}
		ep = &endpoint{}
		eg.endpoints.byName[t.endpoint] = ep
	}
	ep.lastUsed = e.at
	attempts, failures := ep.count(failed, e.at, br.Window)
	trip := failed && !eg.endpoints.isOpen(t.endpoint) && attempts >= br.MinAttempts &&
		float64(failures) >= br.FailureRatio*float64(attempts)
	if trip {
		ep.reset()
		eg.endpoints.setState(t.endpoint, true, e.at, eg.tune.BreakerRead)
	}
	eg.mu.Unlock()
	if trip {
		ratio := float64(failures) / float64(attempts)
		opened, err := openEndpoint(ctx, eg.db, t.endpoint, ratio, "breaker", e.at, eg.tune)
		if err != nil {
			eg.log.Warn("could not open a failing endpoint", "endpoint", t.endpoint, "err", err)
			return
		}
		eg.log.Info("endpoint opened: its attempts fail", "endpoint", t.endpoint, "attempts", attempts, "failures", failures)
		if opened {
			eg.changed(t.endpoint, true, ratio, attempts)
		}
	}
}

// probed tells Redis how t's probe ended, and wakes whom that concerns:
// the whole line when it closed the endpoint, its first waiter at the
// next probe when not.
func (eg *endpointGate) probed(ctx context.Context, t *Ticket, verdict string, now time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	br := eg.cfg.Breaker.withDefaults()
	p, err := eg.db.Endpoint.Probed(ctx, t.endpoint, t.req.ID, now, verdict, br.ProbeMax, br.FailAfter)
	if err != nil {
		eg.log.Warn("could not tell an endpoint how its probe ended; the probe's lease ends it", "endpoint", t.endpoint, "err", err)
		return
	}
	switch {
	case p.Closed:
		eg.log.Info("endpoint closed: its probe succeeded", "endpoint", t.endpoint)
		eg.changed(t.endpoint, false, 0, 0)
		if err := eg.db.Endpoint.Unlist(ctx, t.endpoint); err != nil {
			eg.log.Warn("could not unlist a closed endpoint", "endpoint", t.endpoint, "err", err)
		}
		eg.mu.Lock()
		eg.endpoints.setState(t.endpoint, false, now, eg.tune.BreakerRead)
		eg.mu.Unlock()
		eg.wakes.Add(1)
		go func() {
			defer eg.wakes.Done()
			if err := wakeEndpointLine(eg.stop, eg.db, eg.mover, eg.log, t.endpoint, eg.tune.KeyTTL); err != nil {
				eg.log.Warn("could not wake a closed endpoint's waiters; their safety nets do", "endpoint", t.endpoint, "err", err)
			}
		}()
	case !p.NoProbe:
		var moves []Move
		if p.Head != "" {
			moves = append(moves, At(p.Head, p.NextProbe))
		}
		// Waiters that waited BREAKER_FAIL_AFTER before a probe failed:
		// now they end.
		for _, id := range p.Ended {
			moves = append(moves, At(id, now))
		}
		eg.move(ctx, moves...)
	}
}
