package flow

// Fairness: one destination (host:port) holds at most a share of a
// worker's slots; its waiters wait in its line in Redis, shared by all
// workers, and a freed slot goes to the first in line. Tenants take turns
// in a line (fair_wait): one that floods a destination waits behind its
// own requests, not ahead of another tenant's.

import (
	"context"
	"time"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/tenant"
)

// fairGate is the fairness gate: the lanes (destinations', tenants' and
// tenants' at a destination) of this worker, and the tenants it knows are
// about (tenants.go), under core.mu.
type fairGate struct {
	*core
	hosts map[string]*host
	// tenantsSeen are the tenants of the requests admitted here, by when
	// last; tenantsListed a few of the tenants Redis lists (tenants.go).
	tenantsSeen   map[string]time.Time
	tenantsListed []string
}

// enter runs the fairness gate: the destination's share of the
// worker's slots, then the tenant's share of the destination's and of the
// worker's (while it is the only tenant about, all of each but one slot,
// kept for another tenant's first request). A request over one waits in
// that one's line. The destination's comes first: there tenants take
// turns, so a tenant's waiter for a full destination is not in a line of
// its own tenant's, whose freed slot would wake it with another tenant's
// waiter for the same destination, and then mostly take the destination's
// slot first.
func (f *fairGate) enter(ctx context.Context, t *Ticket) error {
	req, now := t.req, t.start
	lanes := []string{req.HostPort}
	f.mu.Lock()
	if _, on := f.TenantCap(); on {
		f.tenantFair(req.Tenant, now)
		lanes = append(lanes, tenantAtLane(req.Tenant, req.HostPort), tenantLane(req.Tenant))
	}
	for _, name := range lanes {
		h := f.lane(name)
		delete(h.woken, req.ID) // back (here) from a wake-up
		if h.inflight >= f.capOf(name) {
			full := f.lineFull(name, h, now)
			f.mu.Unlock()
			return f.parkInLine(ctx, name, full, req.ID, req.Tenant, now)
		}
	}
	for _, name := range lanes {
		f.hosts[name].inflight++
	}
	f.mu.Unlock()
	t.lanes = lanes
	return nil
}

// exit gives back the lanes' slots. An attempt that ran gives
// each slot to the first in its lane's line, whichever worker parked it;
// one that did not start leaves its slots to Rebalance.
func (f *fairGate) exit(ctx context.Context, t *Ticket, e ending) {
	type freed struct {
		lane string
		free int
	}
	var lines []freed
	f.mu.Lock()
	for _, name := range t.lanes {
		h := f.hosts[name]
		if h == nil {
			continue
		}
		h.inflight--
		if e.started {
			h.took(e.at.Sub(t.start))
			if !h.lineSeen.IsZero() {
				lines = append(lines, freed{name, h.take(f.capOf(name), e.at, f.tune.WakeTTL)})
			}
		}
	}
	if !e.started {
		// A slot freed with no attempt's end to promote for it: Rebalance
		// gives it to a waiter, if a line wants it.
		f.stir()
	}
	f.mu.Unlock()
	for _, l := range lines {
		// One round trip, which also forgets this request's place. Without
		// a line (as far as this worker knows: Rebalance looks at those it
		// saw) an attempt costs nothing here.
		f.promote(ctx, l.lane, t.req.ID, l.free)
	}
}

// host is one destination's fairness state on this worker. Its waiters
// wait in the destination's line in Redis, shared by all workers.
type host struct {
	inflight int
	// lineSeen is when this worker last saw the destination's line
	// non-empty (zero: empty, as far as it knows).
	lineSeen time.Time
	// taking counts free slots being given to waiters by a fair_next in
	// flight, so that two lookers (an attempt's end and Rebalance) do not
	// give the same slot twice.
	taking int
	// quietUntil: the line held only requests handed over (none waiting)
	// when last seen; Rebalance looks again then.
	quietUntil time.Time
	// woken are the waiters woken and not yet back (id -> when): a woken
	// request may be fetched by another worker, so a wake-up counts
	// against this worker's free slots for WakeTTL only.
	woken map[string]time.Time
	// meanDur is how long its attempts take here (a moving average), for
	// how long its waiters can expect to wait; listed is when this worker
	// last listed its line in keys.Lines.
	meanDur time.Duration
	listed  time.Time
}

// took counts an attempt of d in the host's mean attempt duration.
func (h *host) took(d time.Duration) {
	if h.meanDur == 0 {
		h.meanDur = d
		return
	}
	h.meanDur += (d - h.meanDur) / 8
}

// lineFallback is the safety-net deadline of a waiter with n in its line
// (itself included) that moves one place per mean/slots: twice its
// expected wait, at least ParkFallback, at most LineFallbackMax. Its turn
// normally comes long before (a freed slot wakes it); the deadline only
// matters if its place was lost. It counts this worker's slots only, so
// with more workers the expected wait is shorter still.
func (t Tuning) lineFallback(n int, mean time.Duration, slots int) time.Duration {
	d := time.Duration(2 * float64(n) * float64(mean) / float64(max(slots, 1)))
	return min(max(d, t.ParkFallback), t.LineFallbackMax)
}

// freeSlots is how many of limit slots the host has free here, not
// counting slots promised to waiters woken in the last WakeTTL.
func (h *host) freeSlots(limit int, now time.Time, wakeTTL time.Duration) int {
	pending := 0
	for id, at := range h.woken {
		if now.Sub(at) >= wakeTTL {
			delete(h.woken, id)
			continue
		}
		pending++
	}
	return max(0, limit-h.inflight-pending-h.taking)
}

// take reserves the host's free slots for a fair_next about to run
// (promote gives them back), and returns how many.
func (h *host) take(limit int, now time.Time, wakeTTL time.Duration) int {
	free := h.freeSlots(limit, now, wakeTTL)
	h.taking += free
	return free
}

// promise counts ids, just woken, against the host's free slots here.
func (h *host) promise(ids []string, now time.Time) {
	if h.woken == nil {
		h.woken = map[string]time.Time{}
	}
	for _, id := range ids {
		h.woken[id] = now
	}
}

// lane is the fairness state of lane name, made on first use. core.mu is
// held.
func (f *fairGate) lane(name string) *host {
	h := f.hosts[name]
	if h == nil {
		h = &host{}
		f.hosts[name] = h
	}
	return h
}

// fullLane is what parking in a full lane's line needs to know of the
// lane, read under core.mu.
type fullLane struct {
	known          bool // its line was known here before
	mean           time.Duration
	capacity       int
	noteListedTime func(at time.Time)
}

// lineFull notes that lane name (h) has a waiter now, and reads what
// parkInLine needs of it. The caller holds core.mu.
func (f *fairGate) lineFull(name string, h *host, now time.Time) fullLane {
	known := !h.lineSeen.IsZero()
	h.lineSeen, h.quietUntil = now, time.Time{}
	f.stir()
	return fullLane{known: known, mean: h.meanDur, capacity: f.capOf(name),
		noteListedTime: func(at time.Time) { h.listed = at }}
}

// parkInLine puts id, of tenant t, in lane name's line, which is at its
// cap here (lineFull), and returns the *Parked saying how long its task
// sleeps unless woken (or the error that kept it out of line). It makes
// round trips, so the caller does not hold core.mu.
func (f *fairGate) parkInLine(ctx context.Context, name string, l fullLane, id, t string, now time.Time) error {
	n, err := f.waitInLine(ctx, name, id, t)
	if err != nil {
		return err
	}
	if !l.known || n == 1 {
		f.listLine(ctx, keys.LineFair, name, "", l.noteListedTime)
	}
	return &Parked{Until: now.Add(f.tune.lineFallback(n, l.mean, l.capacity)), Reason: keys.WaitingFairShare}
}

// waitInLine puts id, of tenant t, in hostPort's fairness line (keeping a
// place it had; a newcomer takes its tenant's turn) and says how many
// wait in it.
func (f *fairGate) waitInLine(ctx context.Context, hostPort, id, t string) (int, error) {
	return f.db.Fair.Wait(ctx, hostPort, id, tenant.Of(t), f.tune.KeyTTL)
}

// staleBatch bounds the stale hand-overs one look returns.
const staleBatch = 20

// nextInLine takes up to n waiters of hostPort's line, in line order, and
// forgets ended (the request whose attempt ended, or "").
func (f *fairGate) nextInLine(ctx context.Context, hostPort, ended string, n int) (flowdb.FairTake, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return f.db.Fair.Next(ctx, hostPort, ended, n, f.tune.KeyTTL, f.now(), f.tune.HandOverCheck, staleBatch)
}

// checkHandedOver looks at hostPort's stale hand-overs: one still parked
// is woken (it keeps its place if it finds no slot), and all are
// forgotten. One that could not be looked at is looked at again after
// HandOverCheck.
func (f *fairGate) checkHandedOver(hostPort string, ids []string) {
	if len(ids) == 0 {
		return
	}
	f.wakes.Add(1)
	go func() {
		defer f.wakes.Done()
		ctx, cancel := context.WithTimeout(f.stop, 5*time.Second)
		defer cancel()
		moves := make([]Move, len(ids))
		for i, id := range ids {
			moves[i] = Move{ID: id, ParkedOnly: true}
		}
		a := f.move(ctx, moves...)
		seen := make([]any, 0, len(ids))
		for _, id := range a.moved {
			f.log.Info("woke a request whose promotion was never delivered (its worker died)", "requestId", id, "host", hostPort)
			seen = append(seen, id)
		}
		for _, id := range a.gone { // not in a park: fetched, or gone
			seen = append(seen, id)
		}
		if len(seen) > 0 {
			if err := f.db.Fair.ForgetHanded(ctx, hostPort, seen); err != nil {
				f.log.Warn("could not forget requests handed a fairness slot", "host", hostPort, "err", err)
			}
		}
	}()
}

// promote takes up to free waiters of hostPort's line (forgetting ended's
// place), promises them this worker's free slots and wakes them.
// While the line is empty but for requests handed over, the worker keeps
// watching it (and it stays listed), looking once per HandOverCheck. The
// caller took the free slots (host.take).
func (f *fairGate) promote(ctx context.Context, hostPort, ended string, free int) {
	t, err := f.nextInLine(ctx, hostPort, ended, free)
	if err != nil {
		f.mu.Lock()
		f.lane(hostPort).taking -= free
		if ended != "" {
			// An attempt's end: Rebalance may be resting (the line's slots
			// were all taken) and would leave this slot idle until its
			// next adoption; stirred, it looks every RebalanceEvery while
			// the slot is free. Its own failed look does not stir it.
			f.stir()
		}
		f.mu.Unlock()
		f.log.Warn("could not read a fairness line; its waiters' deadlines will wake them", "host", hostPort, "err", err)
		return
	}
	f.checkHandedOver(hostPort, t.Stale)
	now := f.now()
	f.mu.Lock()
	wasSeen := false
	if h := f.hosts[hostPort]; h != nil {
		h.taking -= free
		wasSeen = !h.lineSeen.IsZero()
		h.promise(t.IDs, now)
		f.stir()
		h.sawLine(t, now, f.tune.HandOverCheck)
	}
	f.mu.Unlock()
	if t.Left == 0 && t.Handed == 0 && wasSeen {
		f.unlistLine(ctx, keys.LineFair, hostPort)
	}
	for _, id := range t.IDs {
		f.wakeLocal(hostPort, id)
	}
}

// sawLine remembers what fair_next said of the line.
func (h *host) sawLine(t flowdb.FairTake, now time.Time, handOverCheck time.Duration) {
	switch {
	case t.Left > 0:
		h.lineSeen, h.quietUntil = now, time.Time{}
	case t.Handed > 0:
		h.lineSeen, h.quietUntil = now, now.Add(handOverCheck)
	default:
		h.lineSeen = time.Time{}
	}
}

// wakeLocal wakes id, just promoted from hostPort's line, in the
// background; if it cannot be woken, the slot promised to it goes to the
// next in line.
func (f *fairGate) wakeLocal(hostPort, id string) {
	f.wakes.Add(1)
	go func() {
		defer f.wakes.Done()
		for id != "" && f.stop.Err() == nil {
			a := f.move(f.stop, Now(id))
			if len(a.moved) > 0 {
				return
			}
			if len(a.stalled) > 0 {
				// Not wakeable now (Redis could not say): back to
				// its place in line, or it would wait for its fallback
				// deadline out of every line. Its place was kept when it
				// was taken, so its tenant is not needed to make one.
				if _, err := f.waitInLine(f.stop, hostPort, id, ""); err != nil {
					f.log.Warn("could not put a waiter back in line; its deadline will wake it", "requestId", id, "err", err)
				}
			}
			// Its promised slot goes to the next in line.
			f.mu.Lock()
			free := 0
			if h := f.hosts[hostPort]; h != nil {
				delete(h.woken, id)
				if h.freeSlots(f.capOf(hostPort), f.now(), f.tune.WakeTTL) > 0 {
					free = 1
					h.taking++
				}
			}
			f.mu.Unlock()
			id = ""
			if free == 0 {
				return
			}
			t, err := f.nextInLine(f.stop, hostPort, "", 1)
			if err == nil {
				f.checkHandedOver(hostPort, t.Stale)
			}
			// The reserved slot becomes the promise in one step, so no
			// other looker sees it free in between.
			f.mu.Lock()
			h := f.lane(hostPort)
			h.taking--
			if err == nil && len(t.IDs) > 0 {
				h.promise(t.IDs, f.now())
				f.stir()
				h.sawLine(t, f.now(), f.tune.HandOverCheck)
			}
			f.mu.Unlock()
			if err != nil || len(t.IDs) == 0 {
				return
			}
			id = t.IDs[0]
		}
	}()
}
