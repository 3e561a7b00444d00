package flow

// Lines of cut keys: a request of a key that adaptive backpressure has
// cut waits in the key's line in Redis, shared by all workers, until a
// worker's cut rate gives it a turn. It is then started once, at that
// turn, by retryd's timer. Nothing looks at it meanwhile but the asynq
// safety net, once per its expected wait (at least ParkFallback).

import (
	"context"
	"time"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
	"golang.org/x/time/rate"
)

const (
	// CutBatch bounds the turns one worker gives a line per Rebalance.
	CutBatch = 50
)

// cutGate is the cut gate, adaptive backpressure: the flow-control keys'
// state on this worker (their cuts, counts and lines, under core.mu). A line
// drained at once reads its destination's fair slots (fair).
type cutGate struct {
	*core
	keys map[string]*key
	fair *fairGate
}

// wait admits req on its cut key (k, this worker's state): its turn if
// it was given one, else the turn this worker's rate offers while nobody
// waits, else a place in the key's line.
func (cg *cutGate) wait(ctx context.Context, k *key, req Request, now time.Time) (flowdb.CutAnswer, error) {
	cg.mu.Lock()
	var offer *rate.Reservation
	offerAt := int64(-1)
	if k.lim != nil && k.lineSeen.IsZero() {
		// Nobody waits, as far as this worker knows: offer a turn.
		cg.mu.Unlock()
		k.turns.Lock()
		defer k.turns.Unlock()
		cg.mu.Lock()
	}
	if k.lim != nil && k.lineSeen.IsZero() {
		offer = k.lim.ReserveN(now, 1)
		if d := offer.DelayFrom(now); d <= cg.tune.RateHorizon {
			offerAt = now.Add(max(d, 0)).UnixMilli()
		} else {
			offer.CancelAt(now)
			offer = nil
		}
	}
	cg.mu.Unlock()
	slept := false
	if d := time.UnixMilli(offerAt).Sub(now); offerAt >= 0 && d > 0 && d <= cg.tune.ShortWait {
		// Moments away: waiting it out costs less than a park.
		if err := cg.sleep(ctx, d); err != nil {
			cg.cancelOffer(offer, now)
			return flowdb.CutAnswer{}, err
		}
		now = time.UnixMilli(offerAt)
		slept = true
	}
	a, err := cg.db.Cut.Wait(ctx, req.Key, req.ID, now, cg.tune.TurnEarly, cg.tune.TurnGrace, offerAt, cg.tune.KeyTTL)
	if !a.Offered {
		cg.cancelOffer(offer, now)
	}
	if err == nil && a.Start && slept {
		a.At = now // the offer it waited out
	}
	if err == nil && !a.Start && a.At.IsZero() {
		cg.mu.Lock()
		list := k.lineSeen.IsZero() || a.Ahead == 0 // new here, or a new line
		k.lineSeen = now
		cg.stir()
		cg.mu.Unlock()
		if list {
			cg.listCutLine(ctx, k, req.Key, req.HostPort)
		}
	}
	return a, err
}

// enter runs the cut gate: it takes the request's key's state here
// (which counts the key's attempts in flight), and while adaptive
// backpressure has cut the key, passes a request only at its turn of the
// cut rate; before it, the request sleeps until its turn (the timer
// starts it) or waits in the key's line for one.
func (cg *cutGate) enter(ctx context.Context, t *Ticket) error {
	req, now := t.req, t.start
	cg.mu.Lock()
	k := cg.keyOf(req, now)
	t.k = k
	cut := cg.cfg.Adaptive && k.lim != nil
	var perSecond float64
	if cut {
		perSecond = float64(k.lim.Limit())
	} else {
		k.inflight++
	}
	cg.mu.Unlock()
	if cut {
		a, err := cg.wait(ctx, k, req, now)
		if err != nil {
			return err
		}
		if !a.Start {
			if a.At.IsZero() {
				return &Parked{Until: now.Add(cg.tune.cutFallback(a.Ahead, perSecond)), Reason: keys.WaitingRate}
			}
			t.moves = append(t.moves, At(req.ID, a.At))
			return &Parked{Until: a.At, Reason: keys.WaitingRate, Starts: a.At}
		}
		t.start = cg.now()
		t.laterTurn(a.At)
		cg.mu.Lock()
		k.inflight++
		cg.mu.Unlock()
	}
	return nil
}

// exit gives back the key's count of attempts in flight, and teaches
// adaptive backpressure what an attempt that ran said of its key.
func (cg *cutGate) exit(_ context.Context, t *Ticket, e ending) {
	cg.mu.Lock()
	t.k.inflight--
	if e.started && e.outcome != NoCall {
		t.k.learn(cg.core, e.outcome, e.at)
	}
	cg.mu.Unlock()
}

// listCutLine lists key k's line (name, its destination hostPort).
func (cg *cutGate) listCutLine(ctx context.Context, k *key, name, hostPort string) {
	cg.listLine(ctx, keys.LineCut, name, hostPort, func(at time.Time) { k.listed = at })
}

// cancelOffer gives an unused turn back to the key's rate.
func (cg *cutGate) cancelOffer(r *rate.Reservation, now time.Time) {
	if r == nil {
		return
	}
	cg.mu.Lock()
	r.CancelAt(now)
	cg.mu.Unlock()
}

// cutFallback is the safety-net deadline of a waiter with ahead others
// in front of it, at this worker's cut rate: a line moving one place per
// turn (lineFallback).
func (t Tuning) cutFallback(ahead int, perSecond float64) time.Duration {
	if perSecond <= 0 {
		return t.ParkFallback
	}
	return t.lineFallback(ahead+1, time.Duration(float64(time.Second)/perSecond), 1)
}

// pumpCutLines gives the waiters of the cut lines this worker knows the
// turns its rates have free within RateHorizon; a key no longer cut here
// (recovered) drains its line as fast as fairness lets it.
func (cg *cutGate) pumpCutLines(ctx context.Context) {
	cg.mu.Lock()
	var names []string
	for name, k := range cg.keys {
		if !k.lineSeen.IsZero() {
			names = append(names, name)
		}
	}
	cg.mu.Unlock()
	for _, name := range names {
		cg.pumpCutLine(ctx, name)
	}
}

// pumpCutLine gives turns of one key's rate to its line's oldest waiters.
func (cg *cutGate) pumpCutLine(ctx context.Context, name string) {
	cg.mu.Lock()
	k := cg.keys[name]
	cg.mu.Unlock()
	if k == nil {
		return
	}
	k.turns.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			k.turns.Unlock()
		}
	}
	defer unlock()
	var turns []time.Time
	var rs []*rate.Reservation
	cg.mu.Lock()
	now := cg.now()
	// The line's first waiter (a retry) may start later than any turn
	// there is to give: look again then, or within HeadRecheck (another
	// worker may have lined an earlier one).
	notYet := !k.headAt.IsZero() && now.Add(cg.tune.RateHorizon).Before(k.headAt) && now.Sub(k.pumped) < cg.tune.HeadRecheck
	switch {
	case now.Sub(k.lineSeen) > cg.tune.KeyTTL:
		k.lineSeen = time.Time{} // the line has expired
	case notYet:
	case k.lim != nil:
		for len(turns) < CutBatch {
			r := k.lim.ReserveN(now, 1)
			d := r.DelayFrom(now)
			if d > cg.tune.RateHorizon {
				r.CancelAt(now)
				break
			}
			rs = append(rs, r)
			turns = append(turns, now.Add(max(d, 0)))
		}
	default:
		// Recovered here: as many as the destination has fair slots free
		// (counting those promised to waiters given turns, not yet back).
		free := CutBatch
		if h := cg.fair.hosts[k.spec.HostPort]; h != nil {
			free = min(free, h.freeSlots(cg.FairCap(), now, cg.tune.WakeTTL))
		}
		for range free {
			turns = append(turns, now)
		}
	}
	relist := !k.lineSeen.IsZero() && now.Sub(k.listed) >= cg.tune.AdoptEvery
	cg.mu.Unlock()
	if relist {
		cg.listCutLine(ctx, k, name, k.spec.HostPort)
	}
	if len(turns) == 0 {
		return
	}
	given, left, head, err := cg.giveTurns(ctx, name, turns)
	if err != nil {
		cg.log.Warn("could not give turns of a cut key's line; its waiters' deadlines will wake them", "key", name, "err", err)
	}
	used := make([]bool, len(turns))
	for _, g := range given {
		used[g.Turn] = true
	}
	cg.mu.Lock()
	for i := len(rs) - 1; i >= 0; i-- {
		if !used[i] {
			rs[i].CancelAt(now) // latest first, so each gives its turn back
		}
	}
	unlock() // the reservations not given are canceled
	k.pumped = now
	if len(rs) == 0 && len(given) > 0 {
		// Drained at once: they hold the destination's free slots here
		// until fetched, as fairness' woken waiters do, so the next round
		// does not give the same slots again.
		h := cg.fair.hosts[k.spec.HostPort]
		if h == nil {
			h = &host{}
			cg.fair.hosts[k.spec.HostPort] = h
		}
		ids := make([]string, len(given))
		for i, g := range given {
			ids[i] = g.ID
		}
		h.promise(ids, now)
	}
	if err == nil {
		k.headAt = head
		if left > 0 {
			k.lineSeen = now
		} else {
			k.lineSeen = time.Time{}
		}
	}
	cg.mu.Unlock()
	if err == nil && left == 0 {
		cg.unlistLine(ctx, keys.LineCut, name)
	}
	moves := make([]Move, len(given))
	for i, g := range given {
		moves[i] = At(g.ID, turns[g.Turn])
	}
	cg.move(ctx, moves...)
}

// giveTurns gives turns to the oldest waiters of key's line, in order,
// each at or after its place: given are the ids and their turns' indexes;
// head is the next waiter's place (zero: none).
func (cg *cutGate) giveTurns(ctx context.Context, key string, turns []time.Time) (given []flowdb.GivenTurn, left int, head time.Time, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return cg.db.Cut.Next(ctx, key, turns, cg.tune.KeyTTL)
}

// lineRetry puts a retry of req, due at due, straight in its key's line
// when the key is cut on this worker: it is given a turn at or after due,
// without first coming back through asynq to join the line. ok says it
// joined; until is then its asynq safety-net deadline.
func (cg *cutGate) lineRetry(ctx context.Context, req Request, due time.Time) (until time.Time, ok bool) {
	req = req.scoped()
	cg.mu.Lock()
	k := cg.keys[req.Key]
	cut := cg.cfg.Adaptive && k != nil && k.lim != nil
	var perSecond float64
	if cut {
		perSecond = float64(k.lim.Limit())
	}
	cg.mu.Unlock()
	if !cut {
		return time.Time{}, false
	}
	ahead, err := cg.db.Cut.Join(ctx, req.Key, req.ID, due, cg.tune.KeyTTL)
	if err != nil {
		cg.log.Warn("could not put a retry in its cut key's line", "requestId", req.ID, "err", err)
		return time.Time{}, false
	}
	now := cg.now()
	cg.mu.Lock()
	list := k.lineSeen.IsZero() || ahead == 0
	k.lineSeen = now
	cg.stir()
	if k.headAt.IsZero() || due.Before(k.headAt) {
		k.headAt = due
	}
	k.parked++
	cg.mu.Unlock()
	if list {
		cg.listCutLine(ctx, k, req.Key, req.HostPort)
	}
	return due.Add(cg.tune.cutFallback(ahead, perSecond)), true
}
