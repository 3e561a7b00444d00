package tasks

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/record"
)

// latenessSamples are the lateness histogram's samples, once the worker's
// in-memory counts are added: all of them, those over a second, and their
// sum.
func latenessSamples(t *testing.T, b *testBundle) (all, overASecond int64, sum time.Duration) {
	t.Helper()
	if err := b.store.FlushCounts(context.Background()); err != nil {
		t.Fatal(err)
	}
	stats, err := b.store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(record.LatenessBuckets) + 1 {
		n := stats["late|"+strconv.Itoa(i)]
		all += n
		if i == len(record.LatenessBuckets) || record.LatenessBuckets[i] > 1 {
			overASecond += n
		}
	}
	return all, overASecond, time.Duration(stats["late_sum_ms"]) * time.Millisecond
}

// parkedBy takes request r's first attempt back as a flow gate's park
// does: it waits for reason until until (zero: until an event).
func parkedBy(t *testing.T, b *testBundle, r *record.Request, reason string, until time.Time) {
	t.Helper()
	begun, err := b.store.Begin(context.Background(), r.ID, time.Now())
	if err != nil || begun.State != record.Started {
		t.Fatalf("Begin = %+v, %v", begun, err)
	}
	if err := b.store.Unbegin(context.Background(), r.ID, begun.N, reason, until); err != nil {
		t.Fatal(err)
	}
}

// A request held a minute by a pause, or behind an open endpoint, is not
// late once released: waiting is not lateness, and when the event released
// it is not known, so no lateness is observed. One given a turn (a rate)
// is late only by how long after its turn it started.
func TestWaitingIsNotLateness(t *testing.T) {
	t.Parallel()
	ok := func(_ int, w http.ResponseWriter) { w.WriteHeader(200) }

	h, b := setup(t, ok)
	r := b.submit(t, `{"url":"`+b.dest.URL+`"}`)
	parkedBy(t, b, r, record.WaitingPaused, time.Time{})
	h.Clock = clock.NewFake(time.Now().Add(time.Minute)) // resumed a minute later
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	if all, over, _ := latenessSamples(t, b); all != 0 || over != 0 {
		t.Errorf("after a minute paused: %d lateness samples, %d over a second; want none (waiting is not lateness)", all, over)
	}

	// Behind an open endpoint, shown its next probe: a probe that fails
	// keeps it waiting past that, and the one that succeeds is an event.
	h, b = setup(t, ok)
	r = b.submit(t, `{"url":"`+b.dest.URL+`"}`)
	parkedBy(t, b, r, record.WaitingEndpointOpen, time.Now().Add(5*time.Second))
	h.Clock = clock.NewFake(time.Now().Add(time.Minute)) // closed a minute later
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	if all, over, _ := latenessSamples(t, b); all != 0 || over != 0 {
		t.Errorf("after a minute behind an open endpoint: %d lateness samples, %d over a second; want none", all, over)
	}

	h, b = setup(t, ok)
	r = b.submit(t, `{"url":"`+b.dest.URL+`"}`)
	turn := time.Now().Add(50 * time.Second)
	parkedBy(t, b, r, record.WaitingRate, turn)
	h.Clock = clock.NewFake(turn.Truncate(time.Millisecond).Add(20 * time.Millisecond)) // started 20 ms after its turn
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	if all, over, sum := latenessSamples(t, b); all != 1 || over != 0 || sum != 20*time.Millisecond {
		t.Errorf("after 50 s waiting for a rate turn, started 20 ms after it: %d samples, %d over a second, %v in all; want 1, 0, 20ms",
			all, over, sum)
	}
}

// A retry that starts a minute after it was due, having waited for
// nothing, is late by that minute.
func TestLateRetryObservesItsLateness(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	})
	r := b.submit(t, `{"url":"`+b.dest.URL+`","backoffMs":100}`)
	clk := clock.NewFake(time.Now())
	h.Clock = clk
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err == nil {
		t.Fatal("the first attempt's 503 was not a failure")
	}
	due := b.get(t, r.ID).NextAttemptAt
	clk.Set(due.Add(time.Minute))
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if all, over, sum := latenessSamples(t, b); all != 2 || over != 1 || sum < time.Minute {
		t.Errorf("%d lateness samples, %d over a second, %v in all; want 2, 1 (the retry, a minute late), at least 1m", all, over, sum)
	}
}
