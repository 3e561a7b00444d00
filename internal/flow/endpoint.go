package flow

// The endpoint gate: a circuit breaker per endpoint (scheme://host:port)
// of each tenant, so that one tenant's failures never hold another's
// deliveries to the same host. An endpoint is closed (healthy), open
// (failing: no attempt but a probe) or half_open (its probe is out).
//
// Closed, the gate costs no Redis command per attempt: a worker counts
// the outcomes of its own attempts in memory (Ticket.Done), and learns
// which endpoints are not closed by reading their index once per
// BreakerRead for all of them. Open, a request runs the endpoint's script
// once: it goes as the probe when one is due, or waits in the endpoint's
// line (the line library), holding nothing, until a probe that succeeds
// wakes the line in order. Only the first waiter has a timer, at the next
// probe; the others sleep on a long safety net.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/record"
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
	// FailAfter ends the waiters of an endpoint open this long as failed
	// (BREAKER_FAIL_AFTER); zero: never.
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
	EndpointClosed   = "closed"
	EndpointOpen     = "open"
	EndpointHalfOpen = "half_open"
)

// ErrEndpointDown is the endpoint gate's answer for a request whose
// endpoint has been open longer than BreakerConfig.FailAfter: it ends as
// failed (failureClass endpoint_down).
var ErrEndpointDown = errors.New("the endpoint has been open too long")

// windowBuckets are the parts of a window an endpoint's outcomes are
// counted in: the window slides by one part at a time.
const windowBuckets = 10

// MaxEndpoints bounds the endpoints whose outcomes a worker counts.
const MaxEndpoints = 10000

// endpoints are the breakers as this worker knows them. c.mu guards them.
type endpoints struct {
	byName map[string]*endpoint
	// open are the endpoints not closed, as last read (at read).
	open map[string]bool
	read time.Time
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

var (
	epOpenScript   = script("ep_open")
	epEnterScript  = script("ep_enter")
	epProbedScript = script("ep_probed")
	epTakeScript   = script("ep_take")
	epCloseScript  = script("ep_close")
)

// enterEndpoint is the endpoint gate: a request to an endpoint that is
// not closed goes as its probe, or waits in its line for a probe that
// succeeds (record.WaitingEndpointOpen).
func (c *Controller) enterEndpoint(ctx context.Context, t *Ticket) error {
	if c.cfg.Breaker.Off || t.req.Endpoint == "" {
		return nil
	}
	t.endpoint = EndpointName(t.req.Tenant, t.req.Endpoint)
	if !c.endpointNotClosed(ctx, t.endpoint, t.start) {
		return nil
	}
	br := c.cfg.Breaker.withDefaults()
	state, line, keys := record.FlowEndpointKeys(t.endpoint)
	lease := t.req.Timeout + c.tune.LeaseMargin
	parKey := ""
	if t.req.Parallelism > 0 {
		parKey = t.req.Key
	}
	res, err := epEnterScript.Run(ctx, c.rdb, []string{state, line, keys}, t.req.ID, t.start.UnixMilli(),
		c.tune.KeyTTL.Milliseconds(), lease.Milliseconds(), parPlace(t.req, t.start).UnixMilli(), parKey).Int64Slice()
	if err != nil {
		return fmt.Errorf("endpoint gate of %s: %w", t.req.ID, err)
	}
	switch {
	case len(res) >= 1 && res[0] == 0:
		c.mu.Lock()
		delete(c.endpoints.open, t.endpoint)
		c.mu.Unlock()
		if len(res) == 2 {
			// Its state expired, unused: the list forgets it too (an
			// endpoint opened meanwhile is listed again by its next
			// failure).
			if err := c.rdb.HDel(ctx, record.FlowEndpointsKey, t.endpoint).Err(); err != nil {
				c.log.Warn("could not unlist an endpoint whose state expired", "endpoint", t.endpoint, "err", err)
			}
		}
		return nil
	case len(res) == 1 && res[0] == 2:
		t.probe = true
		return nil
	case len(res) == 4 && res[0] == 1:
	default:
		return fmt.Errorf("endpoint gate of %s: unexpected reply %v", t.req.ID, res)
	}
	var nextProbe time.Time // zero: an operator's, never probed
	if res[1] > 0 {
		nextProbe = time.UnixMilli(res[1])
	}
	since := time.UnixMilli(res[2])
	until := t.start.Add(max(nextProbe.Sub(t.start), 0) + max(c.tune.ParkFallback, 2*br.ProbeMax))
	if br.FailAfter > 0 {
		failAt := since.Add(br.FailAfter)
		if !t.start.Before(failAt) {
			c.leaveEndpointLine(ctx, t.endpoint, t.req.ID)
			return fmt.Errorf("%w: %s open since %s", ErrEndpointDown, t.req.Endpoint, since.UTC().Format(time.RFC3339))
		}
		if failAt.Before(until) {
			until = failAt
		}
	}
	if res[3] == 1 && !nextProbe.IsZero() {
		// The first in line is woken for the next probe; the others
		// follow it once one succeeds.
		c.wakeAt(ctx, t.req.ID, nextProbe)
	}
	return &Parked{Until: until, Reason: record.WaitingEndpointOpen, Starts: nextProbe}
}

var epLeaveScript = script("ep_leave")

// leaveEndpointLine takes id out of endpoint name's line.
func (c *Controller) leaveEndpointLine(ctx context.Context, name, id string) {
	_, line, keys := record.FlowEndpointKeys(name)
	if err := epLeaveScript.Run(ctx, c.rdb, []string{line, keys}, id).Err(); err != nil && !errors.Is(err, redis.Nil) {
		c.log.Warn("could not take a request out of its endpoint's line", "requestId", id, "err", err)
	}
}

// endpointNotClosed says whether endpoint name is open or half open as far
// as this worker knows (read at most BreakerRead ago, for all endpoints at
// once).
func (c *Controller) endpointNotClosed(ctx context.Context, name string, now time.Time) bool {
	c.mu.Lock()
	fresh := now.Sub(c.endpoints.read) < c.tune.BreakerRead
	open := c.endpoints.open[name]
	c.mu.Unlock()
	if fresh {
		return open
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h, err := c.rdb.HGetAll(rctx, record.FlowEndpointsKey).Result()
	if err != nil {
		c.log.Warn("could not read which endpoints are open; the last read holds", "err", err)
		return open
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endpoints.read = now
	clear(c.endpoints.open)
	for n := range h {
		c.endpoints.open[n] = true
		if ep := c.endpoints.byName[n]; ep != nil {
			// Opened elsewhere: the failures counted here decided it
			// already, and must not open it again once it closes.
			ep.reset()
		}
	}
	return c.endpoints.open[name]
}

// exitEndpoint learns what an attempt said of its endpoint: a probe's
// answer closes the endpoint or opens it again; another attempt is
// counted, and opens the endpoint when the window's failures say so.
func (c *Controller) exitEndpoint(ctx context.Context, t *Ticket, e ending) {
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
		c.probed(ctx, t, verdict, e.at)
		return
	}
	if !e.started {
		return
	}
	br := c.cfg.Breaker.withDefaults()
	c.mu.Lock()
	ep := c.endpoints.byName[t.endpoint]
	if ep == nil {
		if len(c.endpoints.byName) >= MaxEndpoints {
			for n, old := range c.endpoints.byName {
				if e.at.Sub(old.lastUsed) > br.Window {
					delete(c.endpoints.byName, n)
				}
			}
		}
		ep = &endpoint{}
		c.endpoints.byName[t.endpoint] = ep
	}
	ep.lastUsed = e.at
	attempts, failures := ep.count(failed, e.at, br.Window)
	trip := failed && !c.endpoints.open[t.endpoint] && attempts >= br.MinAttempts &&
		float64(failures) >= br.FailureRatio*float64(attempts)
	if trip {
		ep.reset()
		c.endpoints.open[t.endpoint] = true
	}
	c.mu.Unlock()
	if trip {
		ratio := float64(failures) / float64(attempts)
		opened, err := OpenEndpoint(ctx, c.rdb, t.endpoint, ratio, "breaker", e.at, c.tune)
		if err != nil {
			c.log.Warn("could not open a failing endpoint", "endpoint", t.endpoint, "err", err)
			return
		}
		c.log.Info("endpoint opened: its attempts fail", "endpoint", t.endpoint, "attempts", attempts, "failures", failures)
		if opened {
			c.changed(t.endpoint, true, ratio, attempts)
		}
	}
}

// probed tells Redis how t's probe ended, and wakes whom that concerns:
// the whole line when it closed the endpoint, its first waiter at the
// next probe when not.
func (c *Controller) probed(ctx context.Context, t *Ticket, verdict string, now time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	state, line, _ := record.FlowEndpointKeys(t.endpoint)
	res, err := epProbedScript.Run(ctx, c.rdb, []string{state, line}, t.req.ID, now.UnixMilli(), verdict,
		c.cfg.Breaker.withDefaults().ProbeMax.Milliseconds()).Slice()
	if err != nil || len(res) == 0 {
		c.log.Warn("could not tell an endpoint how its probe ended; the probe's lease ends it", "endpoint", t.endpoint, "err", err)
		return
	}
	code, _ := res[0].(int64)
	switch {
	case code == 1:
		c.log.Info("endpoint closed: its probe succeeded", "endpoint", t.endpoint)
		c.changed(t.endpoint, false, 0, 0)
		if err := c.rdb.HDel(ctx, record.FlowEndpointsKey, t.endpoint).Err(); err != nil {
			c.log.Warn("could not unlist a closed endpoint", "endpoint", t.endpoint, "err", err)
		}
		c.mu.Lock()
		delete(c.endpoints.open, t.endpoint)
		c.mu.Unlock()
		c.wakes.Add(1)
		go func() {
			defer c.wakes.Done()
			if err := wakeEndpointLine(c.stop, c.rdb, c.waker, t.endpoint, c.tune.KeyTTL); err != nil {
				c.log.Warn("could not wake a closed endpoint's waiters; their safety nets do", "endpoint", t.endpoint, "err", err)
			}
		}()
	case code == 0 && len(res) == 3:
		next, _ := res[1].(int64)
		if head, _ := res[2].(string); head != "" {
			c.wakeAt(ctx, head, time.UnixMilli(next))
		}
	}
}

// wakeEndpointLine wakes the waiters of closed endpoint name, in line
// order, until its line is empty or it opened again. Those with
// parallelism first get back their places in their keys' lines (ttl: the
// lines' time to live), so that their slots go in arrival order however
// the woken race to them.
func wakeEndpointLine(ctx context.Context, rdb redis.UniversalClient, waker Waker, name string, ttl time.Duration) error {
	state, line, keys := record.FlowEndpointKeys(name)
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		taken, err := epTakeScript.Run(tctx, rdb, []string{state, line, keys}, resumeBatch).StringSlice()
		if err == nil && len(taken)%3 != 0 {
			err = fmt.Errorf("endpoint take script: unexpected reply %v", taken)
		}
		if err == nil {
			err = keepParPlaces(tctx, rdb, taken, ttl)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("take the waiters of %s: %w", name, err)
		}
		for i := 0; i < len(taken); i += 3 {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			// A waiter Redis could not wake has its safety net.
			_ = waker.Wake(wctx, taken[i])
			cancel()
		}
		if len(taken) < 3*resumeBatch {
			return nil
		}
	}
}

var parKeepScript = script("par_keep")

// keepParPlaces puts the waiters of taken ({id, place, key or "", ...},
// from ep_take.lua) back at their places in their keys' parallelism
// lines, one round trip a key.
func keepParPlaces(ctx context.Context, rdb redis.UniversalClient, taken []string, ttl time.Duration) error {
	byKey := map[string][]any{}
	var order []string
	for i := 0; i < len(taken); i += 3 {
		id, place, key := taken[i], taken[i+1], taken[i+2]
		if key == "" {
			continue
		}
		if byKey[key] == nil {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], id, place)
	}
	for _, key := range order {
		_, wait := keyNames(key)
		args := append([]any{ttl.Milliseconds()}, byKey[key]...)
		if err := parKeepScript.Run(ctx, rdb, []string{wait}, args...).Err(); err != nil {
			return fmt.Errorf("keep places in %s's parallelism line: %w", key, err)
		}
	}
	return nil
}

var epCancelScript = script("ep_cancel")

// EndpointCanceled takes canceled request id out of its endpoint's line
// (endpoint of tenant t); when it was the waiter to be woken for the next
// probe, the next waiter is, in its place.
func EndpointCanceled(ctx context.Context, rdb redis.UniversalClient, waker Waker, t, endpoint, id string) error {
	if endpoint == "" {
		return nil
	}
	state, line, keys := record.FlowEndpointKeys(EndpointName(t, endpoint))
	res, err := epCancelScript.Run(ctx, rdb, []string{state, line, keys}, id).StringSlice()
	if err != nil {
		return fmt.Errorf("take %s out of its endpoint's line: %w", id, err)
	}
	if len(res) != 2 {
		return nil
	}
	at, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return fmt.Errorf("endpoint cancel script: unexpected reply %v", res)
	}
	if err := waker.WakeAt(ctx, res[0], time.UnixMilli(at)); err != nil {
		return fmt.Errorf("wake %s for the next probe: %w", res[0], err)
	}
	return nil
}

// EndpointChange is a change of an endpoint's state the breaker made.
type EndpointChange struct {
	Tenant, Endpoint string // whose, and scheme://host:port
	Open             bool   // opened; else closed
	// FailureRatio and Attempts are the window's that opened it.
	FailureRatio float64
	Attempts     int
}

// changed tells Config.OnEndpoint of a change of endpoint name.
func (c *Controller) changed(name string, open bool, ratio float64, attempts int) {
	if c.cfg.OnEndpoint == nil {
		return
	}
	t, endpoint := tenant.Split(name)
	c.cfg.OnEndpoint(EndpointChange{Tenant: t, Endpoint: endpoint, Open: open, FailureRatio: ratio, Attempts: attempts})
}

// OpenEndpoint opens endpoint name (tenant-qualified scheme://host:port)
// unless it is open already: the breaker's decision (by "breaker"), or an
// operator's ("operator"). opened says it did.
func OpenEndpoint(ctx context.Context, rdb redis.UniversalClient, name string, ratio float64, by string, now time.Time, tune Tuning) (bool, error) {
	tune = tune.withDefaults()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	state, _, _ := record.FlowEndpointKeys(name)
	n, err := epOpenScript.Run(ctx, rdb, []string{state}, now.UnixMilli(), tune.BreakerProbe.Milliseconds(),
		strconv.FormatFloat(ratio, 'f', 3, 64), tune.KeyTTL.Milliseconds(), by).Int()
	if err != nil {
		return false, fmt.Errorf("open endpoint %s: %w", name, err)
	}
	// Listed even when it was open already: a list that failed is
	// mended.
	if err := rdb.HSet(ctx, record.FlowEndpointsKey, name, "1").Err(); err != nil {
		return n == 1, fmt.Errorf("list open endpoint %s: %w", name, err)
	}
	return n == 1, nil
}

// CloseEndpoint closes endpoint name (an operator's decision) and wakes
// its waiters in line order. closed says it was not closed before.
func CloseEndpoint(ctx context.Context, rdb redis.UniversalClient, waker Waker, name string, now time.Time, tune Tuning) (bool, error) {
	tune = tune.withDefaults()
	state, _, _ := record.FlowEndpointKeys(name)
	n, err := epCloseScript.Run(ctx, rdb, []string{state}, now.UnixMilli(), tune.KeyTTL.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("close endpoint %s: %w", name, err)
	}
	if err := rdb.HDel(ctx, record.FlowEndpointsKey, name).Err(); err != nil {
		return n == 1, fmt.Errorf("unlist endpoint %s: %w", name, err)
	}
	return n == 1, wakeEndpointLine(ctx, rdb, waker, name, tune.KeyTTL)
}

// usage is what a worker publishes of an endpoint used in the window.
type usage struct {
	Attempts int `json:"attempts"`
	Failed   int `json:"failed"`
}

// usedEndpoints are this worker's endpoints with attempts in the window,
// forgetting those idle longer.
func (c *Controller) usedEndpoints(now time.Time) map[string]usage {
	window := c.cfg.Breaker.withDefaults().Window
	part := max(window/windowBuckets, time.Millisecond)
	at := now.UnixNano() / int64(part)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]usage{}
	for name, ep := range c.endpoints.byName {
		var u usage
		for _, b := range ep.buckets {
			if b.at > at-windowBuckets {
				u.Attempts += b.attempts
				u.Failed += b.failed
			}
		}
		if u.Attempts > 0 {
			out[name] = u
		} else if now.Sub(ep.lastUsed) > window {
			delete(c.endpoints.byName, name)
		}
	}
	return out
}

// PublishEndpoints writes this worker's endpoints used in the window for
// GET /endpoints every PublishEvery until ctx ends; a worker that used
// none writes once that it has none, then nothing.
func (c *Controller) PublishEndpoints(ctx context.Context, worker string) {
	if c.cfg.Breaker.Off {
		return
	}
	shown := true // whether Redis may hold endpoints of this worker
	clock.Every(ctx, c.clk, c.tune.PublishEvery, func() { shown = c.publishEndpoints(ctx, worker, shown) })
}

// publishEndpoints is one of PublishEndpoints' writes (shown: Redis may
// hold endpoints of this worker), and says whether Redis holds some now.
// An endpoint that fails on this worker, with too few attempts here to
// decide, is then judged on every worker's attempts.
func (c *Controller) publishEndpoints(ctx context.Context, worker string, shown bool) bool {
	now := c.now()
	used := c.usedEndpoints(now)
	if len(used) == 0 && !shown {
		return false
	}
	fields := make([]any, 0, 2*len(used))
	for name, u := range used {
		b, _ := json.Marshal(u)
		fields = append(fields, name, string(b))
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	key := record.FlowWorkerEndpointsKey(worker)
	pipe := c.rdb.TxPipeline()
	pipe.Del(wctx, key)
	if len(fields) > 0 {
		pipe.HSet(wctx, key, fields...)
		pipe.PExpire(wctx, key, c.tune.StaleAfter)
	}
	if _, err := pipe.Exec(wctx); err != nil {
		c.log.Debug("could not publish the endpoints used", "err", err)
		return shown
	}
	c.judgeTogether(wctx, used, now)
	return len(used) > 0
}

// judgeTogether opens the endpoints whose attempts on every worker,
// summed, say so, among those this worker used that fail here but had too
// few attempts here to decide. Healthy endpoints cost nothing: the other
// workers' counts are read only for such a one.
func (c *Controller) judgeTogether(ctx context.Context, used map[string]usage, now time.Time) {
	br := c.cfg.Breaker.withDefaults()
	c.mu.Lock()
	var doubtful []string
	for name, u := range used {
		if !c.endpoints.open[name] && u.Failed > 0 && u.Attempts < br.MinAttempts &&
			float64(u.Failed) >= br.FailureRatio*float64(u.Attempts) {
			doubtful = append(doubtful, name)
		}
	}
	c.mu.Unlock()
	if len(doubtful) == 0 {
		return
	}
	all, err := usedByAll(ctx, c.rdb, now)
	if err != nil {
		c.log.Debug("could not read the endpoints every worker used", "err", err)
		return
	}
	for _, name := range doubtful {
		u := all[name]
		if u.Attempts < br.MinAttempts || float64(u.Failed) < br.FailureRatio*float64(u.Attempts) {
			continue
		}
		c.mu.Lock()
		c.endpoints.open[name] = true
		if ep := c.endpoints.byName[name]; ep != nil {
			ep.reset()
		}
		c.mu.Unlock()
		ratio := float64(u.Failed) / float64(u.Attempts)
		opened, err := OpenEndpoint(ctx, c.rdb, name, ratio, "breaker", now, c.tune)
		if err != nil {
			c.log.Warn("could not open a failing endpoint", "endpoint", name, "err", err)
			continue
		}
		c.log.Info("endpoint opened: its attempts fail on every worker", "endpoint", name, "attempts", u.Attempts, "failures", u.Failed)
		if opened {
			c.changed(name, true, ratio, u.Attempts)
		}
	}
}

// usedByAll sums what the live workers published of the endpoints they
// used in the window.
func usedByAll(ctx context.Context, rdb redis.UniversalClient, now time.Time) (map[string]usage, error) {
	workers, err := rdb.ZRangeByScore(ctx, record.FlowWorkersKey, &redis.ZRangeBy{
		Min: strconv.FormatInt(now.Add(-DefaultTuning.StaleAfter).UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("list the live workers: %w", err)
	}
	used := map[string]usage{}
	for _, w := range workers {
		h, err := rdb.HGetAll(ctx, record.FlowWorkerEndpointsKey(w)).Result()
		if err != nil {
			return nil, fmt.Errorf("read the endpoints worker %s used: %w", w, err)
		}
		for name, v := range h {
			var u usage
			if json.Unmarshal([]byte(v), &u) != nil {
				continue
			}
			sum := used[name]
			sum.Attempts += u.Attempts
			sum.Failed += u.Failed
			used[name] = sum
		}
	}
	return used, nil
}

// EndpointInfo is an endpoint's breaker as GET /endpoints shows it.
type EndpointInfo struct {
	// Name is the tenant-qualified scheme://host:port.
	Name  string
	State string
	// Since is when it took its state; NextProbe when it is next probed
	// (zero unless open).
	Since, NextProbe time.Time
	// FailureRatio is the share of failed attempts that opened it.
	FailureRatio float64
	// Waiting are the requests waiting for it to close.
	Waiting int64
	// By is who opened it: "breaker" or "operator".
	By string
}

// Endpoints reads the breakers of the endpoints that are not closed or
// were used in the window (as the live workers published them), sorted by
// name. A closed endpoint's FailureRatio is its window's, summed over the
// workers.
func Endpoints(ctx context.Context, rdb redis.UniversalClient, now time.Time) ([]EndpointInfo, error) {
	names, err := rdb.HKeys(ctx, record.FlowEndpointsKey).Result()
	if err != nil {
		return nil, fmt.Errorf("list the open endpoints: %w", err)
	}
	used, err := usedByAll(ctx, rdb, now)
	if err != nil {
		return nil, err
	}
	for name := range used {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]EndpointInfo, 0, len(names))
	for _, n := range names {
		info, err := ReadEndpoint(ctx, rdb, n)
		if err != nil {
			return nil, err
		}
		if u, ok := used[n]; ok && info.State == EndpointClosed && u.Attempts > 0 {
			info.FailureRatio = float64(u.Failed) / float64(u.Attempts)
		}
		out = append(out, info)
	}
	return out, nil
}

// HeldEndpoints reads the breakers of the endpoints that are open or half
// open only, sorted by name: what a dashboard or a metric shows every few
// seconds, whatever the number of endpoints used.
func HeldEndpoints(ctx context.Context, rdb redis.UniversalClient) ([]EndpointInfo, error) {
	names, err := rdb.HKeys(ctx, record.FlowEndpointsKey).Result()
	if err != nil {
		return nil, fmt.Errorf("list the open endpoints: %w", err)
	}
	slices.Sort(names)
	out := make([]EndpointInfo, 0, len(names))
	for _, n := range names {
		info, err := ReadEndpoint(ctx, rdb, n)
		if err != nil {
			return nil, err
		}
		if info.State != EndpointClosed {
			out = append(out, info)
		}
	}
	return out, nil
}

// ReadEndpoint reads endpoint name's breaker.
func ReadEndpoint(ctx context.Context, rdb redis.UniversalClient, name string) (EndpointInfo, error) {
	state, line, _ := record.FlowEndpointKeys(name)
	pipe := rdb.Pipeline()
	h := pipe.HGetAll(ctx, state)
	n := pipe.ZCard(ctx, line)
	if _, err := pipe.Exec(ctx); err != nil {
		return EndpointInfo{}, fmt.Errorf("read endpoint %s: %w", name, err)
	}
	v := h.Val()
	ms := func(f string) time.Time {
		i, err := strconv.ParseInt(v[f], 10, 64)
		if err != nil || i == 0 {
			return time.Time{}
		}
		return time.UnixMilli(i)
	}
	info := EndpointInfo{Name: name, State: v["state"], Since: ms("since"), Waiting: n.Val(), By: v["by"]}
	if info.State == "" {
		info.State = EndpointClosed
	}
	info.FailureRatio, _ = strconv.ParseFloat(v["ratio"], 64)
	switch info.State {
	case EndpointOpen:
		info.NextProbe = ms("nextProbe")
	case EndpointHalfOpen:
		info.NextProbe = ms("probeUntil")
	}
	return info, nil
}
