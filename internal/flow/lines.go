package flow

// The lines' registry: the cut keys', the fairness lanes' and the
// parallelism keys' lines that may hold waiters are listed in Redis
// (keys.Lines, one registry for every kind), so that a worker that
// never saw a line (started since, or it was another worker's) gives its
// waiters turns or slots too. Their safety net is long (twice the
// expected wait), so a line no live worker knew would otherwise wait for
// it.

import (
	"context"
	"time"

	"github.com/retryd/retryd/internal/keys"
)

// listLine lists line name of kind (a keys.Line* kind), with value, in
// the registry, and calls listed with the time under core.mu. Each worker
// that knows a line lists it again every AdoptEvery: a worker that
// emptied it may have unlisted it just after a new waiter listed it.
func (c *core) listLine(ctx context.Context, kind, name, value string, listed func(time.Time)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.db.Lines.List(ctx, kind, name, value); err != nil {
		c.log.Warn("could not list a line", "kind", kind, "line", name, "err", err)
		return
	}
	c.mu.Lock()
	listed(c.now())
	c.mu.Unlock()
}

// unlistLine drops line name of kind from the registry once it is empty.
func (c *core) unlistLine(ctx context.Context, kind, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.db.Lines.Unlist(ctx, kind, name); err != nil {
		c.log.Warn("could not unlist a line", "kind", kind, "line", name, "err", err)
	}
}

// adoptLines takes on the listed lines this worker does not know of, and
// learns which tenants are about (tenants.go). A cut key not cut here
// drains its line as fast as fairness lets it; a fairness line gets this
// worker's free slots, and a parallelism line's ended leases are handed
// on (Rebalance).
func (c *Controller) adoptLines(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lines, tenants, err := c.db.Lines.Read(ctx)
	if err != nil {
		c.log.Warn("could not read the lines listed", "err", err)
		return
	}
	par := map[string]string{}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.fair.learnTenants(tenants, now)
	for field, value := range lines {
		kind, name, _ := keys.ParseLineField(field)
		switch kind {
		case keys.LineCut:
			k := c.cut.keys[name]
			if k == nil {
				k = c.cut.keyOf(Request{Key: name, HostPort: value}, now)
			}
			if k.lineSeen.IsZero() {
				k.lineSeen = now
			}
		case keys.LineFair:
			h := c.fair.lane(name)
			if h.lineSeen.IsZero() {
				h.lineSeen = now
			}
		case keys.LinePar:
			par[name] = value
		}
	}
	c.par.adoptParLines(par, now)
}
