package flow

// Fairness between tenants: while more than one tenant is about, one
// tenant holds at most a share of a worker's slots, whatever destinations
// it uses (its lane, beside its destination's), and the same share of one
// destination's slots (its lane at that destination), so that another
// tenant's request to a destination it floods finds a slot free instead
// of waiting for one of its attempts to end. While a named tenant is the
// only tenant about, it holds all of the worker's slots and of a
// destination's share but one: a tenant no worker has seen yet finds that
// one free for its first request, and from then on both are about. (A
// deployment without tenants, the default tenant's alone, keeps every
// slot.) Its waiters over either share
// wait in that lane's line in Redis. A worker learns which tenants are
// about from the tenant stamped on each request it admits and from the
// tenants Redis lists (keys.Tenants, read with the lines every
// AdoptEvery), never from its own settings: it needs no API keys for it.

import (
	"strings"
	"time"

	"github.com/retryd/retryd/internal/tenant"
)

// TenantCap is how many slots of this worker one tenant may hold while
// more than one tenant is about; ok is false when fairness between
// tenants is off (FLOW_TENANT_SHARE 1).
func (c *core) TenantCap() (n int, ok bool) {
	if c.cfg.TenantShare <= 0 || c.cfg.TenantShare >= 1 || c.cfg.Concurrency <= 0 {
		return 0, false
	}
	return max(1, int(float64(c.cfg.Concurrency)*c.cfg.TenantShare)), true
}

// The lane names of a tenant and of a tenant at a destination start with
// these: no host:port does, nor one the other.
const (
	tenantLanePrefix   = "tenant\x1f"
	tenantAtLanePrefix = "tenant-at\x1f"
)

// tenantLane is the name, among the destinations' lanes, of tenant t's
// share of the worker's slots and of its fairness line.
func tenantLane(t string) string { return tenantLanePrefix + tenant.Of(t) }

// tenantAtLane is the name of tenant t's share of destination hostPort's
// slots and of its fairness line there.
func tenantAtLane(t, hostPort string) string {
	return tenantAtLanePrefix + tenant.Of(t) + "\x1f" + hostPort
}

// capOf is how many of this worker's slots lane may hold. core.mu is held.
func (f *fairGate) capOf(lane string) int {
	n, ok := f.TenantCap()
	switch {
	case ok && strings.HasPrefix(lane, tenantLanePrefix):
		if t := strings.TrimPrefix(lane, tenantLanePrefix); !f.othersAbout(t, f.now()) {
			return f.aloneCap(t, f.cfg.Concurrency)
		}
		return n
	case ok && strings.HasPrefix(lane, tenantAtLanePrefix):
		t, _, _ := strings.Cut(strings.TrimPrefix(lane, tenantAtLanePrefix), "\x1f")
		if !f.othersAbout(t, f.now()) {
			return f.aloneCap(t, f.FairCap())
		}
		return max(1, int(float64(f.FairCap())*f.cfg.TenantShare))
	}
	return f.FairCap()
}

// aloneCap is how many of the all slots of a lane tenant t may hold while
// it is the only tenant about: a named tenant all but one, kept for
// another tenant's first request; the default tenant (a deployment
// without tenants, or one whose named tenants never stored a request)
// all.
func (f *fairGate) aloneCap(t string, all int) int {
	if t == tenant.Default {
		return all
	}
	return max(1, all-1)
}

// tenantFair notes that a request of tenant t is being admitted and says
// whether another tenant is about (fairness between tenants on). core.mu is
// held.
func (f *fairGate) tenantFair(t string, now time.Time) bool {
	if _, ok := f.TenantCap(); !ok {
		return false
	}
	t = tenant.Of(t)
	f.tenantsSeen[t] = now
	return f.othersAbout(t, now)
}

// othersAbout says whether a tenant other than t is about. core.mu is held.
func (f *fairGate) othersAbout(t string, now time.Time) bool {
	for _, other := range f.tenantsListed {
		if other != t {
			return true
		}
	}
	for other, at := range f.tenantsSeen {
		if other != t && now.Sub(at) < f.tune.TenantMemory {
			return true
		}
	}
	return false
}

// learnTenants takes the tenants Redis lists (a few are enough to tell
// whether another is about) and forgets the tenants not seen here for
// TenantMemory. core.mu is held.
func (f *fairGate) learnTenants(listed []string, now time.Time) {
	f.tenantsListed = listed
	for t, at := range f.tenantsSeen {
		if now.Sub(at) >= f.tune.TenantMemory {
			delete(f.tenantsSeen, t)
		}
	}
}
