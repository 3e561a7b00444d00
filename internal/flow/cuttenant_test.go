package flow

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// Tenant A's overloaded answers from a host cut A's rate there; tenant B's
// requests to the same host (no flowControl.key either) are admitted at
// once, as many as come, without waiting for A's cut rate.
func TestAdaptiveCutOfOneTenantDoesNotHoldAnother(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 1000, FairShare: 1, Adaptive: true, MinRate: 1}, &waker{}, clk)
	req := func(who string, i int) Request {
		return Request{ID: fmt.Sprintf("%s-%d", who, i), HostPort: "h:443", Key: "h:443", Tenant: who, Timeout: time.Second}
	}
	var tickets []*Ticket
	for i := range 40 {
		tickets = append(tickets, admit(t, c, req("a", i)))
	}
	for _, tk := range tickets[:MinOverloads] {
		tk.Done(context.Background(), Overloaded)
	}
	limit := func(who string) float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if k := c.cut.keys[tenant.Qualify(who, "h:443")]; k != nil && k.lim != nil {
			return float64(k.lim.Limit())
		}
		return 0
	}
	if got := limit("a"); got != 20 {
		t.Errorf("after %d overloaded answers to tenant a, a's rate at h:443 is %v, want 20 (half of 40/s)", MinOverloads, got)
	}
	// A's own next requests are held to its cut rate.
	held := false
	for i := range 5 {
		if _, err := c.Admit(context.Background(), req("a", 100+i)); err != nil {
			var p *Parked
			if !errors.As(err, &p) {
				t.Fatalf("Admit(a-%d) = %v, want a ticket or Parked", 100+i, err)
			}
			held = true
			break
		}
	}
	if !held {
		t.Errorf("tenant a's requests beyond its cut rate of 20/s were all admitted in the same instant")
	}
	// B's are not: its key at h:443 is its own, and uncut.
	for i := range 40 {
		if _, err := c.Admit(context.Background(), req("b", i)); err != nil {
			t.Fatalf("tenant b's request %d to h:443 = %v; want it admitted at once (a's cut must not hold b)", i, err)
		}
	}
	if got := limit("b"); got != 0 {
		t.Errorf("tenant b's rate at h:443 is cut to %v; b had no overloaded answer", got)
	}
}
