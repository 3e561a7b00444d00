// Package flow decides when an attempt may start, so that no destination
// can starve the others and a struggling one is eased off. Four checks run
// before an attempt:
//
//   - adaptive backpressure (this worker): a key whose attempts answer 429
//     or 503 or time out gets an effective rate, cut multiplicatively on
//     overload and raised additively as attempts succeed (AIMD);
//   - the request's flowControl rate (all workers): turns spaced evenly
//     (GCRA's virtual time) in Redis, one given to each waiter once, so a
//     waiter sleeps until its own turn and then starts (before fairness,
//     so a waiter for a later turn takes no part in it);
//   - fairness (this worker): one destination (host:port) holds at most a
//     share (half by default) of the worker's slots;
//   - the request's flowControl parallelism (all workers): slots in Redis
//     with leases, handed straight to the longest waiter on release.
//
// A request that may not start is parked: its task goes back to asynq with
// a deadline and holds no worker slot, and nothing polls it. It is woken
// (asynq's Inspector.RunTask) when the slot it waits for frees; the
// deadline is only a fallback (a worker that died holding a slot, whose
// lease then ends). Waits on a rate are timed: the task sleeps until its
// turn.
package flow

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func script(name string) *redis.Script {
	b, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}

var (
	acquireScript = script("acquire")
	releaseScript = script("release")
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
	// Adaptive turns adaptive backpressure on (FLOW_ADAPTIVE).
	Adaptive bool
	// MinRate is the floor of an adaptive cut, per second
	// (FLOW_ADAPTIVE_MIN_RATE).
	MinRate float64
}

// Tuning that needs no setting.
const (
	// CutFactor multiplies a key's effective rate on overload.
	CutFactor = 0.5
	// CutEvery bounds how often a key is cut: one burst of failures (every
	// attempt in flight answering 503) is one cut, not many.
	CutEvery = time.Second
	// MinOverloads is how many overloaded answers a key must get within
	// two seconds on a worker before its first cut.
	MinOverloads = 25
	// CutShare is the share of a key's answers (of the last one to two
	// seconds) that must be overloaded for a cut; below it, successes
	// raise the rate again. A destination that sheds some load (30 % of
	// 503s) keeps its rate; one that mostly refuses is eased off.
	CutShare = 0.5
	// RecoverShare is the additive increase: a tenth of the rate before
	// the first cut, per second of successes (at least 1/s).
	RecoverShare = 0.1
	// ParkFallback is the longest a task parked for a slot sleeps before it
	// looks again without being woken: only a safety net, since its place
	// is kept in Redis (fairness lines, parallelism lines) and any worker
	// with a free slot wakes it.
	ParkFallback = 5 * time.Minute
	// LineMemory is how long a worker keeps looking (every RebalanceEvery)
	// at a destination's fairness line it last saw non-empty.
	LineMemory = time.Minute
	// RateHorizon is how far ahead an adaptive wait is booked; a longer
	// wait looks again after RateHorizon to 2·RateHorizon.
	RateHorizon = 5 * time.Second
	// LeaseMargin is added to an attempt's timeout for its slot's lease;
	// HandOverLease is the lease of a slot handed to a woken request.
	LeaseMargin   = 5 * time.Second
	HandOverLease = 15 * time.Second
	// KeyTTL is how long a key's Redis state lives untouched.
	KeyTTL = 24 * time.Hour
)

// Request is what the checks need to know of a request.
type Request struct {
	ID       string
	HostPort string // fairness is per destination
	Key      string // flowControl.key, else HostPort
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

// Waker makes a parked request's task runnable now.
type Waker interface {
	// Wake returns ErrGone when the request has no parked task any more
	// (canceled, finished), and ErrInTransit while its task is still on
	// its way to being parked.
	Wake(ctx context.Context, id string) error
	// Waiting says whether a woken request's task still waits to be
	// fetched (runnable, taken by no worker yet).
	Waiting(ctx context.Context, id string) (bool, error)
}

// Wake's errors.
var (
	ErrGone      = errors.New("no parked task")
	ErrInTransit = errors.New("task not parked yet")
)

// Controller runs the checks for one worker.
type Controller struct {
	cfg   Config
	rdb   redis.UniversalClient
	waker Waker
	log   *slog.Logger
	now   func() time.Time

	mu    sync.Mutex
	hosts map[string]*host
	keys  map[string]*key
	// booked are adaptive waits booked ahead: a parked request that comes
	// back to this worker at its time starts without booking again.
	booked map[string]time.Time
	wakes  sync.WaitGroup
	// stop ends with Close.
	stop   context.Context
	cancel context.CancelFunc
}

// host is one destination's fairness state on this worker. Its waiters
// wait in the destination's line in Redis, shared by all workers.
type host struct {
	inflight int
	// lineSeen is when this worker last saw the destination's line
	// non-empty (zero: empty, as far as it knows).
	lineSeen time.Time
	// woken are the waiters woken and not yet back (id -> when): a woken
	// request may be fetched by another worker, so a wake-up counts
	// against this worker's free slots for WakeTTL only.
	woken map[string]time.Time
}

// WakeTTL is how long a woken waiter holds a free slot of the worker that
// woke it before that worker wakes another in its place.
const WakeTTL = 2 * time.Second

// freeSlots is how many of limit slots the host has free here, not
// counting slots promised to waiters woken in the last WakeTTL.
func (h *host) freeSlots(limit int, now time.Time) int {
	pending := 0
	for id, at := range h.woken {
		if now.Sub(at) >= WakeTTL {
			delete(h.woken, id)
			continue
		}
		pending++
	}
	return max(0, limit-h.inflight-pending)
}

// promise counts ids, just woken, against the host's free slots here.
func (h *host) promise(ids []string, now time.Time) {
	if h.woken == nil {
		h.woken = map[string]time.Time{}
	}
	for _, id := range ids {
		h.woken[id] = now
	}
}

// fairNames are the Redis keys of a destination's fairness line.
func fairNames(hostPort string) (line, promoted string) {
	tag := keyTag("fair:" + hostPort)
	return tag + ":line", tag + ":promoted"
}

// waitInLine puts id in hostPort's fairness line (keeping a place it had).
func (c *Controller) waitInLine(ctx context.Context, hostPort, id string, now time.Time) error {
	line, promoted := fairNames(hostPort)
	return fairWait.Run(ctx, c.rdb, []string{line, promoted}, id, now.UnixMilli(), KeyTTL.Milliseconds()).Err()
}

// nextInLine takes up to n waiters of hostPort's line, oldest first, and
// forgets the place of ended (the request whose attempt ended, or "").
// left is how many still wait.
func (c *Controller) nextInLine(ctx context.Context, hostPort, ended string, n int) (ids []string, left int, err error) {
	line, promoted := fairNames(hostPort)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	res, err := fairNext.Run(ctx, c.rdb, []string{line, promoted}, ended, n, KeyTTL.Milliseconds()).StringSlice()
	if err != nil {
		return nil, 0, err
	}
	if len(res) < 1 {
		return nil, 0, fmt.Errorf("fair_next script: unexpected reply %v", res)
	}
	left, err = strconv.Atoi(res[0])
	if err != nil {
		return nil, 0, fmt.Errorf("fair_next script: unexpected reply %v", res)
	}
	return res[1:], left, nil
}

// promote takes up to free waiters of hostPort's line (forgetting ended's
// place), promises them this worker's free slots and wakes them.
func (c *Controller) promote(ctx context.Context, hostPort, ended string, free int) {
	ids, left, err := c.nextInLine(ctx, hostPort, ended, free)
	if err != nil {
		c.log.Warn("could not read a fairness line; its waiters' deadlines will wake them", "host", hostPort, "err", err)
		return
	}
	now := c.now()
	c.mu.Lock()
	if h := c.hosts[hostPort]; h != nil {
		h.promise(ids, now)
		if left > 0 {
			h.lineSeen = now
		} else {
			h.lineSeen = time.Time{}
		}
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.wakeLocal(hostPort, id)
	}
}

// RebalanceEvery is how often a worker wakes waiters of destinations that
// have free slots on it without an attempt ending (the woken ones went to
// other workers).
const RebalanceEvery = 100 * time.Millisecond

// Rebalance wakes, every RebalanceEvery until ctx ends, the waiters of
// destinations with free slots on this worker. A slot promised to a woken
// request is freed as soon as that request's task was fetched (by any
// worker): with several workers it mostly lands on another one, and the
// promise would otherwise idle the slot for the rest of WakeTTL.
func (c *Controller) Rebalance(ctx context.Context) {
	every(ctx, RebalanceEvery, func() {
		c.releaseFetched(ctx)
		type lineFree struct {
			host string
			free int
		}
		var lines []lineFree
		c.mu.Lock()
		now := c.now()
		for name, h := range c.hosts {
			if h.lineSeen.IsZero() || now.Sub(h.lineSeen) > LineMemory {
				continue
			}
			if free := h.freeSlots(c.FairCap(), now); free > 0 {
				lines = append(lines, lineFree{name, free})
			}
		}
		c.mu.Unlock()
		for _, l := range lines {
			c.promote(ctx, l.host, "", l.free)
		}
	})
}

// releaseFetched drops the promises of woken requests whose tasks are no
// longer waiting to be fetched. A request fetched here is already counted
// in flight (Admit drops its promise); one fetched elsewhere leaves this
// worker's slot free. A promise younger than half a RebalanceEvery is
// left alone: its wake-up may not have made the task runnable yet.
func (c *Controller) releaseFetched(ctx context.Context) {
	type promise struct{ host, id string }
	var check []promise
	c.mu.Lock()
	now := c.now()
	for name, h := range c.hosts {
		for id, at := range h.woken {
			if now.Sub(at) >= RebalanceEvery/2 {
				check = append(check, promise{name, id})
			}
		}
	}
	c.mu.Unlock()
	for _, p := range check {
		if waiting, err := c.waker.Waiting(ctx, p.id); err != nil || waiting {
			continue // unknown: WakeTTL ends the promise
		}
		c.mu.Lock()
		if h := c.hosts[p.host]; h != nil {
			delete(h.woken, p.id)
		}
		c.mu.Unlock()
	}
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// key is one flow-control key's state on this worker.
type key struct {
	spec     Request // the last request seen: its configured limits
	inflight int
	parked   int // parks since the last snapshot
	lim      *rate.Limiter
	base     float64 // the rate (per second) before the first cut
	lastCut  time.Time
	// starts in the current and the previous second, for the observed
	// rate a first cut starts from.
	startSec         int64
	starts, prevSecs int
	// outcomes of the current second (sec) and the one before: the share
	// of overloaded answers decides cuts and increases
	sec                  int64
	secOK, secOver       int
	lastSecOK, lastSecOv int
	// recent outcomes, for the failure share
	ok, overloaded   int
	windowStart      time.Time
	prevOK, prevOver int
	lastUsed         time.Time
}

// New returns a worker's controller.
func New(cfg Config, rdb redis.UniversalClient, waker Waker, log *slog.Logger, now func() time.Time) *Controller {
	if cfg.FairShare <= 0 {
		cfg.FairShare = 0.5
	}
	if cfg.MinRate <= 0 {
		cfg.MinRate = 1
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Controller{cfg: cfg, rdb: rdb, waker: waker, log: log, now: now,
		hosts: map[string]*host{}, keys: map[string]*key{}, booked: map[string]time.Time{}, stop: stop, cancel: cancel}
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
	c      *Controller
	req    Request
	global bool // holds a parallelism slot in Redis
}

// Parked is the answer to a request that must wait: its task sleeps until
// Until unless woken earlier.
type Parked struct{ Until time.Time }

func (p *Parked) Error() string { return "waiting for a flow-control slot" }

// keyNames are the Redis keys of a flow-control key's parallelism.
func keyNames(k string) (slots, wait string) {
	tag := keyTag(k)
	return tag + ":slots", tag + ":wait"
}

// turnNames are the Redis keys of a flow-control key's rate turns.
func turnNames(k string) (next, given string) {
	tag := keyTag(k)
	return tag + ":turn", tag + ":turns"
}

func keyTag(k string) string {
	sum := sha1.Sum([]byte(k))
	return "{retryd-flow:" + hex.EncodeToString(sum[:8]) + "}"
}

// Turn spacing: turns are spaced three percent wider than the rate asks
// (the destination sees starts a little after they are granted, unevenly,
// and must never count more than Rate in a period), and a turn may be
// taken up to that margin late without bunching starts past the rate.
const turnMargin = 3 // percent of the period

// turn gives req its rate turn: ok when it may start now, else until when
// its task sleeps (its own turn, kept for it).
func (c *Controller) turn(ctx context.Context, req Request, now time.Time) (time.Time, bool, error) {
	period := req.Period
	if period <= 0 {
		period = time.Second
	}
	interval := (period + period*turnMargin/100) / time.Duration(req.Rate)
	grace := period * turnMargin / 100
	next, given := turnNames(req.Key)
	res, err := turnScript.Run(ctx, c.rdb, []string{next, given}, req.ID, now.UnixMicro(), max(interval.Microseconds(), 1),
		grace.Microseconds(), KeyTTL.Milliseconds()).StringSlice()
	if err != nil {
		return time.Time{}, false, err
	}
	if len(res) != 2 {
		return time.Time{}, false, fmt.Errorf("turn script: unexpected reply %v", res)
	}
	at, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil || (res[0] != "0" && res[0] != "1") {
		return time.Time{}, false, fmt.Errorf("turn script: unexpected reply %v", res)
	}
	return time.UnixMicro(at), res[0] == "1", nil
}

// Admit runs the checks: a Ticket when the attempt may start now, or a
// *Parked error saying until when its task sleeps.
func (c *Controller) Admit(ctx context.Context, req Request) (*Ticket, error) {
	now := c.now()
	c.mu.Lock()
	k := c.keyOf(req, now)
	if c.cfg.Adaptive && k.lim != nil {
		if until, ok := c.adaptiveWait(k, req.ID, now); !ok {
			k.parked++
			c.mu.Unlock()
			c.wakeAt(req.ID, until)
			return nil, &Parked{Until: until}
		}
	}
	c.mu.Unlock()
	if req.Rate > 0 {
		// The rate first: a request whose turn is later sleeps until its
		// own turn without taking part in fairness meanwhile (a backlog
		// behind a rate would otherwise churn through the fairness line).
		until, ok, err := c.turn(ctx, req, now)
		if err != nil {
			return nil, err
		}
		if !ok {
			c.parkedOne(req.Key)
			c.wakeAt(req.ID, until)
			return nil, &Parked{Until: until}
		}
	}
	c.mu.Lock()
	h := c.hosts[req.HostPort]
	if h == nil {
		h = &host{}
		c.hosts[req.HostPort] = h
	}
	delete(h.woken, req.ID) // back (here) from a wake-up
	if h.inflight >= c.FairCap() {
		h.lineSeen = now
		k.parked++
		c.mu.Unlock()
		if err := c.waitInLine(ctx, req.HostPort, req.ID, now); err != nil {
			return nil, err
		}
		return nil, &Parked{Until: now.Add(ParkFallback)}
	}
	h.inflight++
	k.inflight++
	c.mu.Unlock()

	t := &Ticket{c: c, req: req}
	if req.Parallelism > 0 {
		slots, wait := keyNames(req.Key)
		res, err := acquireScript.Run(ctx, c.rdb, []string{slots, wait}, req.ID, req.Parallelism, now.UnixMilli(),
			now.Add(req.Timeout+LeaseMargin).UnixMilli(), KeyTTL.Milliseconds()).Int64Slice()
		if err != nil {
			t.undo()
			return nil, err
		}
		if res[0] != 1 {
			t.undo()
			c.parkedOne(req.Key)
			until := now.Add(ParkFallback)
			if len(res) > 1 {
				// A lease that ends frees its slot without a release: a
				// worker died holding it. Look again then.
				if end := time.UnixMilli(res[1]).Add(10 * time.Millisecond); end.Before(until) {
					until = end
				}
			}
			return nil, &Parked{Until: until}
		}
		t.global = true
	}
	c.mu.Lock()
	k.countStart(now)
	c.mu.Unlock()
	return t, nil
}

func (c *Controller) parkedOne(name string) {
	c.mu.Lock()
	if k := c.keys[name]; k != nil {
		k.parked++
	}
	c.mu.Unlock()
}

// keyOf returns key state, remembering req's limits. c.mu is held.
func (c *Controller) keyOf(req Request, now time.Time) *key {
	k := c.keys[req.Key]
	if k == nil {
		k = &key{windowStart: now}
		c.keys[req.Key] = k
	}
	k.spec, k.lastUsed = req, now
	return k
}

// adaptiveWait books the request's turn on the key's effective rate: ok
// when it may start now, else until when its task sleeps. c.mu is held.
func (c *Controller) adaptiveWait(k *key, id string, now time.Time) (time.Time, bool) {
	if at, ok := c.booked[id]; ok {
		delete(c.booked, id)
		if !now.Before(at.Add(-50 * time.Millisecond)) {
			return time.Time{}, true // its booked turn
		}
	}
	r := k.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	switch {
	case d <= 0:
		return time.Time{}, true
	case d <= RateHorizon:
		c.booked[id] = now.Add(d)
		return now.Add(d), false
	}
	r.CancelAt(now)
	return now.Add(RateHorizon + time.Duration(rand.Int64N(int64(RateHorizon)))), false
}

// undo gives back the worker-local share of an attempt that did not start.
func (t *Ticket) undo() {
	c := t.c
	c.mu.Lock()
	if h := c.hosts[t.req.HostPort]; h != nil {
		h.inflight--
	}
	if k := c.keys[t.req.Key]; k != nil {
		k.inflight--
	}
	c.mu.Unlock()
}

// Done gives back what the attempt held, wakes whoever waits for it, and
// teaches adaptive backpressure what the attempt said about its key.
func (t *Ticket) Done(ctx context.Context, o Outcome) {
	c, now := t.c, t.c.now()
	c.mu.Lock()
	free, line := 0, false
	if h := c.hosts[t.req.HostPort]; h != nil {
		h.inflight--
		free = h.freeSlots(c.FairCap(), now)
		line = !h.lineSeen.IsZero()
	}
	k := c.keys[t.req.Key]
	if k != nil {
		k.inflight--
		k.learn(c, o, now)
	}
	c.mu.Unlock()
	if line {
		// The slot goes to the destination's longest waiter, whichever
		// worker parked it; one round trip, which also forgets this
		// request's place. Without a line (as far as this worker knows:
		// Rebalance looks at those it saw) an attempt costs nothing here.
		c.promote(ctx, t.req.HostPort, t.req.ID, free)
	}
	if t.global {
		c.release(ctx, t.req, t.req.ID)
	}
}

// release gives back id's parallelism slot and wakes the request it is
// handed to (and the next, when that one is gone).
func (c *Controller) release(ctx context.Context, req Request, id string) {
	slots, wait := keyNames(req.Key)
	for range 100 {
		now := c.now()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		next, err := releaseScript.Run(ctx, c.rdb, []string{slots, wait}, id, req.Parallelism, now.UnixMilli(),
			now.Add(HandOverLease).UnixMilli()).Text()
		cancel()
		if errors.Is(err, redis.Nil) {
			return
		}
		if err != nil {
			// The lease ends the slot anyway; waiters look again then.
			c.log.Warn("could not give back a flow-control slot; its lease will", "key", req.Key, "requestId", id, "err", err)
			return
		}
		switch c.wake(ctx, next) {
		case woken:
			return
		case stalled:
			// Redis or asynq trouble: the handed-over slot's lease
			// (HandOverLease) gives it back.
			return
		}
		id = next // gone: give its handed-over slot on
	}
}

// wakeLocal wakes the request parked for a fairness slot of hostPort (or
// the next one in line, when it is gone), in the background.
func (c *Controller) wakeLocal(hostPort, id string) {
	c.wakes.Add(1)
	go func() {
		defer c.wakes.Done()
		for id != "" && c.stop.Err() == nil {
			res := c.wake(c.stop, id)
			if res == woken {
				return
			}
			if res == stalled {
				// Not wakeable now (on its way, or asynq trouble): back to
				// its place in line, or it would wait for its fallback
				// deadline out of every line.
				if err := c.waitInLine(c.stop, hostPort, id, c.now()); err != nil {
					c.log.Warn("could not put a waiter back in line; its deadline will wake it", "requestId", id, "err", err)
				}
			}
			// Its promised slot goes to the next in line.
			c.mu.Lock()
			free := 0
			if h := c.hosts[hostPort]; h != nil {
				delete(h.woken, id)
				free = min(1, h.freeSlots(c.FairCap(), c.now()))
			}
			c.mu.Unlock()
			id = ""
			if free == 0 {
				return
			}
			next, left, err := c.nextInLine(c.stop, hostPort, "", 1)
			if err != nil || len(next) == 0 {
				return
			}
			c.mu.Lock()
			if h := c.hosts[hostPort]; h != nil {
				h.promise(next, c.now())
				if left == 0 {
					h.lineSeen = time.Time{}
				}
			}
			c.mu.Unlock()
			id = next[0]
		}
	}()
}

// wakeResult is what came of a wake-up.
type wakeResult int

const (
	woken   wakeResult = iota
	gone               // no parked task any more
	stalled            // could not be woken now; its fallback deadline will
)

// wake makes id's task runnable, waiting up to a second for a task still
// on its way to being parked.
func (c *Controller) wake(ctx context.Context, id string) wakeResult {
	for i := 0; ; i++ {
		err := c.waker.Wake(ctx, id)
		switch {
		case err == nil:
			return woken
		case errors.Is(err, ErrGone):
			return gone
		case i >= 50 || ctx.Err() != nil:
			c.log.Warn("could not wake a parked request; its deadline will", "requestId", id, "err", err)
			return stalled
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wakeAt wakes id at a timed park's end, to the millisecond: asynq keeps
// due times in whole seconds, so its own deadline is only the fallback.
// The timer holds no worker slot.
func (c *Controller) wakeAt(id string, at time.Time) {
	c.wakes.Add(1)
	time.AfterFunc(at.Sub(c.now()), func() {
		defer c.wakes.Done()
		if c.stop.Err() == nil {
			_ = c.wake(c.stop, id)
		}
	})
}

// Close stops waking parked requests (their deadlines still wake them)
// and waits for the wake-ups in flight.
func (c *Controller) Close() {
	c.cancel()
	c.wakes.Wait()
}

// countStart counts an attempt start for the observed rate. c.mu is held.
func (k *key) countStart(now time.Time) {
	sec := now.Unix()
	switch {
	case sec == k.startSec:
	case sec == k.startSec+1:
		k.prevSecs, k.starts = k.starts, 0
	default:
		k.prevSecs, k.starts = 0, 0
	}
	k.startSec = sec
	k.starts++
}

// observedRate is the key's recent starts per second on this worker.
func (k *key) observedRate(now time.Time) float64 {
	if now.Unix() > k.startSec+1 {
		return 0
	}
	if now.Unix() == k.startSec+1 {
		return float64(k.starts)
	}
	return float64(max(k.starts, k.prevSecs))
}

// learn is AIMD on the key's effective rate. c.mu is held.
func (k *key) learn(c *Controller, o Outcome, now time.Time) {
	if now.Sub(k.windowStart) >= time.Minute {
		k.prevOK, k.prevOver, k.ok, k.overloaded, k.windowStart = k.ok, k.overloaded, 0, 0, now
	}
	switch sec := now.Unix(); {
	case sec == k.sec:
	case sec == k.sec+1:
		k.lastSecOK, k.lastSecOv, k.secOK, k.secOver, k.sec = k.secOK, k.secOver, 0, 0, sec
	default:
		k.lastSecOK, k.lastSecOv, k.secOK, k.secOver, k.sec = 0, 0, 0, 0, sec
	}
	switch o {
	case Succeeded:
		k.ok++
		k.secOK++
	case Overloaded:
		k.overloaded++
		k.secOver++
	default:
		return
	}
	over, all := k.secOver+k.lastSecOv, k.secOK+k.secOver+k.lastSecOK+k.lastSecOv
	overloaded := float64(over) >= CutShare*float64(all)
	switch {
	case o == Succeeded && k.lim != nil && !overloaded:
		// Additive increase, while most answers are good.
		cur := float64(k.lim.Limit())
		next := cur + max(1, k.base*RecoverShare)/max(cur, 1)
		if next >= k.base {
			k.lim = nil // recovered: no limit again
			return
		}
		k.lim.SetLimitAt(now, rate.Limit(next))
	case o == Overloaded && c.cfg.Adaptive && overloaded && now.Sub(k.lastCut) >= CutEvery:
		// Only a key under load is cut: a few requests failing (and
		// retrying on their own backoff) are not a destination to ease
		// off, and their retries must keep their timing. A limited key is
		// cut again on a few samples.
		if (k.lim == nil && over < MinOverloads) || (k.lim != nil && all < 3) {
			return
		}
		k.lastCut = now
		cur := k.observedRate(now)
		if k.lim != nil {
			cur = float64(k.lim.Limit())
		} else {
			k.base = max(cur, c.cfg.MinRate*2)
		}
		next := max(c.cfg.MinRate, cur*CutFactor)
		if k.lim == nil {
			k.lim = rate.NewLimiter(rate.Limit(next), 1)
			k.lim.ReserveN(now, 1) // the attempt that was just overloaded used this turn
			return
		}
		k.lim.SetLimitAt(now, rate.Limit(next))
	}
}
