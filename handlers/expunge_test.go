package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// failedWithPayload stores a request with headers and a body that failed
// with a response body, as the worker records one.
func (b *dlqBundle) failedWithPayload(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	id := ids.New(now)
	r := &record.Request{ID: id, URL: "https://e.com/x", Host: "e.com", Method: "POST", Headers: map[string]string{"X-Card": "4242"},
		Body: "card 4242", MaxRetries: 0, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000, Status: record.Pending, CreatedAt: now, NextAttemptAt: now}
	if _, err := b.store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	at, err := b.store.Begin(ctx, id, now)
	if err != nil || at.State != record.Started {
		t.Fatalf("begin %s: %+v %v", id, at, err)
	}
	resp := "no such card 4242"
	if _, err := b.store.Finish(ctx, id, record.Outcome{Attempt: record.Attempt{N: at.N, StartedAt: now, StatusCode: 500,
		Outcome: "permanent", FailureClass: "server_error", ResponseBody: &resp}, Status: record.Failed, Host: "e.com", Run: -1}, now); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestExpungeErasesThePayloadEverywhereItIsShown(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 3)
	id := b.failedWithPayload(t)
	before := do(t, "GET", b.ts.URL+"/requests/"+id, "", "")
	if !strings.Contains(before.raw, "no such card 4242") || !strings.Contains(before.raw, `"X-Card":"4242"`) || before.body["expunged"] != false {
		t.Fatalf("before: %s", before.raw)
	}

	a := do(t, "DELETE", b.ts.URL+"/requests/"+id+"/payload", "application/json", `{"actor":"dpo"}`)
	if a.status != http.StatusOK {
		t.Fatalf("expunge: %d %s", a.status, a.raw)
	}
	for name, doc := range map[string]answer{"answer": a, "GET": do(t, "GET", b.ts.URL+"/requests/"+id, "", "")} {
		if strings.Contains(doc.raw, "4242") {
			t.Errorf("%s still shows the payload: %s", name, doc.raw)
		}
		if doc.body["expunged"] != true || doc.body["expungedBy"] != "dpo" || doc.body["expungedAt"] == nil ||
			doc.body["status"] != "failed" || doc.body["lastStatusCode"] != 500.0 || doc.body["failureClass"] != "server_error" {
			t.Errorf("%s: %s", name, doc.raw)
		}
		atts, _ := doc.body["attempts"].([]any)
		if len(atts) != 1 {
			t.Fatalf("%s attempts: %s", name, doc.raw)
		}
		if att := atts[0].(map[string]any); att["expunged"] != true || att["responseBody"] != nil || att["statusCode"] != 500.0 {
			t.Errorf("%s attempt: %v", name, att)
		}
	}
	dlq := do(t, "GET", b.ts.URL+"/dlq", "", "")
	if rows, _ := dlq.body["data"].([]any); len(rows) != 1 || rows[0].(map[string]any)["expunged"] != true || strings.Contains(dlq.raw, "4242") {
		t.Errorf("DLQ view: %s", dlq.raw)
	}
	// Again: nothing more to erase, the same answer, the audit kept.
	if again := do(t, "DELETE", b.ts.URL+"/requests/"+id+"/payload", "", ""); again.status != http.StatusOK || again.body["expungedBy"] != "dpo" {
		t.Errorf("second expunge: %d %s", again.status, again.raw)
	}
	// An expunged request cannot be resent or redriven: nothing is left
	// to send.
	for _, path := range []string{"/requests/" + id + "/resend", "/dlq/" + id + "/redrive"} {
		rs := do(t, "POST", b.ts.URL+path, "", "")
		if code, _ := errorOf(t, rs); rs.status != http.StatusConflict || code != "conflict" || !strings.Contains(rs.raw, "expunged") {
			t.Errorf("POST %s of an expunged request: %d %s", path, rs.status, rs.raw)
		}
	}
}

func TestExpungeRejections(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 3)
	id := b.failedWithPayload(t)
	pending := do(t, "POST", b.ts.URL+"/requests", "application/json", `{"url":"https://e.com/y","body":"secret","delayMs":3600000}`).body["id"].(string)
	cases := []struct {
		name, id, body string
		status         int
		code, field    string
		says           string
	}{
		{"a pending request", pending, "", 409, "conflict", "", "cancel it first with DELETE /requests/" + pending},
		{"an actor too long", id, `{"actor":"` + strings.Repeat("a", 201) + `"}`, 400, "invalid_request", "actor", "200"},
		{"a field it does not take", id, `{"reason":"gdpr"}`, 400, "invalid_request", "", "actor"},
		{"a body that is not JSON", id, `actor=dpo`, 400, "invalid_request", "", "JSON"},
		{"an unknown id", "01m8mg842n8nbsaee7cq", "", 404, "not_found", "", ""},
		{"a malformed id", "nope", "", 404, "not_found", "", ""},
	}
	for _, c := range cases {
		a := do(t, "DELETE", b.ts.URL+"/requests/"+c.id+"/payload", "application/json", c.body)
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, a.status, c.status, a.raw)
			continue
		}
		code, field := errorOf(t, a)
		if code != c.code || field != c.field || !strings.Contains(a.raw, c.says) {
			t.Errorf("%s: error %s, want code %s field %q saying %q", c.name, a.raw, c.code, c.field, c.says)
		}
	}
	for _, got := range []answer{do(t, "GET", b.ts.URL+"/requests/"+id, "", ""), do(t, "GET", b.ts.URL+"/requests/"+pending, "", "")} {
		if got.body["expunged"] != false {
			t.Errorf("a refused expunge erased: %s", got.raw)
		}
	}
}

// The actors retryd records for itself ("retention" as expungedBy says
// the payload retention erased a payload) cannot be claimed by a caller,
// on a single call or a bulk one, in a body or in the query.
func TestNoRouteLetsACallerClaimRetrydsOwnActor(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 3)
	id := b.failedWithPayload(t)
	for _, actor := range record.OwnActors {
		calls := []struct{ method, path, body string }{
			{"DELETE", "/requests/" + id + "/payload", `{"actor":"` + actor + `"}`},
			{"DELETE", "/requests/payload", `{"host":"e.com","actor":"` + actor + `"}`},
			{"DELETE", "/requests/payload?host=e.com&actor=" + actor, ""},
			{"POST", "/requests/resend", `{"host":"e.com","actor":"` + actor + `"}`},
			{"POST", "/requests/" + id + "/resend", `{"actor":"` + actor + `"}`},
			{"POST", "/dlq/redrive", `{"actor":"` + actor + `"}`},
			{"POST", "/dlq/" + id + "/redrive", `{"actor":"` + actor + `"}`},
		}
		for _, c := range calls {
			a := do(t, c.method, b.ts.URL+c.path, "application/json", c.body)
			if code, field := errorOf(t, a); a.status != http.StatusBadRequest || code != "invalid_request" || field != "actor" ||
				!strings.Contains(a.raw, "retryd's own actor") {
				t.Errorf("%s %s %s: %d %s, want 400 on actor", c.method, c.path, c.body, a.status, a.raw)
			}
		}
	}
	doc := do(t, "GET", b.ts.URL+"/requests/"+id, "", "")
	if doc.body["expunged"] != false || doc.body["status"] != "failed" || len(doc.body["resends"].([]any)) != 0 {
		t.Errorf("a refused call changed the request: %s", doc.raw)
	}
}
