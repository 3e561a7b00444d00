package flow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/redistest"
)

// An attempt that made no call frees what it held but is counted nowhere
// attempts are: not in its key's recent attempts, not by the breaker.
func TestNoCallIsNotCountedAsAnAttempt(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 2, FairShare: 0.5}, &waker{}, clk)
	req := func(i int) Request {
		return Request{ID: fmt.Sprint("r", i), HostPort: "h:443", Key: "h:443", Endpoint: "https://h:443", Timeout: time.Second}
	}
	for i := range 3 * DefaultBreaker.MinAttempts {
		admit(t, c, req(i)).Done(context.Background(), NoCall) // its slot is free again, or the next would park
	}
	for _, s := range c.snapshot(clk.Now()) {
		if s.Key == "h:443" && s.Succeeded+s.Overloaded+s.Failed != 0 {
			t.Errorf("the key's recent attempts: %d succeeded, %d overloaded, %d failed; want none", s.Succeeded, s.Overloaded, s.Failed)
		}
	}
	c.mu.Lock()
	ep := c.breaker.endpoints.byName[EndpointName("", "https://h:443")]
	c.mu.Unlock()
	if ep != nil {
		t.Errorf("the breaker counted attempts that made no call: %+v", ep)
	}
}
