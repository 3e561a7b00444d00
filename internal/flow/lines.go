package flow

// The lines' registry: the cut keys', the destinations' and the
// parallelism keys' lines that may hold waiters are listed in Redis, so
// that a worker that never saw a line (started since, or it was another
// worker's) gives its waiters turns or slots too. Their safety net is long (twice the expected wait),
// so a line no live worker knew would otherwise wait for it.

import (
	"context"
	"time"

	"github.com/retryd/retryd/internal/record"
)

// listLine lists a line (field, with value) in the registry hash, and
// calls listed with the time under c.mu. Each worker that knows a line
// lists it again every AdoptEvery: a worker that emptied it may have
// unlisted it just after a new waiter listed it.
func (c *Controller) listLine(ctx context.Context, registry, field, value string, listed func(time.Time)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.rdb.HSet(ctx, registry, field, value).Err(); err != nil {
		c.log.Warn("could not list a line", "line", field, "err", err)
		return
	}
	c.mu.Lock()
	listed(c.now())
	c.mu.Unlock()
}

// unlistLine drops a line from its registry once it is empty.
func (c *Controller) unlistLine(ctx context.Context, registry, field string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.rdb.HDel(ctx, registry, field).Err(); err != nil {
		c.log.Warn("could not unlist a line", "line", field, "err", err)
	}
}

// adoptLines takes on the listed lines this worker does not know of, and
// learns which tenants are about (tenants.go). A
// cut key not cut here drains its line as fast as fairness lets it; a
// fairness line gets this worker's free slots, and a parallelism line's
// ended leases are handed on (Rebalance).
func (c *Controller) adoptLines(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pipe := c.rdb.Pipeline()
	cutCmd, fairCmd, parCmd := pipe.HGetAll(ctx, record.CutLinesKey), pipe.HGetAll(ctx, record.FairLinesKey), pipe.HGetAll(ctx, record.ParLinesKey)
	tenantsCmd := pipe.SRandMemberN(ctx, record.TenantsKey, 2)
	if _, err := pipe.Exec(ctx); err != nil {
		c.log.Warn("could not read the lines listed", "err", err)
		return
	}
	cut, fair, par := cutCmd.Val(), fairCmd.Val(), parCmd.Val()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.learnTenants(tenantsCmd.Val(), now)
	for name, hostPort := range cut {
		k := c.keys[name]
		if k == nil {
			k = c.keyOf(Request{Key: name, HostPort: hostPort}, now)
		}
		if k.lineSeen.IsZero() {
			k.lineSeen = now
		}
	}
	for hostPort := range fair {
		h := c.hosts[hostPort]
		if h == nil {
			h = &host{}
			c.hosts[hostPort] = h
		}
		if h.lineSeen.IsZero() {
			h.lineSeen = now
		}
	}
	c.adoptParLines(par, now)
}
