package flow

// Admit's gates: each gate's enter and exit live in the file the package
// doc names for it.

import (
	"context"
	"errors"
	"time"
)

// gate is one of Admit's checks.
type gate struct {
	// name is how the package doc lists it.
	name string
	// enter lets the attempt through (nil) or holds it: a *Parked, or the
	// error that kept the gate from deciding.
	enter func(c *Controller, ctx context.Context, t *Ticket) error
	// exit gives back what enter took: when the attempt ends (Done), or
	// when a later gate holds it (a zero ending). Nil: enter takes
	// nothing.
	exit func(c *Controller, ctx context.Context, t *Ticket, e ending)
	// missed is told of an attempt parked before it reached this gate (by
	// gate by), which may still hold something of it from an earlier
	// wait. Nil: nothing.
	missed func(c *Controller, ctx context.Context, t *Ticket, by gate)
	// paces says the gate paces the requests of a destination or key (a
	// turn, a share): what a later gate handed a request it holds, the
	// next request of its key to the same destination could not use any
	// sooner.
	paces bool
}

// ending is how an attempt left its gates: started says it ran (Done),
// with outcome, until at; a zero ending is an attempt held by a later
// gate.
type ending struct {
	started bool
	outcome Outcome
	at      time.Time
}

// gates are Admit's, in order: each runs its gate type's enter, exit and
// missed (the gate types hold their own state; Controller wires them).
var gates = []gate{
	{name: "queue", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.queue.enter(ctx, t) }},
	{name: "operator", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.operator.enter(ctx, t) }},
	{name: "endpoint", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.breaker.enter(ctx, t) },
		exit: func(c *Controller, ctx context.Context, t *Ticket, e ending) { c.breaker.exit(ctx, t, e) }},
	{name: "cut", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.cut.enter(ctx, t) },
		exit: func(c *Controller, ctx context.Context, t *Ticket, e ending) { c.cut.exit(ctx, t, e) }, paces: true},
	{name: "rate", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.rate.enter(ctx, t) }, paces: true},
	{name: "fairness", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.fair.enter(ctx, t) },
		exit: func(c *Controller, ctx context.Context, t *Ticket, e ending) { c.fair.exit(ctx, t, e) }, paces: true},
	{name: "parallelism", enter: func(c *Controller, ctx context.Context, t *Ticket) error { return c.par.enter(ctx, t) },
		exit:   func(c *Controller, ctx context.Context, t *Ticket, e ending) { c.par.exit(ctx, t, e) },
		missed: func(c *Controller, ctx context.Context, t *Ticket, by gate) { c.par.missed(ctx, t, by) }},
}

// Ticket is an admitted attempt; Done gives back what it holds.
type Ticket struct {
	c   *Controller
	req Request // with an operator's pins applied
	// start is when the attempt may start, as the gates saw it (a rate's
	// turn moments away is waited out).
	start time.Time
	// turn is the latest turn a gate started the attempt at (zero: none),
	// see Turn.
	turn time.Time
	k    *key // its key's state here (cut)
	// lanes are the fairness lanes the attempt holds a slot of: its
	// destination's, then (while another tenant is about) its tenant's
	// there and its tenant's.
	lanes  []string
	global bool // holds a parallelism slot in Redis
	// endpoint is the breaker's name of its endpoint ("": none, or the
	// breaker is off); probe says the attempt is its open endpoint's
	// probe.
	endpoint string
	probe    bool
	// moves are what the gates decided about waiting tasks on the way
	// (its own timed park, the next prober's); Admit has them made.
	moves []Move
}

// Admit passes req through the gates: a Ticket when the attempt may start
// now, or a *Parked error saying until when its task sleeps.
func (c *Controller) Admit(ctx context.Context, req Request) (*Ticket, error) {
	t := &Ticket{c: c, req: req.scoped(), start: c.now()}
	for i, g := range gates {
		if err := g.enter(c, ctx, t); err != nil {
			c.move(ctx, t.moves...) // its own timed park first, as the gate decided it
			c.hold(ctx, t, i, err)
			return nil, err
		}
	}
	c.move(ctx, t.moves...)
	c.mu.Lock()
	t.k.countStart(t.start)
	c.mu.Unlock()
	return t, nil
}

// hold gives back what the gates before gates[at] took, in reverse order:
// gates[at] held t (err). A park is told to the gates after it too; an
// error (Redis could not say) is not, so that an outage costs no more
// round trips than the one that failed.
func (c *Controller) hold(ctx context.Context, t *Ticket, at int, err error) {
	for i := at - 1; i >= 0; i-- {
		if g := gates[i]; g.exit != nil {
			g.exit(c, ctx, t, ending{})
		}
	}
	if _, parked := errors.AsType[*Parked](err); !parked {
		return
	}
	for _, g := range gates[at+1:] {
		if g.missed != nil {
			g.missed(c, ctx, t, gates[at])
		}
	}
	c.cut.parkedOne(t.req.Key)
}

// Turn is when a gate let the attempt start after a wait it set: the
// turn a cut key's line gave it, or a rate's or cut rate's turn it waited
// out. Zero when none did (it started when it came, or an event woke it).
// What came later than its turn is the workers' delay, not the wait.
func (t *Ticket) Turn() time.Time { return t.turn }

// laterTurn notes at as a turn the attempt started at.
func (t *Ticket) laterTurn(at time.Time) {
	if at.After(t.turn) {
		t.turn = at
	}
}

// Done leaves the gates in reverse order: each gives back what the
// attempt held, wakes whoever waits for it, and learns what the attempt
// said (o).
func (t *Ticket) Done(ctx context.Context, o Outcome) {
	e := ending{started: true, outcome: o, at: t.c.now()}
	for i := len(gates) - 1; i >= 0; i-- {
		if g := gates[i]; g.exit != nil {
			g.exit(t.c, ctx, t, e)
		}
	}
}

// parkedOne counts a park of key name's, for its stats.
func (cg *cutGate) parkedOne(name string) {
	cg.mu.Lock()
	if k := cg.keys[name]; k != nil {
		k.parked++
	}
	cg.mu.Unlock()
}

// Parked is the answer to a request that must wait: its task sleeps until
// Until unless woken earlier. Reason is why (a keys.Waiting* value);
// Starts is when it starts, zero when an event (a resume, a free slot, a
// turn given) does and Until is only a safety net.
type Parked struct {
	Until  time.Time
	Reason string
	Starts time.Time
}

func (p *Parked) Error() string { return "waiting for a flow-control slot" }
