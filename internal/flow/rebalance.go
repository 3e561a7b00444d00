package flow

// Rebalance: the loop that gives a worker's free fairness slots to
// waiters when no attempt's end did, pumps the lines of cut keys and of
// parallelism keys, and frees slots promised to requests fetched
// elsewhere. It rests while nothing it watches needs a look.

import (
	"context"
	"time"

	"github.com/retryd/retryd/internal/keys"
)

// Rebalance wakes, until ctx ends, the waiters of destinations with free
// slots on this worker, every RebalanceEvery while it watches a line. A
// slot promised to a woken request is freed as soon as that request's task
// was fetched (by any worker): with several workers it mostly lands on
// another one, and the promise would otherwise idle the slot for the rest
// of WakeTTL. A worker that watches no line rests until one is made here
// (stir), a parallelism lease ends, or it is time to adopt the lines of
// others: a tick costs an idle worker at GOMAXPROCS=1 about 0.2 ms of CPU,
// so 20 a second were most of its idle cost.
func (c *Controller) Rebalance(ctx context.Context) {
	var adopted time.Time
	rest := c.clk.NewTimer(0)
	defer rest.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rest.C():
		case <-c.stirred:
		}
		if now := c.now(); now.Sub(adopted) >= c.tune.AdoptEvery {
			adopted = now
			c.adoptLines(ctx)
		}
		c.rebalance(ctx)
		rest.Reset(c.restFor(adopted))
	}
}

// rebalance is one look of Rebalance.
func (c *Controller) rebalance(ctx context.Context) {
	c.cut.pumpCutLines(ctx)
	c.par.pumpParLines(ctx)
	c.fair.releaseFetched(ctx)
	type lineFree struct {
		host string
		free int
	}
	var lines []lineFree
	var relist []string
	c.mu.Lock()
	now := c.now()
	for name, h := range c.fair.hosts {
		if !h.watched(now, c.tune.LineMemory) {
			continue
		}
		if now.Sub(h.listed) >= c.tune.AdoptEvery {
			relist = append(relist, name)
		}
		if now.Before(h.quietUntil) {
			continue
		}
		if free := h.take(c.fair.capOf(name), now, c.tune.WakeTTL); free > 0 {
			lines = append(lines, lineFree{name, free})
		}
	}
	c.mu.Unlock()
	for _, name := range relist {
		c.listLine(ctx, keys.LineFair, name, "", func(at time.Time) {
			if h := c.fair.hosts[name]; h != nil {
				h.listed = at
			}
		})
	}
	for _, l := range lines {
		c.fair.promote(ctx, l.host, "", l.free)
	}
}

// watched says whether Rebalance looks at the destination's line.
func (h *host) watched(now time.Time, lineMemory time.Duration) bool {
	return !h.lineSeen.IsZero() && now.Sub(h.lineSeen) <= lineMemory
}

// restFor is how long Rebalance may rest after a look, the last adoption
// at adopted: RebalanceEvery while this worker holds a promise, watches a
// cut line, or watches a fairness line with slots free here; else until
// the earliest parallelism lease end or relisting it knows of, or the next
// adoption. A fairness line whose slots are all taken here needs no look:
// the end of one of their attempts promotes its next waiter itself (Done)
// and stirs Rebalance. (Resting a cut line's
// worker until its rate's next turn within the horizon cut the 503
// backlog's CPU by a fifth, but slowed two chaos drains of five to over
// two minutes, for a reason not found: not taken.)
func (c *Controller) restFor(adopted time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	next := adopted.Add(c.tune.AdoptEvery)
	for name, h := range c.fair.hosts {
		switch {
		case len(h.woken) > 0:
			return c.tune.RebalanceEvery
		case h.watched(now, c.tune.LineMemory) && now.Before(h.quietUntil):
			next = minTime(next, h.quietUntil)
		case h.watched(now, c.tune.LineMemory) && h.freeSlots(c.fair.capOf(name), now, c.tune.WakeTTL) > 0:
			return c.tune.RebalanceEvery
		case h.watched(now, c.tune.LineMemory):
			next = minTime(next, h.listed.Add(c.tune.AdoptEvery)) // its relisting
		}
	}
	for _, k := range c.cut.keys {
		if !k.lineSeen.IsZero() {
			return c.tune.RebalanceEvery
		}
	}
	for _, l := range c.par.parLines {
		next = minTime(next, minTime(l.next, l.listed.Add(c.tune.AdoptEvery)))
	}
	return min(c.tune.AdoptEvery, max(c.tune.RebalanceEvery, next.Sub(now)))
}

// stir ends Rebalance's rest: this worker has just made a line, a promise
// or a lease to watch. core.mu may be held.
func (c *core) stir() {
	select {
	case c.stirred <- struct{}{}:
	default:
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// releaseFetched drops the promises of woken requests whose tasks are no
// longer waiting to be fetched. A request fetched here is already counted
// in flight (Admit drops its promise); one fetched elsewhere leaves this
// worker's slot free. A promise younger than half a RebalanceEvery is
// left alone: its wake-up may not have made the task runnable yet.
func (f *fairGate) releaseFetched(ctx context.Context) {
	type promise struct{ host, id string }
	var check []promise
	f.mu.Lock()
	now := f.now()
	for name, h := range f.hosts {
		for id, at := range h.woken {
			if now.Sub(at) >= f.tune.RebalanceEvery/2 {
				check = append(check, promise{name, id})
			}
		}
	}
	f.mu.Unlock()
	for _, p := range check {
		if waiting, err := f.pending(ctx, p.id); err != nil || waiting {
			continue // unknown: WakeTTL ends the promise
		}
		f.mu.Lock()
		if h := f.hosts[p.host]; h != nil {
			delete(h.woken, p.id)
		}
		f.mu.Unlock()
	}
}
