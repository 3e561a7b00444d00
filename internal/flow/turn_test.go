package flow

import (
	"context"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/redistest"
)

// A request that waited in a cut key's line starts with the turn it was
// given as its ticket's Turn, however late its task then came; one that
// waited for nothing has none.
func TestTicketTellsTheTurnAWaiterWasGiven(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(t0)
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1, Adaptive: true, MinRate: 1}, w, clk)
	ctx := context.Background()
	if tk := admit(t, c, Request{ID: "free", HostPort: "h:443", Key: "h:443"}); !tk.Turn().IsZero() {
		t.Errorf("a request of a key not cut has turn %v, want none", tk.Turn())
	}
	req := Request{ID: "r", HostPort: "h:443", Key: "h:443"}
	cut(c, req, 1)
	due := t0.Add(30 * time.Second)
	if _, ok := c.LineRetry(ctx, req, due); !ok {
		t.Fatal("the retry of a cut key did not join its line")
	}
	clk.Add(30 * time.Second)
	c.cut.pumpCutLines(ctx)
	turn := w.at("r")
	if turn.IsZero() {
		t.Fatal("the retry was given no turn at its due time")
	}
	clk.Set(turn.Add(time.Second)) // its task comes a second late
	tk := admit(t, c, req)
	if !tk.Turn().Equal(turn) {
		t.Errorf("the ticket's turn is %v (%v after t0), want the turn given, %v", tk.Turn(), tk.Turn().Sub(t0), turn.Sub(t0))
	}
}
