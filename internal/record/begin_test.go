package record

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/retryd/retryd/internal/redistest"
)

// Begin returns the record without reading it back: what begin.lua
// returns must be what a full read says of every field an attempt reads
// (the rest, which Begin leaves zero, are listed here).
func TestBeginRequestIsTheRecordAnAttemptReads(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	now := time.UnixMilli(time.Now().UnixMilli())
	id := "01m8mhyychtfy2pdj6g7"
	r := newRequest(id, now)
	r.Tenant, r.Method, r.Body, r.Headers = "acme", "POST", `{"a":1}`, map[string]string{"X-Token": "t"}
	r.MaxRetries, r.BackoffMs, r.MaxBackoffMs, r.TimeoutMs = 3, 250, 9000, 1500
	r.CallbackURL, r.IdempotencyKey, r.TraceParent = "https://cb.example/x", "key-1", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r.Dialect, r.QStash = DialectQStash, &QStash{Labels: []string{"l1"}, RetryDelay: "1000"}
	r.FlowControl, r.Credential, r.Proxy = &FlowControl{Key: "k", Parallelism: 2}, "cred", "px"
	if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A first attempt that failed: a budget spent, a retry due.
	first, err := s.Begin(ctx, id, now)
	if err != nil || first.State != Started {
		t.Fatalf("first Begin: %+v %v", first, err)
	}
	due := now.Add(time.Second)
	if _, err := s.Finish(ctx, id, Outcome{Attempt: Attempt{N: 1, StartedAt: now, Outcome: "retryable", FailureClass: "server_error", StatusCode: 500},
		Status: Retrying, NextAttemptAt: due, Tenant: "acme", Host: "e.com"}, now); err != nil {
		t.Fatal(err)
	}
	b, err := s.Begin(ctx, id, due)
	if err != nil || b.State != Started || b.N != 2 {
		t.Fatalf("second Begin: %+v %v", b, err)
	}
	full, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	notRead := cmpopts.IgnoreFields(Request{}, "WaitingFor", "WaitUntil", "LastError", "LastStatusCode", "FailureClass", "Result", "HasResult",
		"ResultTruncated", "RedriveCount", "CanceledBy", "FailedRun", "Callback", "UpdatedAt", "CompletedAt", "Attempts", "Redrives", "Resends",
		"Expunged", "ExpungedAt", "ExpungedBy")
	if diff := cmp.Diff(full, b.Request, notRead, cmp.AllowUnexported(Request{}, place{})); diff != "" {
		t.Errorf("Begin's record (-read +begun):\n%s", diff)
	}
	if b.Request.BudgetUsed != 1 || !b.Request.NextAttemptAt.Equal(due) || b.Request.Tenant != "acme" {
		t.Errorf("Begin's record: budget %d, next %v, tenant %q", b.Request.BudgetUsed, b.Request.NextAttemptAt, b.Request.Tenant)
	}
}
