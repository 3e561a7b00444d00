package workflow

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The logs list a tenant's runs newest first, page by page, each as it
// runs or as it ended (its state, result and log kept).
func TestRunsAreListedWithTheirHistory(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	start := func(tenant, run string, at time.Time) {
		t.Helper()
		if _, err := s.Publish(ctx, Message{Tenant: tenant, Run: run, Init: true, URL: "https://app/wf", ID: run + "-init", Body: []byte("in")}, at); err != nil {
			t.Fatal(err)
		}
	}
	start("", "done", t0)
	start("", "stopped", t0.Add(time.Millisecond))
	start("", "running", t0.Add(2*time.Millisecond))
	start("other", "theirs", t0.Add(3*time.Millisecond))
	if _, err := s.Deliver(ctx, "", "done", "done-init", []byte("in")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.End(ctx, "", "done", Ending{State: EndedSuccess, Result: []byte(`"ok"`), At: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.End(ctx, "", "stopped", Ending{State: EndedCanceled, At: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}

	first, err := s.List(ctx, "", "", 2, 0, 0, true)
	if err != nil || len(first.Runs) != 2 || first.Runs[0].ID != "running" || first.Runs[1].ID != "stopped" || first.Cursor == "" {
		t.Fatalf("the first page: %+v, %v", first, err)
	}
	if r := first.Runs[0]; r.State != "" || len(r.Messages) != 1 || !r.CreatedAt.Equal(t0.Add(2*time.Millisecond)) {
		t.Errorf("the running run: %+v", r)
	}
	if r := first.Runs[1]; r.State != EndedCanceled || r.Messages != nil || !r.CompletedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("the canceled run: %+v", r)
	}
	second, err := s.List(ctx, "", first.Cursor, 2, 0, 0, true)
	if err != nil || len(second.Runs) != 1 || second.Cursor != "" {
		t.Fatalf("the second page: %+v, %v", second, err)
	}
	if r := second.Runs[0]; r.ID != "done" || r.State != EndedSuccess || string(r.Result) != `"ok"` || len(r.Entries) != 1 || r.Entries[0].MessageID != "done-init" {
		t.Errorf("the run that ended: %+v", r)
	}
	if p, _ := s.List(ctx, "", "", 10, t0.Add(time.Millisecond).UnixMilli(), t0.Add(time.Millisecond).UnixMilli(), true); len(p.Runs) != 1 || p.Runs[0].ID != "stopped" {
		t.Errorf("runs started in one millisecond: %+v", p)
	}
	if p, _ := s.List(ctx, "other", "", 10, 0, 0, false); len(p.Runs) != 1 || p.Runs[0].ID != "theirs" {
		t.Errorf("another tenant's runs: %+v", p)
	}
	if _, err := s.List(ctx, "", "nope", 10, 0, 0, true); !errors.Is(err, ErrBadCursor) {
		t.Errorf("a cursor List never gave: %v", err)
	}
}

// A page never ends inside one millisecond's runs: the next page starts
// before it, so none would be skipped.
func TestAPageHoldsAMillisecondsRunsWhole(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	for _, run := range []string{"a", "b", "c"} {
		if _, err := s.Publish(ctx, Message{Run: run, Init: true, URL: "https://app/wf", ID: run}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Publish(ctx, Message{Run: "older", Init: true, URL: "https://app/wf", ID: "older"}, t0.Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	p, err := s.List(ctx, "", "", 1, 0, 0, true)
	if err != nil || len(p.Runs) != 3 || p.Cursor == "" {
		t.Fatalf("a page of 1 among 3 runs of one millisecond: %+v, %v", p, err)
	}
	if next, _ := s.List(ctx, "", p.Cursor, 1, 0, 0, true); len(next.Runs) != 1 || next.Runs[0].ID != "older" || next.Cursor != "" {
		t.Errorf("the next page: %+v", next)
	}
}

// A cursor at toDate goes on before it, not over the same page again.
func TestACursorAtToDateGoesOn(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	for i, run := range []string{"c", "b", "a"} {
		if _, err := s.Publish(ctx, Message{Run: run, Init: true, URL: "https://app/wf", ID: run}, t0.Add(-time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	to := t0.UnixMilli()
	first, err := s.List(ctx, "", "", 1, 0, to, true)
	if err != nil || len(first.Runs) != 1 || first.Runs[0].ID != "c" {
		t.Fatalf("the first page: %+v, %v", first, err)
	}
	second, err := s.List(ctx, "", first.Cursor, 1, 0, to, true)
	if err != nil || len(second.Runs) != 1 || second.Runs[0].ID != "b" {
		t.Errorf("the page after a cursor at toDate: %+v, %v", second, err)
	}
}

// A repeated start, or one at another URL, keeps a run's place in the
// listing: it is listed by when it started.
func TestARepeatedStartKeepsTheRunsPlace(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	m := Message{Run: "r", Init: true, URL: "https://app/wf", ID: "m1"}
	if _, err := s.Publish(ctx, m, t0); err != nil {
		t.Fatal(err)
	}
	m.ID = "m2"
	if _, err := s.Publish(ctx, m, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	m.URL = "https://app/other"
	if _, err := s.Publish(ctx, m, t0.Add(time.Hour)); err == nil {
		t.Fatal("a start at another URL was taken")
	}
	if p, _ := s.List(ctx, "", "", 10, t0.Add(30*time.Minute).UnixMilli(), 0, true); len(p.Runs) != 0 {
		t.Errorf("the run is listed as started after its start: %+v", p)
	}
	if p, _ := s.List(ctx, "", "", 10, 0, 0, true); len(p.Runs) != 1 || !p.Runs[0].CreatedAt.Equal(t0) {
		t.Errorf("the run's listing: %+v", p)
	}
}

// A start of an ended run's id that retryd then refuses puts back what
// the logs kept of the ended run; one it takes replaces it.
func TestARefusedStartKeepsTheEndedRun(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), context.Background()
	first := Message{Run: "r", Init: true, URL: "https://app/wf", ID: "m1", Body: []byte("first")}
	if _, err := s.Publish(ctx, first, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(ctx, "", "r", "m1", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.End(ctx, "", "r", Ending{State: EndedCanceled, At: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	again := Message{Run: "r", Init: true, URL: "https://app/wf", ID: "m2", Body: []byte("again")}
	if _, err := s.Publish(ctx, again, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, again); err != nil {
		t.Fatal(err)
	}
	h, err := s.Get(ctx, "", "r")
	if err != nil || h.State != EndedCanceled || len(h.Entries) != 1 || h.Entries[0].MessageID != "m1" {
		t.Fatalf("the ended run after a refused start: %+v, %v", h, err)
	}
	if _, err := s.Publish(ctx, again, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Get(ctx, "", "r"); err != nil || h.State != "" || len(h.Entries) != 0 || !h.CreatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("the run started again: %+v, %v", h, err)
	}
}
