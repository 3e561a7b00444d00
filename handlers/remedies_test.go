package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// message is the error message of a, in either shape.
func message(a answer) string {
	if e, ok := a.body["error"].(map[string]any); ok {
		m, _ := e["message"].(string)
		return m
	}
	m, _ := a.body["error"].(string)
	return m
}

// Errors name the remedy for the settings actually in force, and never
// one that is then refused.
func TestErrorsPointTheRightWay(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := engineServer(t, srv, map[string]string{"ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "team-a:change-me"})
	key := bearer("change-me")

	t.Run("metadata address with ALLOW_PRIVATE_TARGETS already on", func(t *testing.T) {
		a := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"http://169.254.169.254/latest/meta-data"}`, key...)
		msg := message(a)
		if a.status != 422 || strings.Contains(msg, "every private range with ALLOW_PRIVATE_TARGETS") || !strings.Contains(msg, "ALLOWED_CIDRS") {
			t.Errorf("169.254.169.254: %d %q; want 422 naming ALLOWED_CIDRS, not ALLOW_PRIVATE_TARGETS=true", a.status, msg)
		}
	})

	t.Run("cancel of a completed request", func(t *testing.T) {
		sub := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"http://127.0.0.1:1/x","delayMs":3600000}`, key...)
		id, _ := sub.body["id"].(string)
		store := record.NewStore(srv.Client(), time.Hour)
		ctx, now := context.Background(), time.Now().Add(2*time.Hour) // past its delay
		b, err := store.Begin(ctx, id, now)
		if err != nil || b.State != record.Started {
			t.Fatalf("begin %s (%d %s): %+v %v", id, sub.status, sub.raw, b, err)
		}
		if _, err := store.Finish(ctx, id, record.Outcome{Attempt: record.Attempt{N: b.N, StartedAt: now, StatusCode: 200, Outcome: "success"},
			Status: record.Completed, Tenant: "team-a"}, now); err != nil {
			t.Fatal(err)
		}
		a := do(t, "DELETE", ts.URL+"/requests/"+id, "", "", key...)
		if msg := message(a); a.status != 409 || strings.Contains(msg, "redrive") || !strings.Contains(msg, "completed") {
			t.Errorf("DELETE of a completed request: %d %q; want 409 saying it is completed, suggesting no redrive", a.status, msg)
		}
	})

	t.Run("bulk redrive with a null body", func(t *testing.T) {
		a := do(t, "POST", ts.URL+"/dlq/redrive", "application/json", `null`, key...)
		if msg := message(a); a.status != 400 || strings.Contains(msg, "messageIds") || !strings.Contains(msg, `"ids"`) {
			t.Errorf("POST /dlq/redrive null: %d %q; want 400 naming ids, not QStash's messageIds", a.status, msg)
		}
	})

	t.Run("the whole tenant:key entry sent as the key", func(t *testing.T) {
		a := do(t, "GET", ts.URL+"/requests", "", "", bearer("team-a:change-me")...)
		if msg := message(a); a.status != 401 || !strings.Contains(msg, "after the colon") {
			t.Errorf("Bearer team-a:change-me: %d %q; want 401 saying only the part after the colon is the key", a.status, msg)
		}
		if a := do(t, "GET", ts.URL+"/requests", "", "", bearer("nope")...); strings.Contains(message(a), "colon") {
			t.Errorf("a wrong key without a colon is told about colons: %q", message(a))
		}
	})

	t.Run("a /v2 401 in QStash's shape", func(t *testing.T) {
		for _, path := range []string{"/v2/messages/x", "/v2/schedules", "/v2/queues"} {
			a := do(t, "GET", ts.URL+path, "", "", bearer("wrong")...)
			if msg, ok := a.body["error"].(string); a.status != 401 || !ok || msg == "" {
				t.Errorf("GET %s with a wrong key: %d %s; want 401 {\"error\": \"...\"}", path, a.status, a.raw)
			}
		}
		if a := do(t, "GET", ts.URL+"/requests", "", "", bearer("wrong")...); a.status != 401 {
			t.Errorf("native 401: %d", a.status)
		} else if _, ok := a.body["error"].(map[string]any); !ok {
			t.Errorf("the native API's 401 lost its shape: %s", a.raw)
		}
	})
}

// A refused Origin is echoed cut, as every other echoed value is.
func TestRefusedOriginIsEchoedCut(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	origin := "https://" + strings.Repeat("a", 5000) + ".example"
	a := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com"}`, "Origin", origin)
	if a.status != 403 || len(a.raw) > 600 || strings.Contains(a.raw, strings.Repeat("a", 100)) {
		t.Errorf("a 5 kB Origin: %d, %d bytes answered; want 403 with the origin cut", a.status, len(a.raw))
	}
}

// An admin key reaches every tenant's topics, but a topic named alone is
// looked up in the key's own tenant: the 404 says how to name another
// tenant's, and with ?tenant= the topic is found.
func TestAdminTopicNotFoundNamesTheTenantParameter(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := engineServer(t, srv, map[string]string{"ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "team-a:change-me", "ADMIN_KEYS": "admin-key"})
	if a := do(t, "POST", ts.URL+"/topics/orders/endpoints", "application/json", `{"endpoints":[{"url":"http://127.0.0.1:1/x"}]}`, bearer("change-me")...); a.status/100 != 2 {
		t.Fatalf("team-a creates its topic: %d %s", a.status, a.raw)
	}
	a := do(t, "GET", ts.URL+"/topics/orders", "", "", bearer("admin-key")...)
	if msg := message(a); a.status != 404 || !strings.Contains(msg, "?tenant=") {
		t.Errorf("an admin's GET /topics/orders without ?tenant=: %d %q; want 404 naming ?tenant=", a.status, msg)
	}
	if a := do(t, "GET", ts.URL+"/topics/orders?tenant=team-a", "", "", bearer("admin-key")...); a.status != 200 {
		t.Errorf("an admin's GET /topics/orders?tenant=team-a: %d %s; want 200", a.status, a.raw)
	}
	// A tenant key reaches its own tenant only: no word of a parameter it
	// may not use.
	if a := do(t, "GET", ts.URL+"/topics/missing", "", "", bearer("change-me")...); a.status != 404 || strings.Contains(message(a), "?tenant=") {
		t.Errorf("a tenant key's unknown topic: %d %q; want 404 without the admin's hint", a.status, message(a))
	}
}
