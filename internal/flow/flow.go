// Package flow decides when an attempt may start, so that no destination
// can starve the others and a struggling one is eased off. Six checks run
// before an attempt, in this order (Admit):
//
//   - the request's queue (all workers): a queue's messages start in the
//     order they were made, at most its parallelism at once (queue.go);
//   - an operator's settings on its key (all workers): a paused key holds
//     its requests, and a pin overrides their parallelism or rate
//     (control.go);
//   - adaptive backpressure (this worker): a key whose attempts answer 429
//     or 503 or time out gets an effective rate, cut multiplicatively on
//     overload and raised additively as attempts succeed (AIMD);
//   - the request's flowControl rate (all workers): turns spaced evenly
//     (GCRA's virtual time) in Redis, one given to each waiter once, so a
//     waiter sleeps until its own turn and then starts (before fairness,
//     so a waiter for a later turn takes no part in it);
//   - fairness (this worker): one destination (host:port) holds at most a
//     share (half by default) of the worker's slots; while another tenant
//     is about (learnt from the tenants stamped on requests), one tenant
//     holds at most a share of them and of a destination's; tenants take
//     turns in a destination's line;
//   - the request's flowControl parallelism (all workers): slots in Redis
//     with leases, handed straight to the longest waiter on release.
//
// A request that may not start is parked: its task goes back to asynq with
// a deadline and holds no worker slot, and nothing polls it. It is woken
// (Waker.Wake, which makes a waiting task pending) when the slot it waits
// for frees; the deadline is only a fallback (a worker that died holding a
// slot, whose lease then ends). Waits on a rate are timed: retryd's timer
// (Waker.WakeAt, internal/waiting) starts the task at its turn.
package flow

import (
	"context"
	"embed"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/waiting"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func script(name string) *redis.Script { return scriptAfter("", name) }

// scriptAfter is script name with the shared Lua of file prefix first.
func scriptAfter(prefix, name string) *redis.Script {
	var src []byte
	for _, f := range []string{prefix, name} {
		if f == "" {
			continue
		}
		b, err := scriptFiles.ReadFile("scripts/" + f + ".lua")
		if err != nil {
			panic(err)
		}
		src = append(append(src, b...), '\n')
	}
	return redis.NewScript(string(src))
}

var (
	acquireScript = scriptAfter("par_hand_back", "acquire")
	parNextScript = scriptAfter("par_hand_back", "par_next")
	turnScript    = script("turn")
	fairWait      = script("fair_wait")
	fairNext      = script("fair_next")
)

// Config are a worker's flow-control settings.
type Config struct {
	// Concurrency is the worker's slots (WORKER_CONCURRENCY).
	Concurrency int
	// FairShare is the share of Concurrency one destination may hold
	// (FLOW_FAIR_SHARE, default 0.5); 1 turns fairness off.
	FairShare float64
	// TenantShare is the share of Concurrency one tenant may hold, over
	// all its destinations, while more than one tenant is about
	// (FLOW_TENANT_SHARE); 0 or 1 turns it off.
	TenantShare float64
	// Adaptive turns adaptive backpressure on (FLOW_ADAPTIVE).
	Adaptive bool
	// MinRate is the floor of an adaptive cut, per second
	// (FLOW_ADAPTIVE_MIN_RATE).
	MinRate float64
	// Finished says whether a request has finished or is gone (the
	// record knows); a queue takes such ones out of its line when a waiter
	// finds them ahead of it. Nil: never.
	Finished func(ctx context.Context, id string) bool
	// Tuning are the timings; a zero field is DefaultTuning's.
	Tuning Tuning
}

// Tuning that needs no setting.

// Request is what the checks need to know of a request.
type Request struct {
	ID       string
	HostPort string // fairness is per destination
	Tenant   string // and per tenant (the one stamped on the request)
	Key      string // flowControl.key, else HostPort
	// Named: Key is a flowControl.key (one an operator may pause or pin),
	// not the destination's own.
	Named bool
	// Queue is the (tenant-qualified) queue whose order the request keeps
	// ("" for none).
	Queue string
	// Created is when the request was made: its place in its parallelism
	// line, and in its queue if it never joined the line.
	Created time.Time
	// Parallelism and Rate per Period are the request's flowControl (0:
	// none).
	Parallelism int
	Rate        int
	Period      time.Duration
	// Timeout is the attempt's timeout (its slot's lease follows it).
	Timeout time.Duration
}

// Outcome is what an attempt told about its destination.
type Outcome int

// The outcomes adaptive backpressure learns from.
const (
	Other      Outcome = iota // permanent failures, network errors: nothing about load
	Succeeded                 // 2xx
	Overloaded                // 429, 503, a timeout
)

// Waker is what flow asks of internal/waiting, the owner of waiting
// (waiting.Owner); flow decides, the owner moves tasks.
type Waker interface {
	// Wake returns ErrGone when the request has no parked task any more
	// (canceled, finished), and ErrInTransit while its task is still on
	// its way to being parked.
	Wake(ctx context.Context, id string) error
	// Pending says whether a woken request's task still waits to be
	// fetched (runnable, taken by no worker yet).
	Pending(ctx context.Context, id string) (bool, error)
	// WakeParked wakes a request whose task sleeps in a park, never one
	// waiting out a retry's backoff, and says whether it did.
	WakeParked(ctx context.Context, id string) (bool, error)
	// WakeAt wakes a parked request at a time (retryd's timer).
	WakeAt(ctx context.Context, id string, at time.Time) error
}

// Wake's errors (the owner's).
var (
	ErrGone      = waiting.ErrGone
	ErrInTransit = waiting.ErrInTransit
)

// Controller runs the checks for one worker.
type Controller struct {
	cfg   Config
	tune  Tuning // cfg.Tuning with its defaults
	rdb   redis.UniversalClient
	waker Waker
	log   *slog.Logger
	clk   clock.Clock

	mu       sync.Mutex
	hosts    map[string]*host
	keys     map[string]*key
	controls map[string]controlEntry
	parLines map[string]*parLine
	// tenantsSeen are the tenants of the requests admitted here, by when
	// last; tenantsListed a few of the tenants Redis lists (tenants.go).
	tenantsSeen   map[string]time.Time
	tenantsListed []string
	wakes         sync.WaitGroup
	// stirred ends Rebalance's rest (stir).
	stirred chan struct{}
	// stop ends with Close.
	stop   context.Context
	cancel context.CancelFunc
}

// New returns a worker's controller.
func New(cfg Config, rdb redis.UniversalClient, waker Waker, log *slog.Logger, clk clock.Clock) *Controller {
	if cfg.FairShare <= 0 {
		cfg.FairShare = 0.5
	}
	if cfg.MinRate <= 0 {
		cfg.MinRate = 1
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Controller{cfg: cfg, tune: cfg.Tuning.withDefaults(), rdb: rdb, waker: waker, log: log, clk: clk,
		hosts: map[string]*host{}, tenantsSeen: map[string]time.Time{}, keys: map[string]*key{}, controls: map[string]controlEntry{},
		parLines: map[string]*parLine{}, stirred: make(chan struct{}, 1), stop: stop, cancel: cancel}
}

// FairCap is how many slots of this worker one destination may hold.
func (c *Controller) FairCap() int {
	if c.cfg.FairShare >= 1 || c.cfg.Concurrency <= 0 {
		return int(^uint(0) >> 1)
	}
	return max(1, int(float64(c.cfg.Concurrency)*c.cfg.FairShare))
}

// Ticket is an admitted attempt; Done gives back what it holds.
type Ticket struct {
	c     *Controller
	req   Request
	start time.Time
	// lanes are the fairness lanes the attempt holds a slot of: its
	// destination's, then (while another tenant is about) its tenant's
	// there and its tenant's.
	lanes  []string
	global bool // holds a parallelism slot in Redis
}

// now is the controller's time.
func (c *Controller) now() time.Time { return c.clk.Now() }

// sleep waits d on the controller's clock, or until ctx ends.
func (c *Controller) sleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, c.clk, d)
}

// Parked is the answer to a request that must wait: its task sleeps until
// Until unless woken earlier. Reason is why (a record.Waiting* value);
// Starts is when it starts, zero when an event (a resume, a free slot, a
// turn given) does and Until is only a safety net.
type Parked struct {
	Until  time.Time
	Reason string
	Starts time.Time
}

func (p *Parked) Error() string { return "waiting for a flow-control slot" }

// Admit runs the checks: a Ticket when the attempt may start now, or a
// *Parked error saying until when its task sleeps.
func (c *Controller) Admit(ctx context.Context, req Request) (*Ticket, error) {
	now := c.now()
	// Its queue's order first (queue.go), then an operator's settings
	// on its key (control.go).
	if err := c.queueTurn(ctx, req, now); err != nil {
		return nil, err
	}
	if err := c.operatorSettings(ctx, &req, now); err != nil {
		return nil, err
	}
	c.mu.Lock()
	k := c.keyOf(req, now)
	cut := c.cfg.Adaptive && k.lim != nil
	var perSecond float64
	if cut {
		perSecond = float64(k.lim.Limit())
	}
	c.mu.Unlock()
	if cut {
		// Cut by adaptive backpressure: its turn, or a place in the key's
		// line until a turn is given to it.
		a, err := c.cutWait(ctx, k, req, now)
		if err != nil {
			return nil, err
		}
		if !a.start {
			c.parkedOne(req.Key)
			c.LeaveSlot(ctx, req)
			if a.at.IsZero() {
				return nil, &Parked{Until: now.Add(cutFallback(a.ahead, perSecond)), Reason: record.WaitingRate}
			}
			c.wakeAt(ctx, req.ID, a.at)
			return nil, &Parked{Until: a.at, Reason: record.WaitingRate, Starts: a.at}
		}
		now = c.now()
	}
	if req.Rate > 0 {
		// The rate first: a request whose turn is later sleeps until its
		// own turn without taking part in fairness meanwhile (a backlog
		// behind a rate would otherwise churn through the fairness line).
		until, ok, err := c.turn(ctx, req, now)
		if err != nil {
			return nil, err
		}
		if !ok && until.Sub(now) <= c.tune.ShortWait {
			// Its own turn, moments away (the timer hands tasks over a
			// little early): waiting it out costs less than a park.
			if err := c.sleep(ctx, until.Sub(now)); err != nil {
				return nil, err
			}
			ok, now = true, c.now()
		}
		if !ok {
			c.parkedOne(req.Key)
			c.LeaveSlot(ctx, req)
			c.wakeAt(ctx, req.ID, until)
			return nil, &Parked{Until: until, Reason: record.WaitingRate, Starts: until}
		}
	}
	// Fairness: the destination's share of the worker's slots, then (while
	// another tenant is about) the tenant's share of the destination's and
	// of the worker's. A request over one waits in that one's line. The
	// destination's comes first: there tenants take turns, so a tenant's
	// waiter for a full destination is not in a line of its own tenant's,
	// whose freed slot would wake it with another tenant's waiter for the
	// same destination, and then mostly take the destination's slot first.
	lanes := []string{req.HostPort}
	c.mu.Lock()
	if c.tenantFair(req.Tenant, now) {
		lanes = []string{req.HostPort, tenantAtLane(req.Tenant, req.HostPort), tenantLane(req.Tenant)}
	}
	for _, name := range lanes {
		h := c.lane(name)
		delete(h.woken, req.ID) // back (here) from a wake-up
		if h.inflight >= c.capOf(name) {
			k.parked++
			full := c.lineFull(name, h, now)
			c.mu.Unlock()
			err := c.parkInLine(ctx, name, full, req.ID, req.Tenant, now) // a *Parked or an error
			c.LeaveSlot(ctx, req)
			return nil, err
		}
	}
	for _, name := range lanes {
		c.hosts[name].inflight++
	}
	k.inflight++
	c.mu.Unlock()

	t := &Ticket{c: c, req: req, start: now, lanes: lanes}
	if req.Parallelism > 0 {
		until, ok, err := c.acquire(ctx, req, now)
		if err != nil || !ok {
			t.undo()
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			c.parkedOne(req.Key)
			return nil, &Parked{Until: until, Reason: record.WaitingParallelism}
		}
		t.global = true
	}
	c.mu.Lock()
	k.countStart(now)
	c.mu.Unlock()
	return t, nil
}

// LeaveSlot gives back the parallelism slot that may have been handed to
// a request that is not starting now, and its place in the key's line: it
// was woken for the slot, then its key's cut, rate or fairness made it
// wait, or it finished or was canceled while its task slept. Held, the
// slot would idle out its HandOverLease while the key's line waits. A
// request that waits keeps its place all the same: its place is when it
// was made.
func (c *Controller) LeaveSlot(ctx context.Context, req Request) {
	if req.Named {
		// An operator's pin (control.go) gives a key's requests slots
		// their own settings may not name.
		if pin := c.control(ctx, req.Key, c.now()).PinParallelism; pin > 0 {
			req.Parallelism = pin
		}
	}
	if req.Parallelism > 0 {
		c.release(ctx, req, req.ID)
	}
}

func (c *Controller) parkedOne(name string) {
	c.mu.Lock()
	if k := c.keys[name]; k != nil {
		k.parked++
	}
	c.mu.Unlock()
}

// undo gives back the worker-local share of an attempt that did not start.
func (t *Ticket) undo() {
	c := t.c
	c.mu.Lock()
	for _, name := range t.lanes {
		if h := c.hosts[name]; h != nil {
			h.inflight--
		}
	}
	if k := c.keys[t.req.Key]; k != nil {
		k.inflight--
	}
	// A slot freed with no attempt's end to promote for it: Rebalance
	// gives it to a waiter, if a line wants it.
	c.stir()
	c.mu.Unlock()
}

// Done gives back what the attempt held, wakes whoever waits for it, and
// teaches adaptive backpressure what the attempt said about its key.
func (t *Ticket) Done(ctx context.Context, o Outcome) {
	c, now := t.c, t.c.now()
	c.mu.Lock()
	type freed struct {
		lane string
		free int
	}
	var lines []freed
	for _, name := range t.lanes {
		if h := c.hosts[name]; h != nil {
			h.inflight--
			h.took(now.Sub(t.start))
			if !h.lineSeen.IsZero() {
				lines = append(lines, freed{name, h.take(c.capOf(name), now)})
			}
		}
	}
	k := c.keys[t.req.Key]
	if k != nil {
		k.inflight--
		k.learn(c, o, now)
	}
	c.mu.Unlock()
	for _, l := range lines {
		// The slot goes to the first in the lane's line, whichever worker
		// parked it; one round trip, which also forgets this request's
		// place. Without a line (as far as this worker knows: Rebalance
		// looks at those it saw) an attempt costs nothing here.
		c.promote(ctx, l.lane, t.req.ID, l.free)
	}
	if t.global {
		c.release(ctx, t.req, t.req.ID)
	}
}

// Close stops waking parked requests (their deadlines still wake them)
// and waits for the wake-ups in flight.
func (c *Controller) Close() {
	c.cancel()
	c.wakes.Wait()
}
