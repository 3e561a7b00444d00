package tasks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/record"
)

// attemptStats are the attempt counters of the metrics, once the
// worker's in-memory counts are added: by outcome and class, and the
// duration histogram's count.
func attemptStats(t *testing.T, b *testBundle) (byClass map[string]int64, durations int64) {
	t.Helper()
	if err := b.store.FlushCounts(context.Background()); err != nil {
		t.Fatal(err)
	}
	stats, err := b.store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byClass = map[string]int64{}
	for f, n := range stats {
		switch {
		case strings.HasPrefix(f, "att|"):
			byClass[strings.TrimPrefix(f, "att|")] += n
		case strings.HasPrefix(f, "dur|"):
			durations += n
		}
	}
	return byClass, durations
}

// A request whose endpoint stayed open ends endpoint_down without a call:
// attemptCount and the run's attempts stay as the one call made left
// them, no attempt metric counts it, and its entry says called: false
// with what stopped it.
func TestEndpointDownIsNotCountedAsAnAttempt(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(503) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","backoffMs":100,"maxRetries":3}`)
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err == nil {
		t.Fatal("the first attempt's 503 was not a failure")
	}
	classes, durations := attemptStats(t, b)
	if classes["retryable|server_error"] != 1 || durations != 1 {
		t.Fatalf("after one call: attempts %v, %d durations; want 1 retryable server_error, 1 duration", classes, durations)
	}
	// The retry is due; its endpoint has been open too long.
	begun, err := b.store.Begin(context.Background(), r.ID, time.Now().Add(time.Minute))
	if err != nil || begun.State != record.Started || begun.N != 2 {
		t.Fatalf("Begin = %+v, %v; want attempt 2 started", begun, err)
	}
	cause := fmt.Errorf("%w: %s open since 2026-01-01T00:00:00Z", flow.ErrEndpointDown, b.dest.URL)
	if err := h.endEndpointDown(context.Background(), begun, cause); err == nil {
		t.Fatal("endEndpointDown returned nil; want the request ended without a retry")
	}
	got := b.get(t, r.ID)
	if got.Status != record.Failed || got.FailureClass != "endpoint_down" || !strings.Contains(got.LastError, "open too long") {
		t.Errorf("record: status %s class %q lastError %q; want failed endpoint_down saying why", got.Status, got.FailureClass, got.LastError)
	}
	if got.AttemptCount != 1 || got.BudgetUsed != 1 {
		t.Errorf("attemptCount %d, runAttempts %d; want 1 and 1: only one call was made", got.AttemptCount, got.BudgetUsed)
	}
	if len(got.Attempts) != 2 || got.Attempts[0].NotCalled || !got.Attempts[1].NotCalled || got.Attempts[1].FailureClass != "endpoint_down" {
		t.Fatalf("attempts %+v; want the call, then an entry that made no call (endpoint_down)", got.Attempts)
	}
	doc := apidoc.NewDocument(got, true, time.Now())
	if as := *doc.Attempts; !as[0].Called || as[1].Called {
		t.Errorf("the API shows called %v, %v; want true, false", as[0].Called, as[1].Called)
	}
	if c := got.Attempts[1]; c.DurationMs != nil || c.StatusCode != 0 {
		t.Errorf("the entry with no call has duration %v and status %d; want none", c.DurationMs, c.StatusCode)
	}
	classes, durations = attemptStats(t, b)
	if len(classes) != 1 || classes["retryable|server_error"] != 1 || durations != 1 {
		t.Errorf("after the endpoint_down end: attempts %v, %d durations; want only the one call counted", classes, durations)
	}
}

// A destination the rules refuse at dial time is never called: the
// request fails blocked_destination with no attempt counted.
func TestRefusedDialIsNotCountedAsAnAttempt(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(200) })
	h.Client = (&egress.Guard{}).Client() // loopback refused
	r := b.submit(t, `{"url":"`+b.dest.URL+`","maxRetries":3}`)
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("ProcessTask = %v; want the request ended", err)
	}
	got := b.get(t, r.ID)
	if got.Status != record.Failed || got.FailureClass != "blocked_destination" || got.AttemptCount != 0 || got.BudgetUsed != 0 {
		t.Errorf("record: status %s class %q attemptCount %d runAttempts %d; want failed blocked_destination, 0 and 0",
			got.Status, got.FailureClass, got.AttemptCount, got.BudgetUsed)
	}
	if len(got.Attempts) != 1 || !got.Attempts[0].NotCalled || got.Attempts[0].N != 1 {
		t.Errorf("attempts %+v; want one entry, n 1, that made no call", got.Attempts)
	}
	if classes, durations := attemptStats(t, b); len(classes) != 0 || durations != 0 {
		t.Errorf("attempts %v, %d durations counted; want none", classes, durations)
	}
	if n := b.hitCount(); n != 0 {
		t.Errorf("the destination was called %d times", n)
	}
}
