package flow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// discard is a log nobody reads.
var discard = slog.New(slog.DiscardHandler)

// errWakeFailed is a wake the owner could not make (Redis down).
var errWakeFailed = errors.New("redis: connection refused")

// errGone is the fake owner's answer for a request with no waiting task.
var errGone = errors.New("no parked task")

// waker records wake-ups; ids in gone are gone.
type waker struct {
	mu    sync.Mutex
	woken []string
	gone  map[string]bool
	// fetched are woken requests whose tasks a worker took (all others
	// still wait to be fetched).
	fetched map[string]bool
	// ats are the timed wake-ups asked for, by id.
	ats map[string]time.Time
	// failing answers an error (Redis could not say) to that many
	// wake-ups of an id.
	failing map[string]int
}

// WakeAt wakes id at at, as retryd's timer would.
func (w *waker) WakeAt(_ context.Context, id string, at time.Time) error {
	w.mu.Lock()
	if w.ats == nil {
		w.ats = map[string]time.Time{}
	}
	w.ats[id] = at
	w.mu.Unlock()
	time.AfterFunc(time.Until(at), func() { _ = w.Wake(context.Background(), id) })
	return nil
}

func (w *waker) Pending(_ context.Context, id string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.fetched[id] && !w.gone[id], nil
}

func (w *waker) fetch(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fetched == nil {
		w.fetched = map[string]bool{}
	}
	w.fetched[id] = true
}

func (w *waker) Wake(_ context.Context, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone[id] {
		return errGone
	}
	if w.failing[id] > 0 {
		w.failing[id]--
		return errWakeFailed
	}
	w.woken = append(w.woken, id)
	return nil
}

// WakeParked wakes id if it sleeps in a park: neither gone, nor fetched,
// nor woken already.
func (w *waker) WakeParked(_ context.Context, id string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone[id] || w.fetched[id] || slices.Contains(w.woken, id) {
		return false, nil
	}
	w.woken = append(w.woken, id)
	return true, nil
}

// Apply makes moves as the owner would: timed ones at their time, ParkedOnly
// ones only when parked.
func (w *waker) Apply(ctx context.Context, moves []Move) []Result {
	res := make([]Result, len(moves))
	for i, m := range moves {
		switch {
		case !m.At.IsZero():
			res[i].Err = w.WakeAt(ctx, m.ID, m.At)
		case m.ParkedOnly:
			woke, err := w.WakeParked(ctx, m.ID)
			res[i] = Result{Gone: !woke && err == nil, Err: err}
		default:
			err := w.Wake(ctx, m.ID)
			res[i] = Result{Gone: errors.Is(err, errGone)}
			if !res[i].Gone {
				res[i].Err = err
			}
		}
	}
	return res
}

func (w *waker) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.woken)
}

func newController(t *testing.T, rdb redis.UniversalClient, cfg Config, w *waker, clk *clock.Fake) *Controller {
	t.Helper()
	c := New(cfg, rdb, w, slog.New(slog.NewTextHandler(io.Discard, nil)), clk)
	t.Cleanup(c.Close)
	return c
}

func waitWoken(t *testing.T, w *waker, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(w.got(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("woken %v, want %v", w.got(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func admit(t *testing.T, c *Controller, req Request) *Ticket {
	t.Helper()
	tk, err := c.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("Admit(%s) = %v, want a ticket", req.ID, err)
	}
	return tk
}

func parked(t *testing.T, c *Controller, req Request) time.Time {
	t.Helper()
	_, err := c.Admit(context.Background(), req)
	var p *Parked
	if !errors.As(err, &p) {
		t.Fatalf("Admit(%s) = %v, want Parked", req.ID, err)
	}
	return p.Until
}

// One destination holds at most half of a worker's slots; the next
// request to it parks, and a finished attempt wakes the longest waiter.
// Another destination is not held back.
func TestFairnessCapsOneDestinationAtHalfTheSlots(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 4, FairShare: 0.5}, w, clk)
	slow := func(id string) Request {
		return Request{ID: id, HostPort: "slow:443", Key: "slow:443", Timeout: time.Second}
	}
	a, b := admit(t, c, slow("a")), admit(t, c, slow("b"))
	if until := parked(t, c, slow("c")); !until.Equal(clk.Now().Add(DefaultTuning.ParkFallback)) {
		t.Errorf("parked until %v, want the fallback %v", until, clk.Now().Add(DefaultTuning.ParkFallback))
	}
	parked(t, c, slow("d"))
	parked(t, c, slow("c")) // parked again: still one place in line
	other := admit(t, c, Request{ID: "x", HostPort: "fast:443", Key: "fast:443"})
	other.Done(context.Background(), Succeeded)
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"c"})
	b.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"c", "d"})
}

// Fairness between tenants: while another tenant is about, one tenant
// spreading its requests over several destinations holds at most its
// share of the slots; another tenant's request starts at once; a freed
// slot of the tenant goes to its longest waiter, whatever its
// destination.
func TestTenantShareCapsOneTenantOverAllItsDestinations(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 8, FairShare: 0.5, TenantShare: 0.5}, w, clk)
	flood := func(id string, host int) Request {
		hp := fmt.Sprintf("slow-%d:443", host)
		return Request{ID: id, HostPort: hp, Key: hp, Tenant: "flooder", Timeout: time.Second}
	}
	quiet := func(id string) Request {
		return Request{ID: id, HostPort: "slow-0:443", Key: "slow-0:443", Tenant: "quiet"}
	}
	admit(t, c, quiet("q0")).Done(context.Background(), Succeeded) // the other tenant is about
	var held []*Ticket
	for i := range 4 { // four destinations, one each: the tenant's 4 of 8 slots
		held = append(held, admit(t, c, flood(fmt.Sprint("f", i), i)))
	}
	parked(t, c, flood("f4", 4)) // a fifth destination: the tenant is at its share
	clk.Add(time.Millisecond)
	parked(t, c, flood("f5", 5))
	admit(t, c, quiet("q1")).Done(context.Background(), Succeeded)
	held[0].Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"f4"})
	held[1].Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"f4", "f5"})
	off := newController(t, redistest.Start(t).Client(), Config{Concurrency: 8, FairShare: 0.5}, w, clk)
	for i := range 6 {
		admit(t, off, flood(fmt.Sprint("n", i), i)) // without TenantShare: no tenant cap
	}
}

// A tenant alone holds the slots its destinations may: the tenant share
// applies once another tenant is about, learnt from the tenants stamped on
// the requests admitted here or listed in Redis (one that stored a request
// through any API), with no API keys on the worker.
func TestTenantShareAppliesOnceAnotherTenantIsAbout(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := Config{Concurrency: 8, FairShare: 0.5, TenantShare: 0.5}
	flood := func(id string, host int) Request {
		hp := fmt.Sprintf("slow-%d:443", host)
		return Request{ID: id, HostPort: hp, Key: hp, Tenant: "flooder", Timeout: time.Second}
	}
	alone := newController(t, rdb, cfg, &waker{}, clk)
	for i := range 6 {
		admit(t, alone, flood(fmt.Sprint("a", i), i)) // no other tenant: no tenant cap
	}

	// Another worker, with no request of another tenant yet: Redis lists
	// the tenants that stored requests.
	if err := rdb.SAdd(context.Background(), keys.Tenants, "flooder", "quiet").Err(); err != nil {
		t.Fatal(err)
	}
	c := newController(t, rdb, cfg, &waker{}, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Rebalance(ctx) // learns the tenants Redis lists at once
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		learnt := len(c.fair.tenantsListed) == 2
		c.mu.Unlock()
		if learnt {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not learn the tenants Redis lists")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 4 {
		admit(t, c, flood(fmt.Sprint("f", i), i))
	}
	parked(t, c, flood("f4", 4))
}

// Tenants take turns in a destination's line: while one tenant's flood
// waits in it, another tenant's request is the next to get a slot, not
// the last, and takes it; each tenant's own requests keep their arrival
// order.
func TestTenantsTakeTurnsInADestinationsLine(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	// No tenant share: the destination's line alone must be fair.
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 4, FairShare: 0.5}, w, clk)
	req := func(id, tenant string) Request {
		return Request{ID: id, HostPort: "slow:443", Key: "slow:443", Tenant: tenant, Timeout: time.Second}
	}
	held := []*Ticket{admit(t, c, req("f00", "flooder")), admit(t, c, req("f01", "flooder"))}
	for i := 2; i < 40; i++ {
		parked(t, c, req(fmt.Sprintf("f%02d", i), "flooder"))
		clk.Add(time.Millisecond)
	}
	parked(t, c, req("q0", "quiet"))
	parked(t, c, req("q1", "quiet"))
	held[0].Done(context.Background(), Succeeded)
	held[1].Done(context.Background(), Succeeded)
	// Turns: the flood's first waiter had the line first, then one each
	// (woken in the background: in either order).
	deadline := time.Now().Add(5 * time.Second)
	for woken := w.got(); len(woken) < 2 || !slices.Contains(woken, "q0"); woken = w.got() {
		if time.Now().After(deadline) || len(woken) > 2 {
			t.Fatalf("woken %v, want f02 and q0", woken)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if woken := w.got(); !slices.Contains(woken, "f02") {
		t.Fatalf("woken %v, want f02 and q0", woken)
	}
	admit(t, c, req("f02", "flooder"))
	admit(t, c, req("q0", "quiet"))
	got, err := c.fair.nextInLine(context.Background(), "slow:443", "", 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"f03", "q1", "f04", "f05", "f06"}; !slices.Equal(got.IDs, want) {
		t.Errorf("next in line %v, want %v", got.IDs, want)
	}
}

// While another tenant is about, one tenant holds at most its share of a
// destination's slots, and while it is alone all of them but one: another tenant's requests to a destination it
// floods start at once, without waiting for one of the flood's attempts
// to end. The flood waits in its own line there, and a freed slot of its
// goes to its next waiter.
func TestTenantLeavesAShareOfAFloodedDestinationFree(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	// The destination's share: 4 slots; a tenant's share of it: 2.
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 8, FairShare: 0.5, TenantShare: 0.5}, w, clk)
	req := func(id, tenant string) Request {
		return Request{ID: id, HostPort: "slow:443", Key: "slow:443", Tenant: tenant, Timeout: time.Second}
	}
	admit(t, c, req("q-", "quiet")).Done(context.Background(), Succeeded) // the quiet tenant is about
	held := []*Ticket{admit(t, c, req("f0", "flooder")), admit(t, c, req("f1", "flooder"))}
	for i := 2; i < 10; i++ {
		parked(t, c, req(fmt.Sprint("f", i), "flooder"))
		clk.Add(time.Millisecond)
	}
	admit(t, c, req("q0", "quiet"))
	admit(t, c, req("q1", "quiet"))
	held[0].Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"f2"})
	admit(t, c, req("f2", "flooder"))
	// A lone tenant (the other not about) may use the destination's share
	// but one slot, which another tenant's first request takes at once.
	alone := newController(t, redistest.Start(t).Client(), Config{Concurrency: 8, FairShare: 0.5, TenantShare: 0.5}, &waker{}, clk)
	for i := range 3 {
		admit(t, alone, req(fmt.Sprint("a", i), "flooder"))
	}
	parked(t, alone, req("a3", "flooder"))
	admit(t, alone, req("fresh", "newcomer"))
	parked(t, alone, req("fresh2", "newcomer")) // the destination's share is full
	// A deployment without tenants keeps every slot: no other tenant comes.
	untenanted := newController(t, redistest.Start(t).Client(), Config{Concurrency: 8, FairShare: 0.5, TenantShare: 0.5}, &waker{}, clk)
	for i := range 4 {
		admit(t, untenanted, req(fmt.Sprint("d", i), ""))
	}
	parked(t, untenanted, req("d4", ""))
}

// A line made before tenants took turns in it (places in ms) keeps its
// order: a newcomer comes after every waiter already in it.
func TestFairLineOfBeforeTurnsKeepsItsOrder(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	c := newController(t, rdb, Config{Concurrency: 2, FairShare: 0.5}, &waker{}, clock.NewFake(time.UnixMilli(1_700_000_000_000)))
	ctx := context.Background()
	line := flowdb.FairNames("h:80")[0]
	if err := rdb.ZAdd(ctx, line, redis.Z{Score: 1_700_000_000_002, Member: "old2"}, redis.Z{Score: 1_700_000_000_001, Member: "old1"}).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.fair.waitInLine(ctx, "h:80", "new", "other"); err != nil || n != 3 {
		t.Fatalf("waitInLine = %d, %v; want 3 in line", n, err)
	}
	got, err := c.fair.nextInLine(ctx, "h:80", "", 3)
	if err != nil || !slices.Equal(got.IDs, []string{"old1", "old2", "new"}) {
		t.Fatalf("nextInLine = %+v, %v; want old1, old2, new", got, err)
	}
}

// A waiter that is gone (canceled) does not take the wake-up: the next
// one does.
func TestFairnessSkipsAGoneWaiter(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{gone: map[string]bool{"b": true}}
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 2, FairShare: 0.5}, w, clk)
	req := func(id string) Request { return Request{ID: id, HostPort: "h:80", Key: "h:80"} }
	a := admit(t, c, req("a"))
	parked(t, c, req("b"))
	parked(t, c, req("c"))
	a.Done(context.Background(), Other)
	waitWoken(t, w, []string{"c"})
}

// Parallelism holds across workers: two controllers on one Redis never
// let more than 2 attempts of the key run, a released slot goes straight
// to the longest waiter (a newcomer cannot take it), and that waiter then
// starts on any worker.
func TestParallelismHoldsAcrossWorkersAndHandsSlotsOver(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	cfg := Config{Concurrency: 100, FairShare: 1}
	w1, w2 := newController(t, rdb, cfg, w, clk), newController(t, rdb, cfg, w, clk)
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "tenant-1", Parallelism: 2, Timeout: 10 * time.Second}
	}
	a, _ := admit(t, w1, req("a")), admit(t, w2, req("b"))
	until := parked(t, w1, req("c"))
	if want := clk.Now().Add(DefaultTuning.ParkFallback); !until.Equal(want) {
		t.Errorf("parked until %v, want the safety net %v (nothing polls a waiter)", until, want)
	}
	if len(w.ats) > 0 {
		t.Errorf("timers %v set for a parallelism waiter, want none", w.ats)
	}
	clk.Add(time.Millisecond)
	parked(t, w2, req("d"))
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"c"})
	parked(t, w1, req("newcomer")) // the slot is c's
	admit(t, w2, req("c"))         // c starts on the other worker
	parked(t, w1, req("d"))
	if taken, waiting, err := Slots(context.Background(), rdb, "tenant-1", clk.Now()); err != nil || taken != 2 || waiting != 2 {
		t.Errorf("Slots = %d taken, %d waiting, %v; want 2, 2", taken, waiting, err)
	}
}

// oneSlot is a parallelism-1 key "k" on one controller over a fresh
// Redis, woken through w: the setting of most parallelism tests.
func oneSlot(t *testing.T, w *waker) (c *Controller, clk *clock.Fake, rdb redis.UniversalClient, req func(id string) Request) {
	t.Helper()
	rdb = redistest.Start(t).Client()
	clk = clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c = newController(t, rdb, Config{Concurrency: 10, FairShare: 1}, w, clk)
	req = func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "k", Parallelism: 1, Timeout: time.Second}
	}
	return c, clk, rdb, req
}

// A request handed a slot that its key's cut (or rate, or fairness) then
// makes wait keeps the slot and its place: d, made after it, would wait
// for the same cut, and given the slot it would start first. When the
// handed slot's lease ends, the slot goes to b again, the oldest.
func TestPacedRequestKeepsItsHandedSlot(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(t0)
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 10, FairShare: 1, Adaptive: true, MinRate: 1}, w, clk)
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "k", Parallelism: 1, Timeout: time.Second}
	}
	ctx := context.Background()
	a := admit(t, c, req("a"))
	parked(t, c, req("b"))
	clk.Add(time.Millisecond)
	parked(t, c, req("d"))
	// The key is cut with no turn to give for a long while.
	cut(c, req("a"), 0.001)
	c.mu.Lock()
	c.cut.keys["k"].lim.ReserveN(clk.Now(), 1)
	c.mu.Unlock()
	a.Done(ctx, Other)
	waitWoken(t, w, []string{"b"}) // b is handed a's slot ...
	parked(t, c, req("b"))         // ... and waits for its cut key's turn
	if got := w.got(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("woken %v, want b alone: its slot is kept for it", got)
	}
	if taken, waiting, err := Slots(ctx, rdb, "k", clk.Now()); err != nil || taken != 1 || waiting != 1 {
		t.Errorf("Slots = %d taken, %d waiting, %v; want 1 (b's), 1 (d)", taken, waiting, err)
	}
	if _, err := rdb.ZScore(ctx, keys.Flow("k", "handed"), "b").Result(); err != nil {
		t.Errorf("b is no longer handed its slot: %v", err)
	}
	clk.Add(DefaultTuning.HandOverLease + time.Millisecond)
	c.par.pumpParLines(ctx)
	waitWoken(t, w, []string{"b", "b"})
}

// A slot handed to a request that is gone goes on to the next waiter.
func TestParallelismHandOverSkipsGoneRequests(t *testing.T) {
	t.Parallel()
	w := &waker{gone: map[string]bool{"b": true}}
	c, clk, _, req := oneSlot(t, w)
	a := admit(t, c, req("a"))
	parked(t, c, req("b"))
	clk.Add(time.Millisecond)
	parked(t, c, req("c"))
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"c"})
	admit(t, c, req("c"))
}

// A worker that dies holding a slot: when its lease ends, a live worker
// that never saw the line (it adopts it from the registry) hands the slot
// to the longest waiter and wakes it; a newcomer does not overtake the
// line, not even while nobody has handed the slot on yet; and the waiters
// start in arrival order.
func TestParallelismLeaseEndsTheSlotOfADeadWorker(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	cfg := Config{Concurrency: 10, FairShare: 1}
	dead, live := newController(t, rdb, cfg, w, clk), newController(t, rdb, cfg, w, clk)
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "k", Parallelism: 1, Timeout: time.Second}
	}
	admit(t, dead, req("dead")) // never Done
	for _, id := range []string{"b", "c", "d"} {
		parked(t, dead, req(id))
		clk.Add(time.Millisecond)
	}
	live.adoptLines(context.Background())
	live.par.pumpParLines(context.Background())
	parked(t, live, req("newcomer"))
	if got := w.got(); len(got) > 0 {
		t.Fatalf("woken %v while the lease holds, want none", got)
	}

	clk.Add(time.Second + DefaultTuning.LeaseMargin)
	live.par.pumpParLines(context.Background())
	waitWoken(t, w, []string{"b"})
	parked(t, live, req("newcomer")) // the slot is b's
	tb := admit(t, live, req("b"))
	tb.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"b", "c"})

	// A lease that ends with nobody to hand it on: the next admission
	// hands it to the longest waiter, not to itself.
	admit(t, live, req("c")) // never Done
	clk.Add(time.Second + DefaultTuning.LeaseMargin + time.Millisecond)
	parked(t, live, req("late"))
	waitWoken(t, w, []string{"b", "c", "d"})
	td := admit(t, dead, req("d"))
	td.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"b", "c", "d", "newcomer"})
	tn := admit(t, live, req("newcomer"))
	tn.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"b", "c", "d", "newcomer", "late"})
	tl := admit(t, live, req("late"))
	tl.Done(context.Background(), Succeeded)

	// The line is empty: it is unlisted, and no worker looks at it.
	if n, err := listed(context.Background(), rdb, keys.LinePar); err != nil || n != 0 {
		t.Errorf("lines listed: %d, %v; want 0", n, err)
	}
}

// A request handed a slot that cannot be woken for a while (Redis
// could not say) gives the slot to the
// next waiter at once, instead of holding it for HandOverLease; it is
// woken once it can be, and is back at its place, first in line.
func TestParallelismWakesAStalledHandOverLater(t *testing.T) {
	t.Parallel()
	w := &waker{failing: map[string]int{"b": 3}}
	c, clk, _, slot := oneSlot(t, w)
	made := map[string]int{"a": 0, "b": 1, "c": 2, "d": 3}
	req := func(id string) Request { // made in this order
		r := slot(id)
		r.Created = time.UnixMilli(1_700_000_000_000 + int64(made[id]))
		return r
	}
	a := admit(t, c, req("a"))
	parked(t, c, req("b"))
	clk.Add(time.Millisecond)
	parked(t, c, req("c"))
	clk.Add(time.Millisecond)
	parked(t, c, req("d"))
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"c"}) // b's slot went on
	tc := admit(t, c, req("c"))
	// wakeLater's tries, every second.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(w.got(), []string{"c", "b"}) {
		if time.Now().After(deadline) {
			t.Fatalf("woken %v after %v of tries, want c, b", w.got(), clk.Now().Sub(time.UnixMilli(1_700_000_000_000)))
		}
		clk.Add(20 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	parked(t, c, req("b")) // c holds the slot; b waits, ahead of d
	tc.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"c", "b", "b"})
	admit(t, c, req("b"))
}

// A worker that dies between handing a slot to a waiter and waking it: the
// waiter has left the line, so when the handed slot's lease ends unused,
// it goes back to its place, and a live worker hands it the slot again
// and wakes it (it would otherwise sleep until its safety net).
func TestParallelismHandOverOutlivesTheWorkerThatHandedIt(t *testing.T) {
	t.Parallel()
	w := &waker{}
	c, clk, rdb, req := oneSlot(t, w)
	admit(t, c, req("a"))
	parked(t, c, req("b"))
	clk.Add(time.Millisecond)
	parked(t, c, req("c"))
	// a's worker gives back a's slot, hands it to b, and dies.
	now := clk.Now()
	if _, err := flowdb.New(rdb).Par.Next(context.Background(), "k", "a", 1, now, now.Add(DefaultTuning.HandOverLease), DefaultTuning.KeyTTL); err != nil {
		t.Fatal(err)
	}
	clk.Add(DefaultTuning.HandOverLease + time.Millisecond)
	c.par.pumpParLines(context.Background())
	waitWoken(t, w, []string{"b"})
	admit(t, c, req("b")).Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"b", "c"})
}

// A parallelism line's order is the order the requests were made in, not
// that of their first admissions (two workers race to those).
func TestParallelismWaitersStartInTheOrderTheyWereMade(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 10, FairShare: 1}, w, clk)
	req := func(id string, made time.Duration) Request {
		return Request{ID: id, HostPort: "h:443", Key: "k", Parallelism: 1, Timeout: time.Second, Created: clk.Now().Add(made)}
	}
	a := admit(t, c, req("a", 0))
	parked(t, c, req("third", 3*time.Millisecond))
	parked(t, c, req("first", time.Millisecond))
	parked(t, c, req("second", 2*time.Millisecond))
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"first"})
	admit(t, c, req("first", time.Millisecond)).Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"first", "second"})
	admit(t, c, req("second", 2*time.Millisecond)).Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"first", "second", "third"})
}

// The rate is spaced evenly: with 2 per second the second start waits
// about half a second (and three percent), and its timer wakes it then.
func TestRateSpacesStarts(t *testing.T) {
	t.Parallel()
	w := &waker{}
	c := New(Config{Concurrency: 10, FairShare: 1}, redistest.Start(t).Client(), w, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Real)
	t.Cleanup(c.Close)
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "r", Rate: 2, Period: time.Second, Timeout: time.Second}
	}
	admit(t, c, req("a")).Done(context.Background(), Succeeded)
	start := time.Now()
	until := parked(t, c, req("b"))
	if d := until.Sub(start); d < 450*time.Millisecond || d > 540*time.Millisecond {
		t.Errorf("second start waits %v, want about 515ms", d)
	}
	waitWoken(t, w, []string{"b"})
	if time.Now().Before(until) {
		t.Errorf("woken %v before its turn", time.Until(until))
	}
}

// Each waiter of a rate gets its own turn once, in arrival order, kept for
// it across workers: coming back early it waits for the same turn (no new
// one, no herd), at its turn it starts. 10 per second: turns 103 ms apart.
func TestRateTurnsAreGivenOnceInArrivalOrder(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	one := newController(t, rdb, Config{Concurrency: 100, FairShare: 1}, &waker{}, clk)
	two := newController(t, rdb, Config{Concurrency: 100, FairShare: 1}, &waker{}, clk)
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "turns", Rate: 10, Period: time.Second, Timeout: time.Second}
	}
	t0 := clk.Now()
	const interval = 103 * time.Millisecond
	admit(t, one, req("a")).Done(context.Background(), Succeeded)
	turns := map[string]time.Time{}
	for i, id := range []string{"b", "c", "d"} {
		turns[id] = parked(t, one, req(id))
		if want := t0.Add(time.Duration(i+1) * interval); !turns[id].Equal(want) {
			t.Errorf("%s's turn at +%v, want +%v", id, turns[id].Sub(t0), want.Sub(t0))
		}
	}
	clk.Add(50 * time.Millisecond)
	if again := parked(t, two, req("c")); !again.Equal(turns["c"]) {
		t.Errorf("c back early on another worker: turn +%v, want its own +%v", again.Sub(t0), turns["c"].Sub(t0))
	}
	if e := parked(t, two, req("e")); !e.Equal(t0.Add(4 * interval)) {
		t.Errorf("a later arrival's turn +%v, want after d's (+%v)", e.Sub(t0), 4*interval)
	}
	clk.Add(turns["b"].Sub(clk.Now()))
	admit(t, two, req("b")).Done(context.Background(), Succeeded)
	clk.Add(turns["c"].Sub(clk.Now()) + 5*time.Millisecond)
	admit(t, one, req("c")).Done(context.Background(), Succeeded)
	// d comes back past its turn and the grace (30 ms): the turn is lost,
	// a new one is given at the back of the line.
	clk.Add(turns["d"].Sub(clk.Now()) + 40*time.Millisecond)
	if late := parked(t, one, req("d")); !late.Equal(t0.Add(5 * interval)) {
		t.Errorf("d, too late for its turn: new turn +%v, want +%v", late.Sub(t0), 5*interval)
	}
}

// Adaptive backpressure: overload cuts a key's rate by half (once per
// CutEvery), successes raise it additively, and it is lifted once back
// at the rate before the first cut.
func TestAdaptiveCutsAndRestores(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 100, FairShare: 1, Adaptive: true, MinRate: 1}, &waker{}, clk)
	req := Request{ID: "x", HostPort: "h:443", Key: "h:443"}
	var tickets []*Ticket
	for range 40 { // 40 starts in this second: the observed rate
		tickets = append(tickets, admit(t, c, req))
	}
	limit := func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if k := c.cut.keys["h:443"]; k.lim != nil {
			return float64(k.lim.Limit())
		}
		return 0
	}
	// A few overloaded answers are not a key under load: no cut.
	for _, tk := range tickets[:MinOverloads-1] {
		tk.Done(context.Background(), Overloaded)
	}
	if got := limit(); got != 0 {
		t.Fatalf("%d overloaded answers cut the rate to %v", MinOverloads-1, got)
	}
	tickets[MinOverloads-1].Done(context.Background(), Overloaded)
	if got := limit(); got != 20 {
		t.Fatalf("after %d overloaded answers in a second the rate is %v, want 20 (half of 40/s)", MinOverloads, got)
	}
	tickets[MinOverloads].Done(context.Background(), Overloaded) // same burst: no second cut
	if got := limit(); got != 20 {
		t.Errorf("a second overload within DefaultTuning.CutEvery cut again: %v", got)
	}
	clk.Add(DefaultTuning.CutEvery)
	tickets[MinOverloads+1].Done(context.Background(), Overloaded) // the last 2 s: 27 of 27 overloaded
	if got := limit(); got != 10 {
		t.Errorf("after a second overload the rate is %v, want 10", got)
	}
	tickets = tickets[MinOverloads+2:]
	// Requests beyond the rate park (the first may take the one turn
	// that accrued).
	if _, err := c.Admit(context.Background(), Request{ID: "y0", HostPort: "h:443", Key: "h:443"}); err == nil {
		parked(t, c, Request{ID: "y", HostPort: "h:443", Key: "h:443"})
	}
	// While most answers of the last seconds are overloaded, successes do
	// not raise it; once they are not, they do.
	tickets[0].Done(context.Background(), Succeeded)
	if got := limit(); got != 10 {
		t.Errorf("a success among overloads raised the rate to %v", got)
	}
	clk.Add(2 * time.Second)
	for _, tk := range tickets[:5] {
		tk.Done(context.Background(), Succeeded)
	}
	if got := limit(); got <= 10 || got >= 40 {
		t.Errorf("after 5 successes the rate is %v, want raised from 10 but below 40", got)
	}
	for i := 0; limit() != 0; i++ {
		if i > 1000 {
			t.Fatalf("the rate never recovered: %v", limit())
		}
		tickets[5].Done(context.Background(), Succeeded)
	}
	// Off: overloads cut nothing.
	off := newController(t, redistest.Start(t).Client(), Config{Concurrency: 100, FairShare: 1}, &waker{}, clk)
	for range 2 * MinOverloads {
		admit(t, off, req).Done(context.Background(), Overloaded)
	}
	admit(t, off, req)
}

// A cut key whose destination sheds 30 % of its answers at random is not
// cut again, however they cluster: a majority of a few answers is
// chance. Answers that are all overloaded cut it again, down to the floor.
func TestAdaptiveCutIgnoresChance(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(t0)
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 100, FairShare: 1, Adaptive: true, MinRate: 1}, &waker{}, clk)
	req := Request{ID: "x", HostPort: "h:443", Key: "h:443"}
	admit(t, c, req)
	limit := func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if k := c.cut.keys["h:443"]; k.lim != nil {
			return float64(k.lim.Limit())
		}
		return math.Inf(1) // recovered: no limit
	}
	c.mu.Lock()
	k := c.cut.keys["h:443"]
	k.base, k.lastCut = 100, t0 // cut from 100/s to 3/s
	k.lim = rate.NewLimiter(3, 1)
	c.mu.Unlock()
	tk := &Ticket{c: c, req: req, start: t0, k: k}
	answer := func(o Outcome) {
		c.mu.Lock()
		k.inflight++
		c.mu.Unlock()
		tk.Done(context.Background(), o)
	}
	// 3 answers a second for a minute: 3 overloaded in a row, then 7
	// good, so the windows of 3 to 6 answers that hold the three are
	// mostly overloaded.
	pattern := []Outcome{Overloaded, Overloaded, Overloaded, Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Succeeded}
	prev := limit()
	for i := range 3 * 60 {
		clk.Add(time.Second / 3)
		answer(pattern[i%len(pattern)])
		if got := limit(); got < prev {
			t.Fatalf("answer %d: 30 %% of answers overloaded cut the rate from %v to %v", i, prev, got)
		}
		prev = limit()
	}
	// All overloaded (8 to 16 answers in the window): cut once a second,
	// to the floor and no lower.
	c.mu.Lock()
	k.lim = rate.NewLimiter(8, 1)
	c.mu.Unlock()
	var steps []float64
	for range 8 * 10 {
		clk.Add(time.Second / 8)
		answer(Overloaded)
		if got := limit(); len(steps) == 0 || steps[len(steps)-1] != got {
			steps = append(steps, got)
		}
	}
	if !slices.Equal(steps, []float64{8, 4, 2, 1}) {
		t.Errorf("10 s of overloads stepped the rate %v, want 8, 4, 2, 1", steps)
	}
	// At a few answers a second, the answers since the last cut decide:
	// 7 overloaded in a row cut again (the 30 % above never did).
	clk.Add(3 * time.Second) // the last seconds' answers are gone
	c.mu.Lock()
	k.lim, k.cutOK, k.cutOver = rate.NewLimiter(2, 1), 0, 0
	c.mu.Unlock()
	for i := range 6 {
		clk.Add(time.Second)
		answer(Overloaded)
		if got := limit(); got != 2 {
			t.Fatalf("after %d overloaded answers, one a second, the rate is %v, want 2 still", i+1, got)
		}
	}
	clk.Add(time.Second)
	answer(Overloaded)
	if got := limit(); got != 1 {
		t.Errorf("after 7 overloaded answers, one a second, the rate is %v, want 1", got)
	}
}

// What workers publish is what GET /flows reads, summed over workers.
func TestPublishAndRead(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.Now())
	cfg := Config{Concurrency: 10, FairShare: 1}
	w1, w2 := newController(t, rdb, cfg, &waker{}, clk), newController(t, rdb, cfg, &waker{}, clk)
	req := Request{ID: "a", HostPort: "h:443", Key: "tenant", Parallelism: 5, Timeout: time.Second}
	admit(t, w1, req)
	req.ID = "b"
	admit(t, w2, req)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w1.Publish(ctx, "w1")
	go w2.Publish(ctx, "w2")
	deadline := time.Now().Add(5 * time.Second)
	for {
		clk.Add(DefaultTuning.PublishEvery)
		stats, err := Read(context.Background(), rdb, clk.Now())
		if err == nil && len(stats) == 1 && stats[0].InFlight == 2 {
			if s := stats[0]; s.Key != "tenant" || s.Parallelism != 5 {
				t.Errorf("read %+v", s)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Read = %+v, %v; want tenant with 2 in flight", stats, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A worker with no keys to show writes that once, then nothing: an idle
// worker makes no Redis calls to publish.
func TestIdleWorkerPublishesOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, rdb, Config{Concurrency: 10, FairShare: 1}, &waker{}, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Publish(ctx, "idle")
	deadline := time.Now().Add(5 * time.Second)
	var first float64
	for {
		clk.Add(DefaultTuning.PublishEvery)
		var err error
		if first, err = rdb.ZScore(ctx, keys.FlowWorkers, "idle").Result(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle worker never published that it has no keys")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Three more PublishEvery, each time given to publish (a worker that
	// publishes each would have moved its score).
	for range 3 {
		clk.Add(DefaultTuning.PublishEvery)
		time.Sleep(100 * time.Millisecond)
	}
	if at, err := rdb.ZScore(ctx, keys.FlowWorkers, "idle").Result(); err != nil || at != first {
		t.Fatalf("the idle worker published again (score %v, first %v, %v)", at, first, err)
	}
}

// A woken request may start on another worker; the slot it left free here
// still wakes the next waiter (Rebalance), instead of idling until the
// fallback deadline.
func TestRebalanceWakesWaitersOfFreeSlots(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 2, FairShare: 0.5}, w, clk)
	req := func(id string) Request { return Request{ID: id, HostPort: "h:80", Key: "h:80"} }
	a := admit(t, c, req("a"))
	for _, id := range []string{"b", "c", "d"} {
		parked(t, c, req(id))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Rebalance(ctx)
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"b"})
	// b holds the free slot for WakeTTL, so nothing else is woken (no
	// herd of wake-ups while b is on its way) ...
	for range 3 {
		clk.Add(DefaultTuning.RebalanceEvery)
		time.Sleep(DefaultTuning.RebalanceEvery)
	}
	waitWoken(t, w, []string{"b"})
	// ... but b never came back here (still waiting to be fetched after
	// WakeTTL): the slot goes to the next waiter ...
	clk.Add(DefaultTuning.WakeTTL)
	waitWoken(t, w, []string{"b", "c"})
	// ... and as soon as another worker fetched c, to the next one,
	// without waiting out WakeTTL.
	w.fetch("c")
	clk.Add(DefaultTuning.RebalanceEvery)
	waitWoken(t, w, []string{"b", "c", "d"})
}

// An idle worker's Rebalance rests until the next adoption; a waiter
// parked here stirs it. While the line's slots are all taken here it
// still rests (the end of their attempt promotes the next waiter itself);
// with a promise to watch, it looks every RebalanceEvery.
func TestRebalanceRestsUntilALineIsMade(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 2, FairShare: 0.5}, w, clk)
	if got := c.restFor(clk.Now()); got != DefaultTuning.AdoptEvery {
		t.Fatalf("an idle worker rests %v, want %v", got, DefaultTuning.AdoptEvery)
	}
	req := func(id string) Request { return Request{ID: id, HostPort: "h:80", Key: "h:80"} }
	a := admit(t, c, req("a"))
	parked(t, c, req("b"))
	select {
	case <-c.stirred:
	default:
		t.Fatal("a waiter parked on a resting worker did not stir its Rebalance")
	}
	if got := c.restFor(clk.Now()); got <= DefaultTuning.RebalanceEvery || got > DefaultTuning.AdoptEvery {
		t.Fatalf("a worker whose line's slots are all taken rests %v, want more than %v, at most %v", got, DefaultTuning.RebalanceEvery, DefaultTuning.AdoptEvery)
	}
	a.Done(context.Background(), Succeeded)
	waitWoken(t, w, []string{"b"})
	if got := c.restFor(clk.Now()); got != DefaultTuning.RebalanceEvery {
		t.Fatalf("a worker holding a promise rests %v, want %v", got, DefaultTuning.RebalanceEvery)
	}
}

func (w *waker) at(id string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ats[id]
}

// cut gives key a cut rate on c, as overloads would.
func cut(c *Controller, req Request, perSecond float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut.keyOf(req, c.now()).lim = rate.NewLimiter(rate.Limit(perSecond), 1)
}

// A cut key's requests beyond its rate's horizon wait in its line in
// Redis; each is given one turn, in arrival order, when the rate has one
// free, and starts at it on whichever worker fetches it. A request back
// too late has lost its turn and waits again at its old place.
func TestCutKeyGivesEachWaiterOneTurnInArrivalOrder(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(t0)
	w1, w2 := &waker{}, &waker{}
	cfg := Config{Concurrency: 100, FairShare: 1, Adaptive: true, MinRate: 1}
	c1, c2 := newController(t, rdb, cfg, w1, clk), newController(t, rdb, cfg, w2, clk)
	req := func(i int) Request { return Request{ID: fmt.Sprint("r", i), HostPort: "h:443", Key: "h:443"} }
	cut(c1, req(0), 1)
	cut(c2, req(0), 0.001)
	c2.mu.Lock()
	c2.cut.keys["h:443"].lim.ReserveN(t0, 1) // c2 has no turn to offer
	c2.mu.Unlock()
	ctx := context.Background()

	admit(t, c1, req(0)) // the one turn there is
	// Turns within the horizon are offered while nobody waits.
	for i := 1; i <= 5; i++ {
		if until := parked(t, c1, req(i)); !until.Equal(t0.Add(time.Duration(i) * time.Second)) {
			t.Errorf("r%d parked until +%v, want its turn +%ds", i, until.Sub(t0), i)
		}
		if at := w1.at(req(i).ID); !at.Equal(t0.Add(time.Duration(i) * time.Second)) {
			t.Errorf("r%d timer at +%v, want +%ds", i, at.Sub(t0), i)
		}
	}
	// Beyond it, they wait in line, with a safety net only.
	for i := 6; i <= 9; i++ {
		if until := parked(t, c1, req(i)); until.Sub(t0) < DefaultTuning.ParkFallback {
			t.Errorf("r%d in line parked until +%v, want at least the fallback %v", i, until.Sub(t0), DefaultTuning.ParkFallback)
		}
		if at := w1.at(req(i).ID); !at.IsZero() {
			t.Errorf("r%d in line has a timer at +%v", i, at.Sub(t0))
		}
	}
	c1.cut.pumpCutLines(ctx)
	if at := w1.at("r6"); !at.IsZero() {
		t.Fatalf("a turn beyond the horizon was given: r6 at +%v", at.Sub(t0))
	}
	// Its worker's Rebalance looks every RebalanceEvery while it knows of
	// the line.
	if got := c1.restFor(t0); got != DefaultTuning.RebalanceEvery {
		t.Errorf("with a cut line, Rebalance rests %v, want %v", got, DefaultTuning.RebalanceEvery)
	}
	clk.Add(2 * time.Second)
	c1.cut.pumpCutLines(ctx)
	for i, want := range map[int]time.Duration{6: 6 * time.Second, 7: 7 * time.Second, 8: 0} {
		if at := w1.at(req(i).ID); (want == 0) != at.IsZero() || (want > 0 && !at.Equal(t0.Add(want))) {
			t.Errorf("after 2 s, r%d's turn is at %v (+%v), want +%v", i, at, at.Sub(t0), want)
		}
	}
	// The other worker starts a turn given here, at its time ...
	clk.Add(4 * time.Second) // +6 s
	if until := parked(t, c2, req(7)); !until.Equal(t0.Add(7 * time.Second)) {
		t.Errorf("r7 back a second early parked until +%v, want its turn +7s", until.Sub(t0))
	}
	admit(t, c2, req(6))
	// ... and a turn taken too late is lost: r7 waits again, first in line.
	clk.Add(DefaultTuning.TurnGrace + 2*time.Second) // +10 s
	parked(t, c2, req(7))
	c1.cut.pumpCutLines(ctx)
	for i, want := range map[int]time.Duration{7: 10 * time.Second, 8: 11 * time.Second, 9: 12 * time.Second} {
		if at := w1.at(req(i).ID); !at.Equal(t0.Add(want)) {
			t.Errorf("after r7 lost its turn, r%d's turn is at +%v, want +%v", i, at.Sub(t0), want)
		}
	}
	// A worker started since (it never saw the line, and the key is not
	// cut there) finds the line listed and drains it at once.
	parked(t, c2, req(10))
	w3 := &waker{}
	c3 := newController(t, rdb, cfg, w3, clk)
	c3.adoptLines(ctx)
	c3.cut.pumpCutLines(ctx)
	if at := w3.at("r10"); !at.Equal(clk.Now()) {
		t.Errorf("a new worker gave r10 its turn at +%v, want now (+%v)", at.Sub(t0), clk.Now().Sub(t0))
	}
	if n, err := listed(ctx, rdb, keys.LineCut); err != nil || n != 0 {
		t.Errorf("the drained line is still listed (%d, %v)", n, err)
	}
	left, err := rdb.ZCard(ctx, flowdb.CutNames("h:443")[0]).Result()
	if err != nil || left != 0 {
		t.Errorf("line holds %d (%v) after draining: %v", left, err, rdb.ZRange(ctx, flowdb.CutNames("h:443")[0], 0, -1).Val())
	}
}

// A retry of a cut key joins its line at its due time, and is given no
// turn before it.
func TestCutKeyRetryWaitsInLineUntilDue(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(t0)
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1, Adaptive: true, MinRate: 1}, w, clk)
	req := Request{ID: "r", HostPort: "h:443", Key: "h:443"}
	ctx := context.Background()
	if _, ok := c.LineRetry(ctx, req, t0.Add(30*time.Second)); ok {
		t.Fatal("a retry of a key not cut joined a line")
	}
	cut(c, req, 1)
	due := t0.Add(30 * time.Second)
	until, ok := c.LineRetry(ctx, req, due)
	if !ok || until.Before(due.Add(DefaultTuning.ParkFallback)) {
		t.Fatalf("LineRetry = %v, %v; want its safety net at least %v after its due time", until, ok, DefaultTuning.ParkFallback)
	}
	c.cut.pumpCutLines(ctx)
	clk.Add(20 * time.Second)
	c.cut.pumpCutLines(ctx)
	if at := w.at("r"); !at.IsZero() {
		t.Fatalf("a retry due at +30s was given a turn at +%v", at.Sub(t0))
	}
	clk.Add(10 * time.Second)
	c.cut.pumpCutLines(ctx)
	if at := w.at("r"); at.Before(due) || at.After(due.Add(time.Second)) {
		t.Errorf("the retry due at +30s was given its turn at +%v", at.Sub(t0))
	}
}

// A fairness line is listed: a worker that never saw it (started since
// its workers died) gives its waiters its free slots.
func TestFairnessLineIsAdoptedByANewWorker(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := Config{Concurrency: 2, FairShare: 0.5}
	c1 := newController(t, rdb, cfg, &waker{}, clk)
	req := func(id string) Request { return Request{ID: id, HostPort: "h:80", Key: "h:80"} }
	admit(t, c1, req("a"))
	parked(t, c1, req("b"))
	w2 := &waker{}
	c2 := newController(t, rdb, cfg, w2, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c2.Rebalance(ctx)
	waitWoken(t, w2, []string{"b"})
}

// A worker that dies between taking a waiter from a fairness line and
// waking it loses it no place: another worker that knows the line wakes
// it once its hand-over is HandOverCheck old, even with the line empty.
// One heard of since (it came and ran) is left alone.
func TestPromotionOfADeadWorkerIsDelivered(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := Config{Concurrency: 2, FairShare: 0.5}
	w1 := &waker{}
	c1 := newController(t, rdb, cfg, w1, clk)
	req := func(id string) Request { return Request{ID: id, HostPort: "h:80", Key: "h:80"} }
	admit(t, c1, req("a"))
	parked(t, c1, req("b"))
	parked(t, c1, req("c"))
	// c1 takes b and c from the line and dies before waking them; c had
	// already come and run (its promotion heard of by no line).
	if got, err := c1.fair.nextInLine(context.Background(), "h:80", "", 2); err != nil || !slices.Equal(got.IDs, []string{"b", "c"}) {
		t.Fatalf("nextInLine = %+v, %v; want b, c", got, err)
	}
	w2 := &waker{fetched: map[string]bool{"c": true}}
	c2 := newController(t, rdb, cfg, w2, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c2.Rebalance(ctx)
	t0 := clk.Now()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(w2.got(), []string{"b"}) {
		if time.Now().After(deadline) {
			t.Fatalf("woken %v %v after the hand-over, want b", w2.got(), clk.Now().Sub(t0))
		}
		clk.Add(DefaultTuning.RebalanceEvery)
		time.Sleep(5 * time.Millisecond)
	}
	if after := clk.Now().Sub(t0); after < DefaultTuning.HandOverCheck {
		t.Fatalf("b woken %v after its hand-over, before DefaultTuning.HandOverCheck", after)
	}
	handed := flowdb.FairNames("h:80")[2]
	deadline = time.Now().Add(5 * time.Second)
	for n, _ := rdb.ZCard(ctx, handed).Result(); n != 0; n, _ = rdb.ZCard(ctx, handed).Result() {
		if time.Now().After(deadline) {
			t.Fatalf("%d hand-overs still pending after they were looked at", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A line waiter's safety net is twice its expected wait, within bounds.
func TestLineFallback(t *testing.T) {
	for _, tc := range []struct {
		n     int
		mean  time.Duration
		slots int
		want  time.Duration
	}{
		{1, 2 * time.Second, 10, DefaultTuning.ParkFallback},
		{0, 0, 10, DefaultTuning.ParkFallback},
		{1000, 2 * time.Second, 10, 400 * time.Second},
		{1_000_000, 2 * time.Second, 10, DefaultTuning.LineFallbackMax},
	} {
		if got := DefaultTuning.lineFallback(tc.n, tc.mean, tc.slots); got != tc.want {
			t.Errorf("lineFallback(%d, %v, %d) = %v, want %v", tc.n, tc.mean, tc.slots, got, tc.want)
		}
	}
}

// An operator's pause holds a key's requests in its paused line (another
// key goes on); resume wakes them; a pin overrides the parallelism its
// requests ask for, on a worker that read it within ControlTTL; a reset
// rate lets the next request start at once.
func TestControlPausePinAndResetRate(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1}, w, clk)
	ctx := context.Background()
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "k", Named: true, Parallelism: 5, Timeout: time.Second}
	}
	if err := Pause(ctx, rdb, "k"); err != nil {
		t.Fatal(err)
	}
	if until := parked(t, c, req("a")); !until.Equal(clk.Now().Add(DefaultTuning.ParkFallback)) {
		t.Errorf("a paused key's request parked until %v, want the safety net", until)
	}
	parked(t, c, req("b"))
	admit(t, c, Request{ID: "x", HostPort: "h:443", Key: "other", Named: true}).Done(ctx, Succeeded)
	info, err := Info(ctx, rdb, "k", 0, 0, clk.Now())
	if err != nil || !info.Paused || info.Waiting != 2 {
		t.Errorf("info while paused: %+v %v", info, err)
	}
	// The resume says how many it released: after it, none wait.
	if released, err := Resume(ctx, rdb, w, discard, "k"); err != nil || released != 2 {
		t.Fatalf("resume released %d (%v), want the 2 that waited", released, err)
	}
	waitWoken(t, w, []string{"a", "b"})
	clk.Add(DefaultTuning.ControlTTL) // the worker reads the settings again
	if err := Pin(ctx, rdb, "k", 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	a := admit(t, c, req("a"))
	parked(t, c, req("b")) // pinned to 1: the request's 5 no longer counts
	a.Done(ctx, Succeeded)
	if err := Unpin(ctx, rdb, "k", true, false); err != nil {
		t.Fatal(err)
	}
	if ctl, _ := ReadControl(ctx, rdb, "k"); ctl != (Control{}) {
		t.Errorf("after unpin: %+v", ctl)
	}
	rated := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "r", Named: true, Rate: 1, Period: time.Minute}
	}
	admit(t, c, rated("r1"))
	parked(t, c, rated("r2"))
	if info, _ := Info(ctx, rdb, "r", 1, time.Minute, clk.Now()); info.RateCount != 1 {
		t.Errorf("rate count %d, want 1", info.RateCount)
	}
	if err := ResetRate(ctx, rdb, "r"); err != nil {
		t.Fatal(err)
	}
	if info, _ := Info(ctx, rdb, "r", 1, time.Minute, clk.Now()); info.RateCount != 0 {
		t.Errorf("rate count after reset %d", info.RateCount)
	}
	admit(t, c, rated("r3"))
}

// A queue's requests start in their order (by id), at most its
// parallelism at once; a finished one wakes the next; a pause holds even
// the head, a resume wakes it; a finished request found ahead of a
// waiter (its worker died before leaving the line) is taken out.
func TestQueueKeepsOrderAndParallelism(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	w := &waker{}
	// died says 01c finished but its worker died before leaving the line.
	var died atomic.Bool
	c := newController(t, rdb, Config{Concurrency: 100, FairShare: 1,
		Finished: func(_ context.Context, id string) bool { return died.Load() && id == "01c" }}, w, clk)
	ctx := context.Background()
	req := func(id string) Request {
		return Request{ID: id, HostPort: "h:443", Key: "h:443", Queue: "q", Created: clk.Now()}
	}
	for _, id := range []string{"01a", "01b", "01c", "01d"} {
		if err := JoinQueue(ctx, rdb, "q", id, clk.Now()); err != nil { // one ms: joins keep their order
			t.Fatal(err)
		}
	}
	parked(t, c, req("01c")) // parallelism 1 (the default): the head is 01a
	parked(t, c, req("01b"))
	a := admit(t, c, req("01a"))
	a.Done(ctx, Succeeded) // an attempt's end is not the request's end
	parked(t, c, req("01b"))
	c.QueueDone(ctx, req("01a"))
	waitWoken(t, w, []string{"01b"})
	admit(t, c, req("01b"))
	if err := SetQueue(ctx, rdb, w, discard, "q", 2, false, clk.Now()); err != nil { // wider: 01c's turn
		t.Fatal(err)
	}
	waitWoken(t, w, []string{"01b", "01c"})
	admit(t, c, req("01c"))
	parked(t, c, req("01d"))
	if err := SetQueuePaused(ctx, rdb, w, discard, "q", true, clk.Now()); err != nil {
		t.Fatal(err)
	}
	c.QueueDone(ctx, req("01b"))
	if got := w.got(); len(got) != 2 {
		t.Errorf("a paused queue woke %v", got)
	}
	parked(t, c, req("01d")) // its turn, but paused
	if err := SetQueuePaused(ctx, rdb, w, discard, "q", false, clk.Now()); err != nil {
		t.Fatal(err)
	}
	waitWoken(t, w, []string{"01b", "01c", "01d"})
	s, err := ReadQueue(ctx, rdb, "q")
	if err != nil || s.Parallelism != 2 || s.Paused || s.Lag != 2 {
		t.Errorf("settings %+v %v", s, err)
	}
	// 01c finished but its worker died before leaving the line: the next
	// waiter finds it ahead and takes it out.
	died.Store(true)
	for _, id := range []string{"01e", "01f"} {
		_ = JoinQueue(ctx, rdb, "q", id, clk.Now())
	}
	admit(t, c, req("01d"))
	parked(t, c, req("01f")) // finds 01c ahead: out of line
	admit(t, c, req("01e"))  // so 01e's turn (01d and 01e: parallelism 2)
	parked(t, c, req("01f"))
}

// A park says why: a destination over its fair share waits for a free slot
// (no time: an event starts it); a key's stats count every attempt, the
// failures that are not overload too, so a destination that fails every
// attempt does not read as idle.
func TestParksSayWhyAndStatsCountEveryAttempt(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, redistest.Start(t).Client(), Config{Concurrency: 2, FairShare: 0.5}, &waker{}, clk)
	dest := func(id string) Request {
		return Request{ID: id, HostPort: "down:443", Key: "down:443", Timeout: time.Second}
	}
	a := admit(t, c, dest("a"))
	_, err := c.Admit(context.Background(), dest("b"))
	var p *Parked
	if !errors.As(err, &p) || p.Reason != record.WaitingFairShare || !p.Starts.IsZero() {
		t.Fatalf("Admit over the fair share = %v (%+v), want parked for fair_share with no start time", err, p)
	}
	a.Done(context.Background(), Other)
	admit(t, c, dest("c")).Done(context.Background(), Other)
	admit(t, c, dest("d")).Done(context.Background(), Overloaded)
	for _, s := range c.snapshot(clk.Now()) {
		if s.Key == "down:443" {
			if s.Succeeded != 0 || s.Overloaded != 1 || s.Failed != 2 {
				t.Errorf("stats: %d succeeded, %d overloaded, %d failed otherwise; want 0, 1, 2", s.Succeeded, s.Overloaded, s.Failed)
			}
			return
		}
	}
	t.Error("no stats for the key")
}

// listed counts the lines of kind the registry lists.
func listed(ctx context.Context, rdb redis.UniversalClient, kind string) (int, error) {
	fields, err := rdb.HKeys(ctx, keys.Lines).Result()
	n := 0
	for _, f := range fields {
		if k, _, _ := keys.ParseLineField(f); k == kind {
			n++
		}
	}
	return n, err
}
