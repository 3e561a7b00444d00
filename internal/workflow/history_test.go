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

	first, err := s.List(ctx, "", "", 2, 0, 0)
	if err != nil || len(first.Runs) != 2 || first.Runs[0].ID != "running" || first.Runs[1].ID != "stopped" || first.Cursor == "" {
		t.Fatalf("the first page: %+v, %v", first, err)
	}
	if r := first.Runs[0]; r.State != "" || len(r.Messages) != 1 || !r.CreatedAt.Equal(t0.Add(2*time.Millisecond)) {
		t.Errorf("the running run: %+v", r)
	}
	if r := first.Runs[1]; r.State != EndedCanceled || r.Messages != nil || !r.CompletedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("the canceled run: %+v", r)
	}
	second, err := s.List(ctx, "", first.Cursor, 2, 0, 0)
	if err != nil || len(second.Runs) != 1 || second.Cursor != "" {
		t.Fatalf("the second page: %+v, %v", second, err)
	}
	if r := second.Runs[0]; r.ID != "done" || r.State != EndedSuccess || string(r.Result) != `"ok"` || len(r.Entries) != 1 || r.Entries[0].MessageID != "done-init" {
		t.Errorf("the run that ended: %+v", r)
	}
	if p, _ := s.List(ctx, "", "", 10, t0.Add(time.Millisecond).UnixMilli(), t0.Add(time.Millisecond).UnixMilli()); len(p.Runs) != 1 || p.Runs[0].ID != "stopped" {
		t.Errorf("runs started in one millisecond: %+v", p)
	}
	if p, _ := s.List(ctx, "other", "", 10, 0, 0); len(p.Runs) != 1 || p.Runs[0].ID != "theirs" {
		t.Errorf("another tenant's runs: %+v", p)
	}
	if _, err := s.List(ctx, "", "nope", 10, 0, 0); !errors.Is(err, ErrBadCursor) {
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
	p, err := s.List(ctx, "", "", 1, 0, 0)
	if err != nil || len(p.Runs) != 3 || p.Cursor == "" {
		t.Fatalf("a page of 1 among 3 runs of one millisecond: %+v, %v", p, err)
	}
	if next, _ := s.List(ctx, "", p.Cursor, 1, 0, 0); len(next.Runs) != 1 || next.Runs[0].ID != "older" || next.Cursor != "" {
		t.Errorf("the next page: %+v", next)
	}
}
