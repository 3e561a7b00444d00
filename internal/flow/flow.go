package flow

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/tenant"
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
	// Breaker is the endpoints' circuit breaker (endpoint.go).
	Breaker BreakerConfig
	// OnEndpoint hears of each endpoint the breaker opens (open) or whose
	// probe closes it (the operator's events); nil: nobody.
	OnEndpoint func(e EndpointChange)
	// Tuning are the timings; a zero field is DefaultTuning's.
	Tuning Tuning
}

// Tuning that needs no setting.

// Request is what the checks need to know of a request.
type Request struct {
	ID       string
	HostPort string // fairness is per destination
	Tenant   string // and per tenant (the one stamped on the request)
	// Key is the request's flow-control key: its flowControl.key (Named,
	// qualified by its tenant already), else HostPort, which flow keeps
	// per tenant too (scoped).
	Key string
	// Endpoint is scheme://host:port: the breaker's is per endpoint and
	// tenant ("": none).
	Endpoint string
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

// scoped is r with its key as flow keeps it: a destination's own key
// (host:port) is its tenant's, as a named key is. What one tenant's
// requests teach a key (an adaptive cut), ask of it (a rate, a
// parallelism) or hold of it is then never another tenant's: a tenant
// whose requests to a host are refused with 503s cuts its own rate there,
// not the rate of every tenant sending to that host.
func (r Request) scoped() Request {
	if !r.Named {
		r.Key = tenant.Qualify(r.Tenant, r.Key)
	}
	return r
}

// Outcome is what an attempt told about its destination.
type Outcome int

// The outcomes adaptive backpressure and the endpoint's breaker learn
// from.
const (
	Other      Outcome = iota // a client error (4xx) and other permanent failures: nothing about the endpoint
	Succeeded                 // 2xx
	Overloaded                // 429, 503, 408, a timeout
	Failed                    // other 5xx, a connection error: the endpoint's failure, not load
	// NoCall: retryd made no call (the destination rules refused the
	// address before dialling). It frees what the attempt held, and is
	// counted nowhere attempts are: not by adaptive backpressure, the
	// key's recent attempts, or the breaker, whose probe it is not.
	NoCall
)

// core is what every gate shares: the settings, Redis (flowdb), the clock, the
// owner of waiting (mover) and the worker's lifetime. Its mu guards the gates' state in this
// worker's memory (one lock: a gate may read another's state, as a cut
// line drained at once reads its destination's fair slots).
type core struct {
	cfg   Config
	tune  Tuning // cfg.Tuning with its defaults
	db    *flowdb.DB
	mover Mover
	log   *slog.Logger
	clk   clock.Clock

	mu    sync.Mutex
	wakes sync.WaitGroup
	// stirred ends Rebalance's rest (stir).
	stirred chan struct{}
	// stop ends with Close.
	stop   context.Context
	cancel context.CancelFunc
}

// Controller runs the checks for one worker: it holds the gates, runs
// Admit's pipeline through them (gates.go) and the loops that look after
// their lines (Rebalance, Publish).
type Controller struct {
	*core
	queue    *queueGate
	operator *operatorGate
	breaker  *endpointGate
	cut      *cutGate
	rate     *rateGate
	fair     *fairGate
	par      *parGate
}

// New returns a worker's controller.
func New(cfg Config, rdb redis.UniversalClient, mover Mover, log *slog.Logger, clk clock.Clock) *Controller {
	if cfg.FairShare <= 0 {
		cfg.FairShare = 0.5
	}
	if cfg.MinRate <= 0 {
		cfg.MinRate = 1
	}
	stop, cancel := context.WithCancel(context.Background())
	co := &core{cfg: cfg, tune: cfg.Tuning.withDefaults(), db: flowdb.New(rdb), mover: mover, log: log, clk: clk,
		stirred: make(chan struct{}, 1), stop: stop, cancel: cancel}
	fair := &fairGate{core: co, hosts: map[string]*host{}, tenantsSeen: map[string]time.Time{}}
	operator := &operatorGate{core: co, controls: map[string]controlEntry{}}
	return &Controller{core: co,
		queue:    &queueGate{core: co},
		operator: operator,
		breaker:  &endpointGate{core: co, endpoints: endpoints{byName: map[string]*endpoint{}, states: map[string]readState{}}},
		cut:      &cutGate{core: co, keys: map[string]*key{}, fair: fair},
		rate:     &rateGate{core: co},
		fair:     fair,
		par:      &parGate{core: co, parLines: map[string]*parLine{}, fair: fair, operator: operator},
	}
}

// FairCap is how many slots of this worker one destination may hold.
func (c *core) FairCap() int {
	if c.cfg.FairShare >= 1 || c.cfg.Concurrency <= 0 {
		return int(^uint(0) >> 1)
	}
	return max(1, int(float64(c.cfg.Concurrency)*c.cfg.FairShare))
}

// now is the controller's time.
func (c *core) now() time.Time { return c.clk.Now() }

// sleep waits d on the controller's clock, or until ctx ends.
func (c *core) sleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, c.clk, d)
}

// Close stops waking parked requests (their deadlines still wake them)
// and waits for the wake-ups in flight.
func (c *Controller) Close() {
	c.cancel()
	c.wakes.Wait()
}

// QueueDone takes req, finished, out of its queue's line and wakes the
// next (queueGate.done).
func (c *Controller) QueueDone(ctx context.Context, req Request) { c.queue.done(ctx, req) }

// LeaveSlot gives back the parallelism slot that may have been handed to
// a request that is not starting now, and its place in the key's line
// (parGate.leaveSlot).
func (c *Controller) LeaveSlot(ctx context.Context, req Request) { c.par.leaveSlot(ctx, req) }

// LineRetry puts a retry of req, due at due, straight in its key's line
// when the key is cut on this worker (cutGate.lineRetry).
func (c *Controller) LineRetry(ctx context.Context, req Request, due time.Time) (until time.Time, ok bool) {
	return c.cut.lineRetry(ctx, req, due)
}

// PublishEndpoints writes this worker's endpoints used in the window for
// GET /endpoints every PublishEvery until ctx ends (endpointGate.publish).
func (c *Controller) PublishEndpoints(ctx context.Context, worker string) {
	c.breaker.publish(ctx, worker)
}
