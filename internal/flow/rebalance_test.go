package flow

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/redistest"
)

// failLine fails the scripts run on one fairness line while failing is
// set: Redis trouble on that call only.
type failLine struct {
	line    string
	failing atomic.Bool
}

func (f *failLine) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failLine) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f *failLine) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); f.failing.Load() && len(args) > 3 && args[0] == "evalsha" && args[3] == f.line {
			err := errors.New("injected: Redis trouble")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// An attempt's end whose hand-over to the line failed on Redis stirs
// Rebalance, which then looks again every RebalanceEvery: resting on, it
// would leave the slot idle until its next adoption (up to AdoptEvery).
// A failed look of Rebalance itself does not stir it (that would loop).
func TestFailedHandOverStirsRebalance(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	rdb := redistest.Start(t).Client()
	fail := &failLine{line: flowdb.FairNames("h:80")[0]}
	rdb.AddHook(fail)
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 2, FairShare: 0.5}, w, clk)
	req := func(id string) Request { return Request{ID: id, HostPort: "h:80", Key: "h:80"} }
	a := admit(t, c, req("a"))
	parked(t, c, req("b"))
	stirred := func() bool {
		select {
		case <-c.stirred:
			return true
		default:
			return false
		}
	}
	stirred() // by the park
	fail.failing.Store(true)
	a.Done(context.Background(), Succeeded)
	if !stirred() {
		t.Fatal("a failed hand-over at an attempt's end left Rebalance resting")
	}
	if got := c.restFor(clk.Now()); got != DefaultTuning.RebalanceEvery {
		t.Errorf("after a failed hand-over Rebalance rests %v, want %v (a free slot, a watched line)", got, DefaultTuning.RebalanceEvery)
	}
	c.rebalance(context.Background())
	if stirred() {
		t.Error("Rebalance's own failed look stirred it: it would look again at once, in a loop")
	}
	fail.failing.Store(false)
	c.rebalance(context.Background())
	waitWoken(t, w, []string{"b"})
}
