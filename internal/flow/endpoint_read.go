package flow

// What the endpoints' breakers show: the endpoints each worker used in
// the window (published for GET /endpoints and for judging an endpoint on
// every worker's attempts), and the reads of the lists.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/flow/flowdb"
)

// usage is what a worker publishes of an endpoint used in the window.
type usage struct {
	Attempts int `json:"attempts"`
	Failed   int `json:"failed"`
}

// used are this worker's endpoints with attempts in the window,
// forgetting those idle longer.
func (eg *endpointGate) used(now time.Time) map[string]usage {
	window := eg.cfg.Breaker.withDefaults().Window
	part := max(window/windowBuckets, time.Millisecond)
	at := now.UnixNano() / int64(part)
	eg.mu.Lock()
	defer eg.mu.Unlock()
	out := map[string]usage{}
	for name, ep := range eg.endpoints.byName {
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
			delete(eg.endpoints.byName, name)
		}
	}
	return out
}

// publish writes this worker's endpoints used in the window for
// GET /endpoints every PublishEvery until ctx ends; a worker that used
// none writes once that it has none, then nothing.
func (eg *endpointGate) publish(ctx context.Context, worker string) {
	if eg.cfg.Breaker.Off {
		return
	}
	shown := true // whether Redis may hold endpoints of this worker
	clock.Every(ctx, eg.clk, eg.tune.PublishEvery, func() { shown = eg.publishEndpoints(ctx, worker, shown) })
}

// publishEndpoints is one of PublishEndpoints' writes (shown: Redis may
// hold endpoints of this worker), and says whether Redis holds some now.
// An endpoint that fails on this worker, with too few attempts here to
// decide, is then judged on every worker's attempts.
func (eg *endpointGate) publishEndpoints(ctx context.Context, worker string, shown bool) bool {
	now := eg.now()
	used := eg.used(now)
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
	if err := eg.db.Stats.PublishEndpoints(wctx, worker, fields, eg.tune.StaleAfter); err != nil {
		eg.log.Debug("could not publish the endpoints used", "err", err)
		return shown
	}
	eg.judgeTogether(wctx, used, now)
	return len(used) > 0
}

// judgeTogether opens the endpoints whose attempts on every worker,
// summed, say so, among those this worker used that fail here but had too
// few attempts here to decide. Healthy endpoints cost nothing: the other
// workers' counts are read only for such a one.
func (eg *endpointGate) judgeTogether(ctx context.Context, used map[string]usage, now time.Time) {
	br := eg.cfg.Breaker.withDefaults()
	eg.mu.Lock()
	var doubtful []string
	for name, u := range used {
		if !eg.endpoints.isOpen(name) && u.Failed > 0 && u.Attempts < br.MinAttempts &&
			float64(u.Failed) >= br.FailureRatio*float64(u.Attempts) {
			doubtful = append(doubtful, name)
		}
	}
	eg.mu.Unlock()
	if len(doubtful) == 0 {
		return
	}
	all, err := usedByAll(ctx, eg.db, now)
	if err != nil {
		eg.log.Debug("could not read the endpoints every worker used", "err", err)
		return
	}
	for _, name := range doubtful {
		u := all[name]
		if u.Attempts < br.MinAttempts || float64(u.Failed) < br.FailureRatio*float64(u.Attempts) {
			continue
		}
		eg.mu.Lock()
		eg.endpoints.setState(name, true, now, eg.tune.BreakerRead)
		if ep := eg.endpoints.byName[name]; ep != nil {
			ep.reset()
		}
		eg.mu.Unlock()
		ratio := float64(u.Failed) / float64(u.Attempts)
		opened, err := openEndpoint(ctx, eg.db, name, ratio, "breaker", now, eg.tune)
		if err != nil {
			eg.log.Warn("could not open a failing endpoint", "endpoint", name, "err", err)
			continue
		}
		eg.log.Info("endpoint opened: its attempts fail on every worker", "endpoint", name, "attempts", u.Attempts, "failures", u.Failed)
		if opened {
			eg.changed(name, true, ratio, u.Attempts)
		}
	}
}

// usedByAll sums what the live workers published of the endpoints they
// used in the window.
func usedByAll(ctx context.Context, db *flowdb.DB, now time.Time) (map[string]usage, error) {
	workers, err := db.Stats.LiveWorkers(ctx, now.Add(-DefaultTuning.StaleAfter))
	if err != nil {
		return nil, fmt.Errorf("list the live workers: %w", err)
	}
	used := map[string]usage{}
	for _, w := range workers {
		h, err := db.Stats.WorkerEndpoints(ctx, w)
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
	// Since is when it took its state. NextProbe is when a waiting
	// request is next sent as its probe (open), or when the probe out
	// ends at the latest (half open); zero when none is planned: the
	// endpoint is closed, an operator opened it (never probed), or no
	// request waits (the next to come goes as the probe once the probe
	// interval has passed).
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
// name, of those keep keeps (nil: all). It reads the names of every
// tenant's endpoints that are not closed and every live worker's published
// use, then the states of those keep keeps only: a tenant's list costs
// one state read per endpoint of its own, and a name read per endpoint
// of all (bounded by ENDPOINT_LIMIT a tenant for those opened by hand).
// A closed endpoint's FailureRatio is its window's, summed over the
// workers.
func Endpoints(ctx context.Context, rdb redis.UniversalClient, now time.Time, keep func(name string) bool) ([]EndpointInfo, error) {
	db := flowdb.New(rdb)
	names, err := db.Endpoint.Listed(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the open endpoints: %w", err)
	}
	used, err := usedByAll(ctx, db, now)
	if err != nil {
		return nil, err
	}
	listed := make(map[string]bool, len(names))
	for _, n := range names {
		listed[n] = true
	}
	for name := range used {
		if !listed[name] {
			names = append(names, name)
		}
	}
	if keep != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !keep(n) })
	}
	slices.Sort(names)
	out, err := readEndpoints(ctx, db, names)
	if err != nil {
		return nil, err
	}
	for i, info := range out {
		if u, ok := used[info.Name]; ok && info.State == EndpointClosed && u.Attempts > 0 {
			out[i].FailureRatio = float64(u.Failed) / float64(u.Attempts)
		}
	}
	return out, nil
}

// HeldEndpoints reads the breakers of the endpoints that are open or half
// open only, sorted by name: what a dashboard or a metric shows every few
// seconds, whatever the number of endpoints used.
func HeldEndpoints(ctx context.Context, rdb redis.UniversalClient) ([]EndpointInfo, error) {
	db := flowdb.New(rdb)
	names, err := db.Endpoint.Listed(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the open endpoints: %w", err)
	}
	slices.Sort(names)
	infos, err := readEndpoints(ctx, db, names)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(infos, func(i EndpointInfo) bool { return i.State == EndpointClosed }), nil
}

// ReadEndpoint reads endpoint name's breaker.
func ReadEndpoint(ctx context.Context, rdb redis.UniversalClient, name string) (EndpointInfo, error) {
	infos, err := readEndpoints(ctx, flowdb.New(rdb), []string{name})
	if err != nil {
		return EndpointInfo{}, err
	}
	return infos[0], nil
}

// readEndpoints reads the breakers of names, in order (flowdb reads a
// batch of them a round trip).
func readEndpoints(ctx context.Context, db *flowdb.DB, names []string) ([]EndpointInfo, error) {
	bs, err := db.Endpoint.Read(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make([]EndpointInfo, 0, len(bs))
	for _, b := range bs {
		out = append(out, endpointInfo(b.Name, b.Hash, b.Waiting))
	}
	return out, nil
}

// endpointInfo is endpoint name's breaker, from its state hash h and its
// waiters.
func endpointInfo(name string, h map[string]string, waiting int64) EndpointInfo {
	ms := func(f string) time.Time {
		i, err := strconv.ParseInt(h[f], 10, 64)
		if err != nil || i == 0 {
			return time.Time{}
		}
		return time.UnixMilli(i)
	}
	info := EndpointInfo{Name: name, State: h["state"], Since: ms("since"), Waiting: waiting, By: h["by"]}
	if info.State == "" {
		info.State = EndpointClosed
	}
	info.FailureRatio, _ = strconv.ParseFloat(h["ratio"], 64)
	switch {
	case info.State == EndpointHalfOpen:
		info.NextProbe = ms("probeUntil")
	case info.State == EndpointOpen && info.By != "operator" && waiting > 0:
		// Only a waiter is sent as a probe: with none, no probe is
		// planned, and the time it was due would be a time that passed.
		info.NextProbe = ms("nextProbe")
	}
	return info
}

// EndpointStates reads the state of each of names (tenant-qualified
// endpoints) in one round trip, and answers those that are not closed.
func EndpointStates(ctx context.Context, rdb redis.UniversalClient, names []string) (map[string]string, error) {
	states, err := flowdb.New(rdb).Endpoint.States(ctx, names)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, name := range names {
		if v := states[i]; v == EndpointOpen || v == EndpointHalfOpen {
			out[name] = v
		}
	}
	return out, nil
}
