package flow

// The flowControl parallelism: slots in Redis with leases, handed
// straight to the longest waiter on release. Its waiters wait in the
// key's line in Redis, shared by all workers, and nothing polls them: a
// release wakes the next, and a slot whose lease ended (its worker died)
// is handed on by any worker that knows the line, when that lease ends.

import (
	"context"
	"strconv"
	"time"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
)

// parGate is the parallelism gate: the parallelism lines this worker
// knows (under core.mu). It reads a destination's mean attempt (fair) for a
// waiter's safety net, and an operator's pin (operator) for a slot left.
type parGate struct {
	*core
	parLines map[string]*parLine
	fair     *fairGate
	operator *operatorGate
}

// parLine is a key's parallelism line as this worker knows it: one that
// may hold waiters.
type parLine struct {
	parallelism int
	// next is when its earliest lease ends: a slot may free then with no
	// release to hand it on (a worker died holding it, or a woken request
	// never came).
	next time.Time
	// listed is when this worker last listed the line in
	// keys.Lines.
	listed time.Time
}

// enter runs the parallelism gate: a request with parallelism
// takes one of its key's slots, or waits in the key's line until a slot
// is handed to it.
func (pg *parGate) enter(ctx context.Context, t *Ticket) error {
	if t.req.Parallelism <= 0 {
		return nil
	}
	until, ok, err := pg.acquire(ctx, t.req, t.start)
	if err != nil {
		return err
	}
	if !ok {
		return &Parked{Until: until, Reason: keys.WaitingParallelism}
	}
	t.global = true
	return nil
}

// exit gives the slot back, handing it to the longest waiter.
func (pg *parGate) exit(ctx context.Context, t *Ticket, _ ending) {
	if t.global {
		pg.release(ctx, t.req, t.req.ID)
	}
}

// missed gives back a slot handed to a request held by an
// earlier gate, and its place in the key's line (LeaveSlot): the endpoint,
// a pause or a queue may hold it for long, and its key's other requests
// may go meanwhile. One held by a gate that paces its destination or key
// (by.paces: a cut's or a rate's turn, a fair share) keeps both: the next
// request of its key (to the same destination) would wait for the same
// pace, and given the slot it would start first, out of its key's order. The slot is the request's
// when its turn comes; if that takes longer than HandOverLease, the lease
// ends and the slot is handed to it again, as the oldest waiter.
func (pg *parGate) missed(ctx context.Context, t *Ticket, by gate) {
	if by.paces {
		return
	}
	pg.leaveSlot(ctx, t.req)
}

// leaveSlot gives back the parallelism slot that may have been handed to
// a request that is not starting now, and its place in the key's line: it
// was woken for the slot, then an earlier gate held it, or it finished or
// was canceled while its task slept. Held, the slot would idle out its
// HandOverLease while the key's line waits. A request that waits keeps
// its place all the same: its place is when it was made.
func (pg *parGate) leaveSlot(ctx context.Context, req Request) {
	req = req.scoped()
	if req.Named {
		// An operator's pin (control.go) gives a key's requests slots
		// their own settings may not name.
		if pin := pg.operator.control(ctx, req.Key, pg.now()).PinParallelism; pin > 0 {
			req.Parallelism = pin
		}
	}
	if req.Parallelism > 0 {
		pg.release(ctx, req, req.ID)
	}
}

// acquire takes one of req's parallelism slots: ok, or until when its
// task sleeps unless woken (a release hands it the slot) first: a safety
// net only, twice its expected wait in the line.
func (pg *parGate) acquire(ctx context.Context, req Request, now time.Time) (until time.Time, ok bool, err error) {
	at := parPlace(req, now)
	r, err := pg.db.Par.Acquire(ctx, req.Key, req.ID, req.Parallelism, now,
		now.Add(req.Timeout+pg.tune.LeaseMargin), pg.tune.KeyTTL, now.Add(pg.tune.HandOverLease), at)
	if err != nil {
		return time.Time{}, false, err
	}
	if len(r.Woken) > 0 {
		pg.handOnLater(req.Key, req.Parallelism, r.Woken, nil)
	}
	if r.Taken {
		return time.Time{}, true, nil
	}
	pg.sawParLine(ctx, req.Key, req.Parallelism, r, true)
	pg.mu.Lock()
	mean := req.Timeout
	if h := pg.fair.hosts[req.HostPort]; h != nil && h.meanDur > 0 {
		mean = h.meanDur
	}
	pg.mu.Unlock()
	return now.Add(pg.tune.lineFallback(r.N, mean, req.Parallelism)), false, nil
}

// parPlace is req's place in its key's parallelism line: when it was
// made, so waiters start in the order they were accepted, however their
// first admissions raced.
func parPlace(req Request, now time.Time) time.Time {
	if req.Created.IsZero() {
		return now
	}
	return req.Created
}

// release gives back id's parallelism slot and wakes the requests the
// key's free slots are handed to.
func (pg *parGate) release(ctx context.Context, req Request, id string) {
	pg.handOn(context.WithoutCancel(ctx), req.Key, req.Parallelism, []string{id})
}

// handOn gives back the slots of ended (one "" hands on only the slots
// whose leases ended) and wakes the waiters the free slots go to; a slot
// handed to a request that is gone goes on to the next.
func (pg *parGate) handOn(ctx context.Context, key string, parallelism int, ended []string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; len(ended) > 0 && i < 100; i++ {
		now := pg.now()
		r, err := pg.db.Par.Next(ctx, key, ended[0], parallelism, now, now.Add(pg.tune.HandOverLease), pg.tune.KeyTTL)
		if err == nil {
			pg.sawParLine(ctx, key, parallelism, r, false)
			ended = append(ended[1:], pg.wakeHanded(ctx, key, parallelism, r.Woken)...)
			continue
		}
		// The lease ends the slot anyway, and a worker that knows the
		// line hands it on then.
		pg.log.Warn("could not hand on a flow-control slot; its lease will", "key", key, "err", err)
		return
	}
}

// wakeHanded wakes the requests of key handed a slot and returns those
// whose slots go on: the gone, and those that cannot be woken now. A
// request that cannot be woken (Redis could not say) would otherwise hold
// its slot
// for HandOverLease, and again at each lease's end, since its place is
// the oldest. It leaves the line instead, and is tried again in the
// background (wakeLater): woken, it comes back to its place.
func (pg *parGate) wakeHanded(ctx context.Context, key string, parallelism int, ids []string) (onIDs []string) {
	moves := make([]Move, len(ids))
	for i, id := range ids {
		moves[i] = Now(id)
	}
	a := pg.move(ctx, moves...)
	for _, id := range a.stalled {
		pg.wakeLater(key, parallelism, id)
	}
	return append(a.gone, a.stalled...)
}

// wakeLater tries again to wake id, which was handed a slot of key and
// could not be woken: it has left the line, and would otherwise sleep
// until its safety net. Woken, it comes back to its place in the line
// (when it was made), so it loses none.
func (pg *parGate) wakeLater(key string, parallelism int, id string) {
	pg.wakes.Add(1)
	go func() {
		defer pg.wakes.Done()
		for end := pg.now().Add(pg.tune.StalledWakeFor); pg.now().Before(end); {
			if pg.sleep(pg.stop, pg.tune.StalledWakeEvery) != nil {
				return
			}
			if len(pg.move(pg.stop, Now(id)).stalled) == 0 {
				return
			}
		}
	}()
}

// handOnLater, in the background, wakes the requests handed a slot
// (woken) and hands on the slots of ended (see handOn).
func (pg *parGate) handOnLater(key string, parallelism int, woken, ended []string) {
	pg.wakes.Add(1)
	go func() {
		defer pg.wakes.Done()
		ended = append(ended, pg.wakeHanded(pg.stop, key, parallelism, woken)...)
		if len(ended) > 0 {
			pg.handOn(pg.stop, key, parallelism, ended)
		}
	}()
}

// sawParLine remembers what a parallelism script said of key's line:
// while it holds waiters, this worker lists it and looks at its leases
// when the earliest ends; once empty, it forgets and unlists it. parked
// says a request of this worker just joined it.
func (pg *parGate) sawParLine(ctx context.Context, key string, parallelism int, r flowdb.ParReply, parked bool) {
	pg.mu.Lock()
	l := pg.parLines[key]
	if r.N == 0 {
		delete(pg.parLines, key)
		pg.mu.Unlock()
		if l != nil {
			pg.unlistLine(ctx, keys.LinePar, key)
		}
		return
	}
	known := l != nil
	if !known {
		l = &parLine{}
		pg.parLines[key] = l
	}
	l.parallelism, l.next = parallelism, r.First
	if l.next.IsZero() {
		l.next = pg.now().Add(pg.tune.AdoptEvery)
	}
	pg.stir()
	pg.mu.Unlock()
	if !known || (parked && r.N == 1) {
		pg.listParLine(ctx, key, parallelism)
	}
}

// listParLine lists key's parallelism line in keys.Lines.
func (pg *parGate) listParLine(ctx context.Context, key string, parallelism int) {
	pg.listLine(ctx, keys.LinePar, key, strconv.Itoa(parallelism), func(at time.Time) {
		if l := pg.parLines[key]; l != nil {
			l.listed = at
		}
	})
}

// pumpParLines hands on the slots of this worker's known parallelism
// lines whose earliest lease has ended, and lists again those it has not
// listed for AdoptEvery. Called by Rebalance.
func (pg *parGate) pumpParLines(ctx context.Context) {
	type due struct {
		key         string
		parallelism int
	}
	var look, relist []due
	pg.mu.Lock()
	now := pg.now()
	for key, l := range pg.parLines {
		if !now.Before(l.next) {
			look = append(look, due{key, l.parallelism})
			l.next = now.Add(pg.tune.AdoptEvery) // until the script says when
		}
		if now.Sub(l.listed) >= pg.tune.AdoptEvery {
			relist = append(relist, due{key, l.parallelism})
		}
	}
	pg.mu.Unlock()
	for _, d := range relist {
		pg.listParLine(ctx, d.key, d.parallelism)
	}
	for _, d := range look {
		pg.handOnLater(d.key, d.parallelism, nil, []string{""})
	}
}

// adoptParLines takes on the listed parallelism lines this worker does
// not know of; it looks at their leases at once. core.mu is held.
func (pg *parGate) adoptParLines(listed map[string]string, now time.Time) {
	for key, v := range listed {
		if pg.parLines[key] != nil {
			continue
		}
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			pg.log.Warn("a listed parallelism line has no parallelism; skipped", "key", key, "value", v)
			continue
		}
		pg.parLines[key] = &parLine{parallelism: p, next: now, listed: now}
	}
}
