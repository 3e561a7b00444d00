package workflow

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func newStore(t *testing.T) *Store {
	t.Helper()
	return New(redistest.Start(t).Client(), time.Hour)
}

// log decodes a delivery's body: the messages' ids and bodies.
func logOf(t *testing.T, run Run) (ids, bodies []string) {
	t.Helper()
	var es []Entry
	if err := json.Unmarshal(run.Log, &es); err != nil {
		t.Fatalf("log %s: %v", run.Log, err)
	}
	for _, e := range es {
		b, _ := base64.StdEncoding.DecodeString(e.Body)
		ids, bodies = append(ids, e.MessageID), append(bodies, string(b))
		if e.CallType != CallStep {
			t.Errorf("entry %s: callType %q", e.MessageID, e.CallType)
		}
	}
	return ids, bodies
}

func TestARunStartsOnceAtOneURL(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	init := Message{Tenant: "", Run: "wfr_1", Init: true, URL: "https://app/wf", ID: "m1", Body: []byte("in")}
	if p, err := s.Publish(ctx, init, t0); err != nil || p.Duplicate {
		t.Fatalf("the first init: %+v, %v", p, err)
	}
	again := init
	again.ID = "m2"
	if p, err := s.Publish(ctx, again, t0); err != nil || !p.Duplicate || p.FirstID != "m1" {
		t.Errorf("a second init: %+v, %v; want a duplicate of m1", p, err)
	}
	other := again
	other.URL = "https://app/other"
	var conflict *URLConflictError
	if _, err := s.Publish(ctx, other, t0); !errors.As(err, &conflict) || conflict.URL != "https://app/wf" {
		t.Errorf("an init at another URL: %v", err)
	}
	step := Message{Run: "wfr_1", URL: "https://app/other", ID: "m3", Body: []byte("s")}
	if _, err := s.Publish(ctx, step, t0); !errors.As(err, &conflict) {
		t.Errorf("a step at another URL: %v", err)
	}
	// Another tenant's run of the same id is another run.
	theirs := init
	theirs.Tenant = "acme"
	if p, err := s.Publish(ctx, theirs, t0); err != nil || p.Duplicate {
		t.Errorf("another tenant's run of the same id: %+v, %v", p, err)
	}
	missing := Message{Run: "wfr_none", URL: "https://app/wf", ID: "m4", Body: []byte("s")}
	if _, err := s.Publish(ctx, missing, t0); !errors.Is(err, ErrNoRun) {
		t.Errorf("a step of a run never started: %v", err)
	}
}

// A message joins the log at its first delivery, which carries the log up
// to it; a retry finds it in its place; a step due later does not show in
// the deliveries made before it.
func TestDeliveriesCarryTheLogUpToThemselves(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	url := "https://app/wf"
	for _, m := range []Message{{Run: "r", Init: true, URL: url, ID: "init", Body: []byte("payload")},
		{Run: "r", URL: url, ID: "later", Body: []byte("sleep")}, {Run: "r", URL: url, ID: "now", Body: []byte("step")}} {
		if _, err := s.Publish(ctx, m, t0); err != nil {
			t.Fatal(err)
		}
	}
	d := func(id, body string) []string {
		t.Helper()
		run, err := s.Deliver(ctx, "", "r", id, []byte(body))
		if err != nil || !run.Found || !run.CreatedAt.Equal(t0) {
			t.Fatalf("deliver %s: %+v, %v", id, run, err)
		}
		ids, _ := logOf(t, run)
		return ids
	}
	if got := d("init", "payload"); !equal(got, "init") {
		t.Errorf("the init's delivery: %v", got)
	}
	if got := d("now", "step"); !equal(got, "init", "now") {
		t.Errorf("a step's: %v", got)
	}
	if got := d("later", "sleep"); !equal(got, "init", "now", "later") {
		t.Errorf("the step due later, delivered last: %v", got)
	}
	if got := d("now", "step"); !equal(got, "init", "now") {
		t.Errorf("a retry of a step: %v", got)
	}
	all, err := s.Steps(ctx, "", "r", "")
	if err != nil {
		t.Fatal(err)
	}
	if ids, bodies := logOf(t, all); !equal(ids, "init", "now", "later") || bodies[0] != "payload" {
		t.Errorf("the whole log: %v %v", ids, bodies)
	}
	upTo, _ := s.Steps(ctx, "", "r", "now")
	if ids, _ := logOf(t, upTo); !equal(ids, "init", "now") {
		t.Errorf("the log up to now: %v", ids)
	}
	ids, ok, err := s.End(ctx, "", "r", Ending{State: EndedSuccess, At: t0})
	if err != nil || !ok || !equal(ids, "init", "later", "now") {
		t.Errorf("End: %v %v %v; want the messages in publish order", ids, ok, err)
	}
	if run, err := s.Deliver(ctx, "", "r", "now", []byte("step")); err != nil || run.Found {
		t.Errorf("a delivery after the end: %+v, %v; want no run", run, err)
	}
	if _, ok, _ := s.End(ctx, "", "r", Ending{State: EndedSuccess, At: t0}); ok {
		t.Error("a second End found the run")
	}
}

func TestARunsLogIsBounded(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	if _, err := s.Publish(ctx, Message{Run: "r", Init: true, URL: "https://a/wf", ID: "i", Body: []byte("x")}, t0); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20)
	var full *LogFullError
	var err error
	n := 0
	for ; n < 20 && err == nil; n++ {
		_, err = s.Publish(ctx, Message{Run: "r", URL: "https://a/wf", ID: "m", Body: big}, t0)
	}
	if !errors.As(err, &full) || full.Bytes <= MaxLogBytes {
		t.Fatalf("after %d messages of 1 MiB: %v; want the log full", n, err)
	}
	// A small step still fits: the refused one was not counted.
	if _, err := s.Publish(ctx, Message{Run: "r", URL: "https://a/wf", ID: "small", Body: []byte("s")}, t0); err != nil {
		t.Errorf("a small step after a refused one: %v", err)
	}
}

func TestWaitersOfAnEvent(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	for _, w := range []Waiter{{Run: "a", URL: "https://x/a", Deadline: t0.Add(time.Hour).UnixMilli(), TimeoutID: "ta"},
		{Run: "b", URL: "https://x/b", Deadline: t0.Add(time.Minute).UnixMilli(), TimeoutID: "tb"},
		{Run: "c", URL: "https://x/c", Deadline: t0.Add(time.Hour).UnixMilli(), TimeoutID: "tc"}} {
		if err := s.Wait(ctx, "", "ev", w, t0); err != nil {
			t.Fatal(err)
		}
	}
	later := t0.Add(2 * time.Minute) // b's wait has timed out
	ws, err := s.Waiters(ctx, "", "ev", later)
	if err != nil || len(ws) != 2 {
		t.Fatalf("Waiters: %+v, %v; want a and c", ws, err)
	}
	if ws, _ := s.Waiters(ctx, "acme", "ev", later); len(ws) != 0 {
		t.Errorf("another tenant's event has waiters: %+v", ws)
	}
	// Run c waits for the event in a second step too (its own timeout).
	if err := s.Wait(ctx, "", "ev", Waiter{Run: "c", URL: "https://x/c", Deadline: t0.Add(time.Hour).UnixMilli(), TimeoutID: "tc2"}, t0); err != nil {
		t.Fatal(err)
	}
	if ws, _ := s.Waiters(ctx, "", "ev", later); len(ws) != 3 {
		t.Errorf("waiters after c's second wait: %+v", ws)
	}
	two, err := s.Take(ctx, "", "ev", "c", later)
	if err != nil || len(two) != 2 {
		t.Errorf("Take of run c: %+v, %v; want both its waits", two, err)
	}
	one := two[:1]
	if len(two) == 2 && two[1].TimeoutID == "tc" {
		one = two[1:]
	}
	if err != nil || len(one) != 1 || one[0].TimeoutID != "tc" {
		t.Errorf("Take of run c: %+v, %v", one, err)
	}
	rest, err := s.Take(ctx, "", "ev", "", later)
	if err != nil || len(rest) != 1 || rest[0].Run != "a" {
		t.Errorf("Take of the rest: %+v, %v; want a alone (b timed out)", rest, err)
	}
	if again, _ := s.Take(ctx, "", "ev", "", later); len(again) != 0 {
		t.Errorf("a second notify found waiters: %+v", again)
	}
}

func equal(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// A message retryd refused after Publish counted it is taken back: a
// refused start leaves no run (starting it again is no duplicate), a
// refused step leaves the run's count as it was.
func TestARefusedMessageIsTakenBack(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	init := Message{Run: "r", Init: true, URL: "https://a/wf", ID: "i1", Body: []byte("x")}
	if _, err := s.Publish(ctx, init, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, init); err != nil {
		t.Fatal(err)
	}
	if run, _ := s.Info(ctx, "", "r"); run.Found {
		t.Fatal("a refused start left its run")
	}
	init.ID = "i2"
	if p, err := s.Publish(ctx, init, t0); err != nil || p.Duplicate {
		t.Fatalf("a start after a refused one: %+v, %v", p, err)
	}
	big := Message{Run: "r", URL: "https://a/wf", ID: "big", Body: make([]byte, MaxLogBytes/2)}
	if _, err := s.Publish(ctx, big, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, big); err != nil {
		t.Fatal(err)
	}
	// Had it stayed counted, this one would pass the log's limit.
	big.ID = "big2"
	if _, err := s.Publish(ctx, big, t0); err != nil {
		t.Errorf("a step after a refused one of its size: %v", err)
	}
	ids, _, _ := s.End(ctx, "", "r", Ending{State: EndedSuccess, At: t0})
	if !equal(ids, "i2", "big2") {
		t.Errorf("the run's messages: %v", ids)
	}
	// A call to a third party never joins the log: it is not counted.
	if _, err := s.Publish(ctx, Message{Run: "r2", Init: true, URL: "https://a/wf", ID: "j", Body: []byte("x")}, t0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		if _, err := s.Publish(ctx, Message{Run: "r2", ID: "call", Body: make([]byte, 1<<20)}, t0); err != nil {
			t.Fatalf("call %d of 1 MiB: %v", i, err)
		}
	}
}

// A run is kept until its last message is due, and a retention after: a
// sleep longer than the retention does not end it.
func TestARunOutlivesItsLongestSleep(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	s, ctx := New(rdb, time.Hour), context.Background()
	if _, err := s.Publish(ctx, Message{Run: "r", Init: true, URL: "https://a/wf", ID: "i", Body: []byte("x")}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(ctx, "", "r", "i", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(ctx, Message{Run: "r", URL: "https://a/wf", ID: "nap", Body: []byte("s"), Due: 60 * 24 * time.Hour}, t0); err != nil {
		t.Fatal(err)
	}
	h, msgs, log := runKeys("", "r")
	for _, k := range []string{h, msgs, log} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl < 60*24*time.Hour {
			t.Errorf("%s is kept %v, less than the sleep of 60 days", k, ttl)
		}
	}
}

func TestAnEventHasAtMostMaxWaiters(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	w := Waiter{URL: "https://x/a", Deadline: t0.Add(time.Hour).UnixMilli()}
	for i := 0; i < MaxWaiters; i++ {
		w.Run, w.TimeoutID = "r", strconv.Itoa(i)
		if err := s.Wait(ctx, "", "ev", w, t0); err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	w.TimeoutID = "one-more"
	if err := s.Wait(ctx, "", "ev", w, t0); !errors.Is(err, ErrTooManyWaiters) {
		t.Errorf("waiter %d: %v, want ErrTooManyWaiters", MaxWaiters+1, err)
	}
}

// A run keeps what invoked it and what its steps inherit, from its start
// on; a duplicate start changes neither, and an ended run has none.
func TestARunKeepsItsInvokerAndConfig(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	init := Message{Run: "wfr_child", Init: true, URL: "https://app/child", ID: "m1", Body: []byte("in"),
		Invoker: []byte(`{"run":"wfr_parent"}`), Config: []byte(`{"Upstash-Retries":["0"]}`)}
	if _, err := s.Publish(ctx, init, t0); err != nil {
		t.Fatal(err)
	}
	again := init
	again.ID, again.Invoker, again.Config = "m2", []byte(`{"run":"wfr_other"}`), nil
	if _, err := s.Publish(ctx, again, t0); err != nil {
		t.Fatal(err)
	}
	run, err := s.Info(ctx, "", "wfr_child")
	if err != nil || string(run.Invoker) != `{"run":"wfr_parent"}` || string(run.Config) != `{"Upstash-Retries":["0"]}` {
		t.Errorf("the run's invoker and config: %q %q, %v", run.Invoker, run.Config, err)
	}
	plain := Message{Run: "wfr_plain", Init: true, URL: "https://app/wf", ID: "m3"}
	if _, err := s.Publish(ctx, plain, t0); err != nil {
		t.Fatal(err)
	}
	if run, err := s.Info(ctx, "", "wfr_plain"); err != nil || !run.Found || run.Invoker != nil || run.Config != nil {
		t.Errorf("a run nothing invoked: %+v, %v", run, err)
	}
	if _, _, err := s.End(ctx, "", "wfr_child", Ending{State: EndedSuccess, At: t0}); err != nil {
		t.Fatal(err)
	}
	if run, err := s.Info(ctx, "", "wfr_child"); err != nil || run.Found || run.Invoker != nil {
		t.Errorf("an ended run: %+v, %v", run, err)
	}
}
