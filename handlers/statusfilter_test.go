package handlers_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// status takes several statuses at once, and waitingFor selects the
// unfinished requests waiting for a reason: "failed or waiting" is one
// call; a status or reason that does not exist is refused naming them.
func TestFiltersTakeSeveralStatusesAndTheWaitingReason(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 3)
	ctx := context.Background()
	failed := b.failed(t, 1)
	pending := func(waitingFor string) string {
		now := time.Now()
		r := &record.Request{ID: ids.New(now), URL: "https://e.com/w", Host: "e.com", Method: "POST", Headers: map[string]string{},
			MaxRetries: 3, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000, Status: record.Pending, CreatedAt: now, NextAttemptAt: now}
		if _, err := b.store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if waitingFor != "" {
			at, err := b.store.Begin(ctx, r.ID, now)
			if err != nil || at.State != record.Started {
				t.Fatalf("begin: %+v %v", at, err)
			}
			if err := b.store.Unbegin(ctx, r.ID, at.N, waitingFor, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		return r.ID
	}
	paused, open, plain := pending(record.WaitingPaused), pending(record.WaitingEndpointOpen), pending("")
	list := func(query string) []string {
		t.Helper()
		a := do(t, "GET", b.ts.URL+"/requests?"+query, "", "")
		if a.status != http.StatusOK {
			t.Fatalf("GET /requests?%s: %d %s", query, a.status, a.raw)
		}
		var out []string
		for _, d := range a.body["data"].([]any) {
			out = append(out, d.(map[string]any)["id"].(string))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	for query, want := range map[string][]string{
		"status=failed,pending":                   sorted(failed, paused, open, plain),
		"status=failed":                           {failed},
		"status=completed,canceled":               nil,
		"waitingFor=paused":                       {paused},
		"waitingFor=paused,endpoint_open":         sorted(paused, open),
		"status=failed&waitingFor=paused":         nil,
		"host=e.com&waitingFor=endpoint_open":     {open},
		"status=retrying,pending&waitingFor=rate": nil,
	} {
		if got := list(query); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", query, got, want)
		}
	}
	for _, query := range []string{"status=failed,nope", "status=", "waitingFor=nope", "waitingFor=paused,", "status=failed,,pending"} {
		a := do(t, "GET", b.ts.URL+"/requests?"+query, "", "")
		if code, field := errorOf(t, a); a.status != 400 || code != "invalid_request" || (field != "status" && field != "waitingFor") {
			t.Errorf("%s: %d %s, want 400 naming the filter", query, a.status, a.raw)
		}
	}
}
