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
	"github.com/retryd/retryd/internal/redistest"
)

// BREAKER_FAIL_AFTER counts from when a request began to wait: requests
// redriven to an endpoint open far longer than that, with no waiter and
// its probe time long past, are not failed at once. The first goes as
// the probe, the others wait, and when the probe succeeds they all go:
// none ends as endpoint_down.
func TestEndpointLongOpenProbesTheFirstRequestAndFailsNone(t *testing.T) {
	t.Parallel()
	c, rdb, clk, w := openedEndpoint(t, 20*time.Second)
	ctx := context.Background()
	name := EndpointName("", "https://h:443")
	clk.Add(time.Minute) // the outage: nobody waits, the probe time passes
	info, err := ReadEndpoint(ctx, rdb, name)
	if err != nil || info.State != EndpointOpen || info.Waiting != 0 {
		t.Fatalf("after the outage: %+v %v, want open with nobody waiting", info, err)
	}
	if !info.NextProbe.IsZero() {
		t.Errorf("an open endpoint with no waiter shows a probe at %v (%v ago), want none", info.NextProbe, clk.Now().Sub(info.NextProbe))
	}

	// The destination is fixed; three requests are redriven.
	probe, err := c.Admit(ctx, toH("r1"))
	if err != nil || !probe.probe {
		t.Fatalf("the first request to the long-open endpoint: %v (probe %v), want it sent as the probe", err, probe != nil && probe.probe)
	}
	for _, id := range []string{"r2", "r3"} {
		_, err := c.Admit(ctx, toH(id))
		if errors.Is(err, ErrEndpointDown) {
			t.Fatalf("%s failed at once as endpoint_down, with its probe out: %v", id, err)
		}
		if p, ok := errors.AsType[*Parked](err); !ok {
			t.Fatalf("%s: %v, want it waiting for the probe", id, err)
		} else if p.Until.Before(clk.Now().Add(20 * time.Second)) {
			t.Errorf("%s may end at %v, %v from now: sooner than BREAKER_FAIL_AFTER after it began to wait", id, p.Until, p.Until.Sub(clk.Now()))
		}
	}
	probe.Done(ctx, Succeeded)
	// r2, first in line, also has a timer at the probe's end; r3 is
	// woken only by the probe's success.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(w.got(), "r3") {
		if time.Now().After(deadline) {
			t.Fatalf("woken after the probe succeeded: %v, want r3 among them", w.got())
		}
		time.Sleep(5 * time.Millisecond)
	}
	clk.Add(DefaultTuning.BreakerRead) // this worker reads the state again
	for _, id := range []string{"r2", "r3"} {
		admit(t, c, toH(id)).Done(ctx, Succeeded)
	}
}

// A waiter ends as endpoint_down only once it has waited
// BREAKER_FAIL_AFTER and a probe made while it waited failed: a probe
// interval longer than BREAKER_FAIL_AFTER keeps it waiting for that
// probe, not failing for want of one.
func TestEndpointWaiterEndsOnlyAfterAFailedProbe(t *testing.T) {
	t.Parallel()
	c, rdb, clk, w := openedEndpoint(t, 2*time.Second)
	ctx := context.Background()
	began := clk.Now()
	parkedFor(t, c, toH("w1")) // the next probe is 5 s away
	firstProbe := began.Add(DefaultTuning.BreakerProbe)
	parkedFor(t, c, toH("w2"))

	clk.Set(began.Add(3 * time.Second)) // past BREAKER_FAIL_AFTER, no probe yet
	if _, err := c.Admit(ctx, toH("w2")); errors.Is(err, ErrEndpointDown) {
		t.Fatalf("w2 ended with no probe made: %v", err)
	}
	clk.Set(firstProbe)
	probe := admit(t, c, toH("w1"))
	if !probe.probe {
		t.Fatal("the first waiter, at the probe's time, is not the probe")
	}
	probe.Done(ctx, Failed)
	if at := w.at("w2"); !at.Equal(clk.Now()) {
		t.Errorf("after the failed probe w2 is woken at %v, want now (%v): it has waited long enough", at, clk.Now())
	}
	_, err := c.Admit(ctx, toH("w2"))
	if !errors.Is(err, ErrEndpointDown) {
		t.Errorf("w2, which waited past BREAKER_FAIL_AFTER and saw a probe fail: %v, want endpoint_down", err)
	}
	info, err := ReadEndpoint(ctx, rdb, EndpointName("", "https://h:443"))
	if err != nil || info.Waiting != 0 || !info.NextProbe.IsZero() {
		t.Errorf("after its waiters ended: %+v %v, want nobody waiting and no probe planned", info, err)
	}
}

// openedEndpoint is a controller whose endpoint https://h:443 four failed
// attempts have just opened, with BREAKER_FAIL_AFTER failAfter, on a fake
// clock.
func openedEndpoint(t *testing.T, failAfter time.Duration) (*Controller, redis.UniversalClient, *clock.Fake, *waker) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1,
		Breaker: BreakerConfig{MinAttempts: 4, FailAfter: failAfter}}, w, clk)
	for i := range 4 {
		admit(t, c, toH(fmt.Sprint("failed-", i))).Done(context.Background(), Failed)
	}
	return c, rdb, clk, w
}

// toH is request id to https://h:443.
func toH(id string) Request {
	return Request{ID: id, HostPort: "h:443", Key: "h:443", Endpoint: "https://h:443", Timeout: time.Second}
}
