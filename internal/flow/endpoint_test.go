package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// parkedFor admits req, which must park for an open endpoint, and returns
// its park.
func parkedFor(t *testing.T, c *Controller, req Request) *Parked {
	t.Helper()
	_, err := c.Admit(context.Background(), req)
	p, ok := errors.AsType[*Parked](err)
	if !ok || p.Reason != record.WaitingEndpointOpen {
		t.Fatalf("Admit(%s) = %v, want a park for an open endpoint", req.ID, err)
	}
	return p
}

// An endpoint opens on its tenant's failures (never on client errors);
// its requests wait in line; the first is woken for a probe 5 s later; a
// failed probe doubles the wait; a probe that succeeds closes it and wakes
// the line in order. Another tenant's requests to it pass meanwhile.
func TestEndpointBreakerOpensProbesAndCloses(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1, Breaker: BreakerConfig{MinAttempts: 4}}, w, clk)
	ctx := context.Background()
	req := func(id, tenant string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "h:443", Endpoint: "https://h:443", Tenant: tenant, Timeout: time.Second}
	}
	for i := range 6 {
		admit(t, c, req(fmt.Sprint("client-error-", i), "ta")).Done(ctx, Other)
	}
	for i := range 3 {
		admit(t, c, req(fmt.Sprint("failed-", i), "ta")).Done(ctx, Failed)
	}
	admit(t, c, req("still-closed", "ta")).Done(ctx, Overloaded) // 4 of 10 failed: below the ratio
	// Another tenant's endpoint of the same name: 4 of 4 failed.
	for i := range 4 {
		admit(t, c, req(fmt.Sprint("tb-failed-", i), "tb")).Done(ctx, Failed)
	}
	opened := clk.Now()
	p := parkedFor(t, c, req("w1", "tb"))
	if want := opened.Add(DefaultTuning.BreakerProbe); !p.Starts.Equal(want) {
		t.Errorf("the first waiter starts at %v, want the first probe at %v", p.Starts, want)
	}
	parkedFor(t, c, req("w2", "tb"))
	parkedFor(t, c, req("w3", "tb"))
	admit(t, c, req("ta-goes-on", "ta")).Done(ctx, Succeeded)
	w.mu.Lock()
	at, timed := w.ats["w1"]
	_, w2timed := w.ats["w2"]
	w.mu.Unlock()
	if !timed || !at.Equal(opened.Add(DefaultTuning.BreakerProbe)) || w2timed {
		t.Errorf("timed wakes: w1 at %v (%v), w2 %v; want only the first waiter's, at the probe", at, timed, w2timed)
	}

	clk.Add(DefaultTuning.BreakerProbe)
	probe := admit(t, c, req("w1", "tb"))
	if !probe.probe {
		t.Fatal("the first waiter, at the probe's time, is not the probe")
	}
	parkedFor(t, c, req("w4", "tb")) // a probe is out: the others wait
	probe.Done(ctx, Failed)
	w.mu.Lock()
	at = w.ats["w2"]
	w.mu.Unlock()
	if want := clk.Now().Add(2 * DefaultTuning.BreakerProbe); !at.Equal(want) {
		t.Errorf("after a failed probe the next waiter is woken at %v, want %v (the interval doubled)", at, want)
	}
	info, err := ReadEndpoint(ctx, rdb, EndpointName("tb", "https://h:443"))
	if err != nil || info.State != EndpointOpen || info.Waiting != 3 {
		t.Errorf("the endpoint after a failed probe: %+v %v, want open with 3 waiting", info, err)
	}

	clk.Add(2 * DefaultTuning.BreakerProbe)
	probe = admit(t, c, req("w2", "tb"))
	before := len(w.got())
	probe.Done(ctx, Succeeded)
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(w.got()[before:], []string{"w3", "w4"}) {
		if time.Now().After(deadline) {
			t.Fatalf("woken after the probe succeeded: %v, want w3 and w4 in order", w.got()[before:])
		}
		time.Sleep(5 * time.Millisecond)
	}
	admit(t, c, req("w3", "tb")).Done(ctx, Succeeded)
	if eps, err := Endpoints(ctx, rdb, clk.Now(), nil); err != nil || len(eps) != 0 {
		t.Errorf("endpoints not closed: %+v %v, want none", eps, err)
	}
}

// Waiters of an open endpoint resume in their key's order when it closes,
// however the woken race to their key's slot: the close puts them back at
// their places (when each was made) in the key's line before it wakes
// them, so the slot goes to the oldest, not to the first to come.
func TestEndpointWaitersResumeInTheirKeysOrder(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1}, w, clk)
	ctx := context.Background()
	name := EndpointName("", "https://h:443")
	if _, err := OpenEndpoint(ctx, rdb, name, 1, "operator", clk.Now(), c.tune); err != nil {
		t.Fatal(err)
	}
	req := func(id string, made time.Duration) Request {
		return Request{ID: id, HostPort: "h:443", Key: "k", Parallelism: 1, Endpoint: "https://h:443",
			Timeout: time.Second, Created: clk.Now().Add(made)}
	}
	// They reach the gate in another order than they were made (a
	// retry's backoff, another worker's queue).
	parkedFor(t, c, req("third", 3*time.Millisecond))
	parkedFor(t, c, req("first", time.Millisecond))
	parkedFor(t, c, req("second", 2*time.Millisecond))
	if _, err := CloseEndpoint(ctx, rdb, w, discard, name, clk.Now(), c.tune); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	delete(c.breaker.endpoints.states, name) // as the next read of its state says
	c.mu.Unlock()
	waitWoken(t, w, []string{"first", "second", "third"})

	// The woken come in reverse order: the slot is the oldest's.
	parked(t, c, req("third", 3*time.Millisecond))
	parked(t, c, req("second", 2*time.Millisecond))
	first := admit(t, c, req("first", time.Millisecond))
	first.Done(ctx, Succeeded)
	admit(t, c, req("second", 2*time.Millisecond)).Done(ctx, Succeeded)
	admit(t, c, req("third", 3*time.Millisecond)).Done(ctx, Succeeded)
}

// With the breaker off, no failure holds a request.
func TestEndpointBreakerOff(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1, Breaker: BreakerConfig{Off: true, MinAttempts: 2}}, &waker{}, clk)
	for i := range 10 {
		admit(t, c, Request{ID: fmt.Sprint(i), HostPort: "h:443", Key: "h:443", Endpoint: "https://h:443", Timeout: time.Second}).
			Done(context.Background(), Failed)
	}
}

// An endpoint failing on two workers, each with too few attempts to
// decide alone, opens on their attempts summed.
func TestEndpointOpensOnEveryWorkersAttempts(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	ctx := context.Background()
	cfg := Config{Concurrency: 100, FairShare: 1, Breaker: BreakerConfig{MinAttempts: 4}}
	workers := []*Controller{newController(t, rdb, cfg, &waker{}, clk), newController(t, rdb, cfg, &waker{}, clk)}
	name := EndpointName("", "https://h:443")
	for i, c := range workers {
		rdb.ZAdd(ctx, keys.FlowWorkers, redis.Z{Score: float64(clk.Now().UnixMilli()), Member: fmt.Sprint("w", i)})
		for j := range 2 {
			admit(t, c, Request{ID: fmt.Sprint(i, "-", j), HostPort: "h:443", Key: "h:443", Endpoint: "https://h:443", Timeout: time.Second}).
				Done(ctx, Failed)
		}
		if info, _ := ReadEndpoint(ctx, rdb, name); info.State != EndpointClosed {
			t.Fatalf("the endpoint is %s after 2 failures on each of %d workers, want closed", info.State, i)
		}
	}
	for i, c := range workers {
		c.breaker.publishEndpoints(ctx, fmt.Sprint("w", i), true)
	}
	if info, err := ReadEndpoint(ctx, rdb, name); err != nil || info.State != EndpointOpen || info.FailureRatio != 1 {
		t.Errorf("after the workers published: %+v %v, want it open, all failed", info, err)
	}
}
