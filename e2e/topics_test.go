package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Topics through retryd's own API and retryctl: endpoints checked by the
// destination rules, a publish making one request per endpoint (each with
// its own retries and DLQ entry), the publication linking them and
// counting their outcomes, an idempotent replay, and another tenant
// seeing none of it.
func TestTopicsFanOut(t *testing.T) {
	t.Parallel()
	const ka, kb = "topic-key-a", "topic-key-b"
	s := startStack(t, 1, "API_KEYS=team-a:"+ka+",team-b:"+kb)
	as := func(key, method, path, body string, headers ...string) answer {
		t.Helper()
		return call(t, method, s.api+path, body, append([]string{"Authorization", "Bearer " + key}, headers...)...)
	}
	dest := newDestination(t)
	ok, gone := dest.script("/t-ok", 200), dest.script("/t-gone", 410)

	refused := as(ka, "POST", "/topics/orders/endpoints", `{"endpoints":[{"url":"http://169.254.169.254/latest"}]}`)
	if refused.status != 422 || !strings.Contains(refused.raw, `"field":"endpoints[0].url"`) {
		t.Errorf("a link-local endpoint: %d %s, want 422 naming it", refused.status, refused.raw)
	}
	if a := as(ka, "GET", "/topics/orders", ""); a.status != 404 {
		t.Errorf("a refused add made the topic: %d %s", a.status, a.raw)
	}
	add := as(ka, "POST", "/topics/orders/endpoints", fmt.Sprintf(`{"endpoints":[{"name":"ok","url":%q},{"name":"gone","url":%q}]}`, ok, gone))
	if add.status != 200 || len(add.body["endpoints"].([]any)) != 2 || add.body["tenant"] != "team-a" {
		t.Fatalf("add endpoints: %d %s", add.status, add.raw)
	}
	if a := as(ka, "POST", "/topics/orders/requests", fmt.Sprintf(`{"url":%q}`, ok)); a.status != 400 {
		t.Errorf("a publish naming a url: %d %s", a.status, a.raw)
	}
	pub := as(ka, "POST", "/topics/orders/requests", `{"body":"order 1","maxRetries":0}`, "Idempotency-Key", "order-1")
	if pub.status != 202 || len(pub.body["requests"].([]any)) != 2 || pub.header.Get("Location") != "/publications/"+fmt.Sprint(pub.body["id"]) {
		t.Fatalf("publish: %d %s", pub.status, pub.raw)
	}
	pubID := pub.body["id"].(string)
	again := as(ka, "POST", "/topics/orders/requests", `{"body":"order 1","maxRetries":0}`, "Idempotency-Key", "order-1")
	if again.status != 200 || again.body["id"] != pubID || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a replay: %d %s", again.status, again.raw)
	}
	var last answer
	defer func() {
		if t.Failed() { // what the children say, for the log
			t.Logf("publication: %s", last.raw)
			reqs, _ := last.body["requests"].([]any)
			for _, r := range reqs {
				t.Logf("child: %s", as(ka, "GET", "/requests/"+r.(map[string]any)["id"].(string), "").raw)
			}
		}
	}()
	waitFor(t, 15*time.Second, "both requests to finish", func() bool {
		last = as(ka, "GET", "/publications/"+pubID, "")
		counts, _ := last.body["counts"].(map[string]any)
		return counts["completed"] == 1.0 && counts["failed"] == 1.0
	})
	if n := len(dest.calls("/t-ok")) + len(dest.calls("/t-gone")); n != 2 {
		t.Errorf("the endpoints were called %d times, want once each (the replay made nothing)", n)
	}
	var failed string
	for _, r := range as(ka, "GET", "/publications/"+pubID, "").body["requests"].([]any) {
		m := r.(map[string]any)
		doc := as(ka, "GET", "/requests/"+m["id"].(string), "")
		if doc.body["topic"] != "orders" || doc.body["publicationId"] != pubID || doc.body["url"] != m["url"] {
			t.Errorf("a child's document: %s", doc.raw)
		}
		if m["status"] == "failed" {
			failed = m["id"].(string)
		}
	}
	if dlq := as(ka, "GET", "/dlq", ""); !strings.Contains(dlq.raw, failed) || failed == "" {
		t.Errorf("the failed child %q is not in the DLQ: %s", failed, dlq.raw)
	}
	// Another tenant sees none of it.
	for _, path := range []string{"/topics/orders", "/publications/" + pubID} {
		if a := as(kb, "GET", path, ""); a.status != 404 {
			t.Errorf("team-b GET %s: %d %s", path, a.status, a.raw)
		}
	}
	if a := as(kb, "GET", "/topics", ""); strings.Contains(a.raw, "orders") {
		t.Errorf("team-b lists team-a's topic: %s", a.raw)
	}
	if a := as(kb, "POST", "/topics/orders/requests", `{"body":"x"}`); a.status != 404 {
		t.Errorf("team-b publishes to team-a's topic: %d %s", a.status, a.raw)
	}

	env := []string{"RETRYD_API_KEY=" + ka}
	out, _, code := s.retryctl(t, env, "topics", "list")
	if code != 0 || !strings.Contains(out, "orders") {
		t.Errorf("retryctl topics list (%d):\n%s", code, out)
	}
	out, _, code = s.retryctl(t, env, "topics", "publish", "orders", "--body", "from the CLI")
	if code != 0 || !strings.Contains(out, "publication:") || !strings.Contains(out, ok) {
		t.Errorf("retryctl topics publish (%d):\n%s", code, out)
	}
	waitFor(t, 15*time.Second, "the CLI's publish to reach its endpoint as a POST", func() bool {
		for _, h := range dest.calls("/t-ok") {
			if h.body == "from the CLI" {
				if h.method != "POST" {
					t.Fatalf("retryctl topics publish sent a %s, want POST (its --method default)", h.method)
				}
				return true
			}
		}
		return false
	})
	out, _, code = s.retryctl(t, env, "topics", "remove", "orders", "gone=")
	if code != 0 || strings.Contains(out, gone) {
		t.Errorf("retryctl topics remove by name (%d):\n%s", code, out)
	}
	if _, _, code := s.retryctl(t, env, "topics", "delete", "orders"); code != 0 {
		t.Errorf("retryctl topics delete: %d", code)
	}
	if a := as(ka, "GET", "/topics/orders", ""); a.status != 404 {
		t.Errorf("a deleted topic: %d", a.status)
	}
}
