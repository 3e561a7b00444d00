package handlers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/redistest"
)

// limitsEnv is a deployment with two tenants and an admin key.
var limitsEnv = map[string]string{"API_KEYS": "acme:acme-key,beta:beta-key,admin-key", "ALLOW_PRIVATE_TARGETS": "true"}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// A bulk route reads a JSON object and nothing else: the body null once
// canceled every message of the tenant. A limit is given once, as a
// number.
func TestBulkBodiesAreObjectsAndLimitsAreNumbersGivenOnce(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	sub := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"http://127.0.0.1:1/x","delayMs":3600000}`, bearer("acme-key")...)
	if sub.status != 202 {
		t.Fatalf("submit: %d %s", sub.status, sub.raw)
	}
	id, _ := sub.body["id"].(string)
	for _, c := range []struct{ method, path, body, field string }{
		{"DELETE", "/v2/messages", `null`, ""},
		{"DELETE", "/v2/messages", `[]`, ""},
		{"DELETE", "/v2/messages", `"all"`, ""},
		{"DELETE", "/v2/dlq", `null`, ""},
		{"POST", "/v2/dlq/retry", `null`, ""},
		{"POST", "/dlq/redrive", `null`, ""},
		{"POST", "/dlq/redrive?limit=1", `{"actor":"a","reason":"r","limit":1000}`, "limit"},
		{"POST", "/dlq/redrive", `{"actor":"a","reason":"r","limit":"5"}`, "limit"},
		{"DELETE", "/v2/messages?count=1", `{"count":1000}`, "count"},
		{"DELETE", "/v2/messages", `{"count":"5"}`, "count"},
	} {
		a := do(t, c.method, ts.URL+c.path, "application/json", c.body, bearer("acme-key")...)
		if a.status != 400 {
			t.Errorf("%s %s %s: %d %s, want 400", c.method, c.path, c.body, a.status, a.raw)
			continue
		}
		if e, _ := a.body["error"].(map[string]any); e != nil { // retryd's shape names the field; QStash's is a string
			if f, _ := e["field"].(string); f != c.field {
				t.Errorf("%s %s %s: field %q, want %q (%s)", c.method, c.path, c.body, f, c.field, a.raw)
			}
		}
	}
	if doc := do(t, "GET", ts.URL+"/requests/"+id, "", "", bearer("acme-key")...); doc.body["status"] != "pending" {
		t.Errorf("after the refused calls the message is %v, want pending", doc.body["status"])
	}
}

// A logs filter on a state QStash does not have is refused, naming the
// states; one it has answers.
func TestEventsRefuseAnUnknownState(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	a := do(t, "GET", ts.URL+"/v2/events?state=BOGUS", "", "", bearer("acme-key")...)
	if msg, _ := a.body["error"].(string); a.status != 400 || !strings.Contains(msg, "DELIVERED") {
		t.Errorf("state=BOGUS: %d %s, want 400 naming the states", a.status, a.raw)
	}
	for _, state := range []string{"FAILED", "CANCELED", "IN_PROGRESS"} {
		if a := do(t, "GET", ts.URL+"/v2/events?state="+state, "", "", bearer("acme-key")...); a.status != 200 {
			t.Errorf("state=%s: %d %s, want 200", state, a.status, a.raw)
		}
	}
}

// Another tenant's topic does not exist for a tenant: removing its
// endpoints is 404, on both APIs, and leaves it as it was.
func TestRemovingEndpointsOfAnotherTenantsTopicIs404(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	eps := `{"endpoints":[{"url":"http://127.0.0.1:1/a"}]}`
	if a := do(t, "POST", ts.URL+"/topics/acmetopic/endpoints", "application/json", eps, bearer("acme-key")...); a.status != 200 {
		t.Fatalf("acme adds an endpoint: %d %s", a.status, a.raw)
	}
	for _, path := range []string{"/topics/acmetopic/endpoints", "/v2/topics/acmetopic/endpoints"} {
		if a := do(t, "DELETE", ts.URL+path, "application/json", eps, bearer("beta-key")...); a.status != 404 {
			t.Errorf("beta's DELETE %s: %d %s, want 404", path, a.status, a.raw)
		}
	}
	if a := do(t, "DELETE", ts.URL+"/topics/nothing/endpoints", "application/json", eps, bearer("acme-key")...); a.status != 404 {
		t.Errorf("acme's DELETE of endpoints of a topic it does not have: %d %s, want 404", a.status, a.raw)
	}
	if a := do(t, "GET", ts.URL+"/topics/acmetopic", "", "", bearer("acme-key")...); a.status != 200 || !strings.Contains(a.raw, "127.0.0.1:1/a") {
		t.Errorf("acme's topic after beta's calls: %d %s", a.status, a.raw)
	}
}

// The dashboard answers 404, not 500, for a queue that does not exist
// and for the metrics charts it has no Prometheus server for.
func TestDashboardAnswers404ForWhatDoesNotExist(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	if a := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"http://127.0.0.1:1/x","delayMs":1000}`, bearer("admin-key")...); a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	for _, path := range []string{"/monitoring/api/queues/nope", "/monitoring/api/metrics", "/monitoring/api/queues/nope/pending_tasks",
		"/monitoring/api/queues/nope/scheduled_tasks"} {
		if a := do(t, "GET", ts.URL+path, "", "", bearer("admin-key")...); a.status != 404 {
			t.Errorf("GET %s: %d %s, want 404", path, a.status, a.raw)
		}
	}
	if a := do(t, "GET", ts.URL+"/monitoring/api/queues", "", "", bearer("admin-key")...); a.status != 200 || !strings.Contains(a.raw, "retryd") {
		t.Errorf("GET /monitoring/api/queues: %d %s, want 200 listing retryd", a.status, a.raw)
	}
}

// The rate limit counts the requests a call creates, not the call: a
// batch of 20 to a 25-endpoint URL group is 500 requests, refused at a
// limit of 100 a second, and a call refused by the limit creates nothing.
func TestRateLimitCountsRequestsCreated(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RATE_LIMIT_RPS": "100"}
	for k, v := range limitsEnv {
		env[k] = v
	}
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), env)
	group := func(name string, n int) {
		var eps []string
		for i := range n {
			eps = append(eps, fmt.Sprintf(`{"url":"http://127.0.0.1:1/e%d"}`, i))
		}
		if a := do(t, "POST", ts.URL+"/topics/"+name+"/endpoints", "application/json", `{"endpoints":[`+strings.Join(eps, ",")+`]}`, bearer("acme-key")...); a.status != 200 {
			t.Fatalf("endpoints: %d %s", a.status, a.raw)
		}
	}
	group("group", 25)
	group("big", 100)
	batch := func(items int) answer {
		var list []string
		for range items {
			list = append(list, `{"destination":"group","body":"x"}`)
		}
		return do(t, "POST", ts.URL+"/v2/batch", "application/json", "["+strings.Join(list, ",")+"]", bearer("acme-key")...)
	}
	// The admin's key is another tenant's budget: counting costs acme nothing.
	made := func() int {
		a := do(t, "GET", ts.URL+"/requests?limit=500", "", "", bearer("admin-key")...)
		data, _ := a.body["data"].([]any)
		return len(data)
	}
	if a := batch(20); a.status != 429 || a.header.Get("Retry-After") == "" || !strings.Contains(a.raw, "500 requests") {
		t.Errorf("a batch of 20 to 25 endpoints at 100 a second: %d (Retry-After %q) %s, want 429 saying 500 requests",
			a.status, a.header.Get("Retry-After"), a.raw)
	}
	if n := made(); n != 0 {
		t.Fatalf("the refused batch made %d requests", n)
	}
	spent := time.Now()
	if a := batch(3); a.status != 201 {
		t.Fatalf("a batch of 3 to 25 endpoints (75 requests) at 100 a second: %d %s", a.status, a.raw)
	}
	if n := made(); n != 75 {
		t.Fatalf("the batch of 3 made %d requests, want 75", n)
	}
	// About 25 tokens are left, refilling at 100 a second: 75, or 100,
	// are refused whole on every route that fans out, while the refill
	// cannot have covered them yet (a loaded machine may take longer; a
	// call it lets through must then make all its requests).
	calls := []struct {
		n    int
		call func() answer
	}{
		{75, func() answer { return batch(3) }},
		{100, func() answer {
			return do(t, "POST", ts.URL+"/v2/publish/big", "text/plain", "x", bearer("acme-key")...)
		}},
		{100, func() answer {
			return do(t, "POST", ts.URL+"/topics/big/requests", "application/json", `{"body":"x"}`, bearer("acme-key")...)
		}},
	}
	want, asserted := 75, 0
	for i, c := range calls {
		a := c.call()
		covered := 25 + 100*time.Since(spent).Seconds() // the most the bucket can hold by now
		switch {
		case a.status == 429 && a.header.Get("Retry-After") != "":
		case covered >= float64(c.n) && a.status/100 == 2:
			want += c.n
			continue
		default:
			t.Errorf("fan-out %d (%d requests) over what is left of the limit: %d (Retry-After %q) %s, want 429", i, c.n, a.status, a.header.Get("Retry-After"), a.raw)
		}
		asserted++
	}
	if n := made(); n != want {
		t.Errorf("the fan-outs made %d requests, want %d (refused ones make none)", n, want)
	}
	if asserted == 0 {
		t.Log("the machine was too slow for any refusal to be certain; only the counts were checked")
	}
}

// A tenant has at most QUEUE_LIMIT queues: one more, by upsert or by
// enqueueing to a new queue, is refused naming the limit, and nothing of
// it is made; another tenant's queues are its own count.
func TestQueuesHaveAPerTenantLimit(t *testing.T) {
	t.Parallel()
	env := map[string]string{"QUEUE_LIMIT": "3"}
	for k, v := range limitsEnv {
		env[k] = v
	}
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), env)
	upsert := func(key, name string) answer {
		return do(t, "POST", ts.URL+"/v2/queues", "application/json", `{"queueName":"`+name+`","parallelism":1}`, bearer(key)...)
	}
	for i := range 3 {
		if a := upsert("acme-key", fmt.Sprintf("q%d", i)); a.status != 200 {
			t.Fatalf("queue %d of 3: %d %s", i, a.status, a.raw)
		}
	}
	if a := upsert("acme-key", "q0"); a.status != 200 {
		t.Errorf("upserting a queue acme has, at its limit: %d %s", a.status, a.raw)
	}
	over := []answer{upsert("acme-key", "q3"),
		do(t, "POST", ts.URL+"/v2/enqueue/q4/http://127.0.0.1:1/x", "text/plain", "x", bearer("acme-key")...),
		do(t, "POST", ts.URL+"/v2/publish/http://127.0.0.1:1/x", "text/plain", "x", append(bearer("acme-key"), "Upstash-Queue-Name", "q5")...),
		// A schedule's queue is made as a publish's is: the same limit.
		do(t, "POST", ts.URL+"/v2/schedules/http://127.0.0.1:1/x", "text/plain", "x",
			append(bearer("acme-key"), "Upstash-Cron", "* * * * *", "Upstash-Queue-Name", "q6")...)}
	for i, a := range over {
		if msg, _ := a.body["error"].(string); a.status != 409 || !strings.Contains(msg, "QUEUE_LIMIT") || !strings.Contains(msg, "3 queues") {
			t.Errorf("queue call %d past the limit: %d %s, want 409 naming QUEUE_LIMIT and 3 queues", i, a.status, a.raw)
		}
	}
	if a := do(t, "GET", ts.URL+"/v2/schedules", "", "", bearer("acme-key")...); a.status != 200 || strings.TrimSpace(a.raw) != "[]" {
		t.Errorf("the refused schedule was made: %d %s", a.status, a.raw)
	}
	for _, name := range []string{"q3", "q4", "q5", "q6"} {
		if a := do(t, "GET", ts.URL+"/v2/queues/"+name, "", "", bearer("acme-key")...); a.status != 404 {
			t.Errorf("the refused queue %s: %d %s, want 404", name, a.status, a.raw)
		}
	}
	if a := do(t, "GET", ts.URL+"/requests", "", "", bearer("acme-key")...); !strings.Contains(a.raw, `"data":[]`) {
		t.Errorf("refused enqueues made requests: %s", a.raw)
	}
	if a := upsert("beta-key", "q3"); a.status != 200 {
		t.Errorf("beta's first queue: %d %s", a.status, a.raw)
	}
	if a := do(t, "DELETE", ts.URL+"/v2/queues/q0", "", "", bearer("acme-key")...); a.status != 200 {
		t.Fatalf("delete: %d %s", a.status, a.raw)
	}
	if a := upsert("acme-key", "q3"); a.status != 200 {
		t.Errorf("a queue after one was deleted: %d %s", a.status, a.raw)
	}
}

// GET /v2/queues answers a JSON array (what the official clients read),
// a page at a time: count bounds it, and a Link header's cursor
// continues it until every queue was listed once.
func TestQueueListPages(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	want := map[string]bool{}
	for _, key := range []string{"acme-key", "beta-key"} {
		for i := range 4 {
			name := fmt.Sprintf("%s-q%d", key[:4], i)
			if a := do(t, "POST", ts.URL+"/v2/queues", "application/json", `{"queueName":"`+name+`"}`, bearer(key)...); a.status != 200 {
				t.Fatalf("upsert %s: %d %s", name, a.status, a.raw)
			}
			want[name] = true
		}
	}
	list := func(path, key string) ([]map[string]any, string) {
		t.Helper()
		resp := do(t, "GET", ts.URL+path, "", "", bearer(key)...)
		var page []map[string]any
		if resp.status != 200 || json.Unmarshal([]byte(resp.raw), &page) != nil {
			t.Fatalf("GET %s: %d %s, want 200 and a JSON array", path, resp.status, resp.raw)
		}
		next := ""
		if link := resp.header.Get("Link"); link != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
		return page, next
	}
	if page, next := list("/v2/queues", "acme-key"); len(page) != 4 || next != "" {
		t.Errorf("acme's default page: %d queues, next %q; want its 4 and no next", len(page), next)
	}
	seen := map[string]bool{}
	path := "/v2/queues?count=3"
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 3 for 8 queues")
		}
		var page []map[string]any
		page, path = list(path, "admin-key")
		if len(page) > 3 {
			t.Fatalf("a page of count=3 holds %d", len(page))
		}
		for _, q := range page {
			name, _ := q["name"].(string)
			if seen[name] {
				t.Errorf("%s listed twice", name)
			}
			seen[name] = true
		}
	}
	if !cmp.Equal(want, seen) {
		t.Errorf("pages listed %v, want %v", seen, want)
	}
	for _, bad := range []string{"count=0", "count=1001", "count=x", "cursor=nothing", "limit=5", "count=1&count=2"} {
		if a := do(t, "GET", ts.URL+"/v2/queues?"+bad, "", "", bearer("acme-key")...); a.status != 400 {
			t.Errorf("GET /v2/queues?%s: %d %s, want 400", bad, a.status, a.raw)
		}
	}
}

// The dashboard's actions on a queue or task that does not exist are 404
// as well.
func TestDashboardActionsOnWhatDoesNotExistAre404(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/monitoring/api/queues/nope"},
		{"DELETE", "/monitoring/api/queues/nope/archived_tasks/nope"},
		{"POST", "/monitoring/api/queues/nope/archived_tasks/nope:run"},
	} {
		if a := do(t, c.method, ts.URL+c.path, "", "", bearer("admin-key")...); a.status != 404 {
			t.Errorf("%s %s: %d %s, want 404", c.method, c.path, a.status, a.raw)
		}
	}
}

// A topic full of endpoints is a count limit like QUEUE_LIMIT and
// SCHEDULE_LIMIT: 409, on retryd's route and on QStash's.
func TestTopicLimitIs409LikeTheOtherCountLimits(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	eps := func(from, n int) string {
		var b strings.Builder
		b.WriteString(`{"endpoints":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"url":"http://127.0.0.1:1/e%d"}`, from+i)
		}
		b.WriteString("]}")
		return b.String()
	}
	if a := do(t, "POST", ts.URL+"/topics/orders/endpoints", "application/json", eps(0, 100), bearer("acme-key")...); a.status != 200 && a.status != 201 {
		t.Fatalf("100 endpoints: %d %s", a.status, a.raw)
	}
	a := do(t, "POST", ts.URL+"/topics/orders/endpoints", "application/json", eps(100, 1), bearer("acme-key")...)
	if code, _ := errorOf(t, a); a.status != 409 || code != "conflict" || !strings.Contains(a.raw, "100 endpoints") {
		t.Errorf("the 101st endpoint: %d %s, want 409 naming the limit", a.status, a.raw)
	}
	v2 := do(t, "POST", ts.URL+"/v2/topics/orders/endpoints", "application/json", eps(200, 1), bearer("acme-key")...)
	if msg, _ := v2.body["error"].(string); v2.status != 409 || !strings.Contains(msg, "limit") {
		t.Errorf("the 101st endpoint through /v2: %d %s, want 409", v2.status, v2.raw)
	}
}
