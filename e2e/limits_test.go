package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The official @upstash/qstash client meets retryd's limits as QStash's
// own errors (e2e/oracles/qstash-limits.test.js): the rate limit counts
// the requests a batch makes, queues stop at QUEUE_LIMIT, an unknown logs
// state is refused. Here, through retryd's own API: what the refused
// calls made, which is nothing.
func TestLimitsWithTheOfficialClient(t *testing.T) {
	t.Parallel()
	const key, admin = "acme-key", "admin-key"
	s := startStack(t, 0, "API_KEYS=acme:"+key, "ADMIN_KEYS="+admin, "RATE_LIMIT_RPS=100", "QUEUE_LIMIT=3")
	nodeTest(t, "qstash-limits.test.js", "RETRYD_URL="+s.api, "KEY="+key, "DEST=http://127.0.0.1:1")
	// The admin's key is another tenant's budget.
	a := call(t, "GET", s.api+"/requests?limit=500", "", "Authorization", "Bearer "+admin)
	data, _ := a.body["data"].([]any)
	if a.status != 200 || len(data) != 75 {
		t.Errorf("requests made: %d (%d %.200s), want the 75 of the one batch that passed", len(data), a.status, a.raw)
	}
	q := call(t, "GET", s.api+"/v2/queues/q4", "", "Authorization", "Bearer "+key)
	if q.status != 404 {
		t.Errorf("the queue an enqueue past the limit named: %d %s, want 404", q.status, q.raw)
	}
}

// The attacker's findings, replayed on real processes (one Redis, one
// API; tenants acme and beta, a bare default key, an admin key): a batch
// to a URL group is counted per request it would make and refused whole,
// queues stop at the limit and list in pages, and each small one is
// refused, changing nothing.
func TestAttackerFindingsOnLimitsAreRefused(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0, "API_KEYS=acme:acme-key,beta:beta-key,default-key", "ADMIN_KEYS=admin-key", "RATE_LIMIT_RPS=1000", "QUEUE_LIMIT=5")
	as := func(key, method, path, body string, headers ...string) answer {
		t.Helper()
		return call(t, method, s.api+path, body, append([]string{"Authorization", "Bearer " + key}, headers...)...)
	}
	made := func() int {
		a := as("admin-key", "GET", "/requests?limit=500", "")
		data, _ := a.body["data"].([]any)
		return len(data)
	}

	// Amplification: 20 items × 100 endpoints = 2,000 requests > 1,000 a second.
	eps := make([]string, 100)
	for i := range eps {
		eps[i] = fmt.Sprintf(`{"url":"http://127.0.0.1:1/e%d"}`, i)
	}
	if a := as("acme-key", "POST", "/v2/topics/wide/endpoints", `{"endpoints":[`+strings.Join(eps, ",")+`]}`); a.status != 200 {
		t.Fatalf("endpoints: %d %s", a.status, a.raw)
	}
	items := strings.TrimSuffix(strings.Repeat(`{"destination":"wide","body":"x"},`, 20), ",")
	if a := as("acme-key", "POST", "/v2/batch", "["+items+"]"); a.status != 429 || a.header.Get("Retry-After") == "" {
		t.Errorf("a batch of 20 to 100 endpoints: %d (Retry-After %q) %.300s, want 429", a.status, a.header.Get("Retry-After"), a.raw)
	}
	if n := made(); n != 0 {
		t.Errorf("the refused batch made %d requests", n)
	}

	// Queues: at most QUEUE_LIMIT per tenant, listed in pages.
	for i := range 6 {
		a := as("acme-key", "POST", "/v2/queues", fmt.Sprintf(`{"queueName":"q%d"}`, i))
		if want := map[bool]int{true: 200, false: 409}[i < 5]; a.status != want {
			t.Errorf("queue %d of a limit of 5: %d %s, want %d", i+1, a.status, a.raw, want)
		}
	}
	page := as("acme-key", "GET", "/v2/queues?count=2", "")
	var list []any
	if err := json.Unmarshal([]byte(page.raw), &list); err != nil || len(list) != 2 || !strings.Contains(page.header.Get("Link"), `rel="next"`) {
		t.Errorf("GET /v2/queues?count=2: %d %s (Link %q), want 2 queues and a next page", page.status, page.raw, page.header.Get("Link"))
	}

	// The small ones.
	later := as("acme-key", "POST", "/requests", `{"url":"http://127.0.0.1:1/later","delayMs":3600000}`)
	id, _ := later.body["id"].(string)
	for _, c := range []struct{ key, method, path, body string }{
		{"acme-key", "DELETE", "/v2/messages", "null"},
		{"acme-key", "POST", "/dlq/redrive?limit=1", `{"actor":"a","reason":"r","limit":1000}`},
		{"acme-key", "POST", "/dlq/redrive", `{"actor":"a","reason":"r","limit":"5"}`},
		{"acme-key", "GET", "/v2/events?state=BOGUS", ""},
		{"acme-key", "POST", "/schedules", `{"cron":"0 0 31 2 *","request":{"url":"http://127.0.0.1:1/s"}}`},
	} {
		if a := as(c.key, c.method, c.path, c.body); a.status != 400 {
			t.Errorf("%s %s %s: %d %s, want 400", c.method, c.path, c.body, a.status, a.raw)
		}
	}
	if doc := as("acme-key", "GET", "/requests/"+id, ""); doc.body["status"] != "pending" {
		t.Errorf("acme's message after the refused calls: %v, want pending", doc.body["status"])
	}
	if a := as("acme-key", "POST", "/topics/acmetopic/endpoints", `{"endpoints":[{"url":"http://127.0.0.1:1/t"}]}`); a.status != 200 {
		t.Fatalf("acme's topic: %d %s", a.status, a.raw)
	}
	if a := as("beta-key", "DELETE", "/topics/acmetopic/endpoints", `{"endpoints":[{"url":"http://127.0.0.1:1/t"}]}`); a.status != 404 {
		t.Errorf("beta's DELETE of acme's topic endpoints: %d %s, want 404", a.status, a.raw)
	}
	for _, path := range []string{"/monitoring/api/queues/nope", "/monitoring/api/metrics"} {
		if a := as("admin-key", "GET", path, ""); a.status != 404 {
			t.Errorf("GET %s: %d %.200s, want 404", path, a.status, a.raw)
		}
	}
	// 21 failed logins from this address; an operator's first visit still
	// gets the Basic challenge.
	for i := range 21 {
		call(t, "GET", s.api+"/monitoring/", "", "Authorization", fmt.Sprintf("Bearer guess-%d", i))
	}
	if a := call(t, "GET", s.api+"/monitoring/", ""); a.status != 401 || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("/monitoring/ without credentials after 21 failures: %d (WWW-Authenticate %q), want 401 Basic", a.status, a.header.Get("WWW-Authenticate"))
	}
}
