package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/retry"
)

// One stack (redis, api, two workers) serves every scenario of the core
// delivery contract; each scenario uses its own destination path.
func TestCoreDelivery(t *testing.T) {
	s := startStack(t, 2)
	dest := newDestination(t)

	t.Run("fails 3 times then succeeds", func(t *testing.T) {
		t.Parallel()
		url := dest.script("/flaky", 500, 502, 503, 200)
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"method":"POST","body":"payload","maxRetries":5,"backoffMs":200}`, url))
		doc := s.waitTerminal(t, id, 20*time.Second)
		hits := dest.calls("/flaky")
		if doc["status"] != "completed" || doc["attemptCount"] != 4.0 || len(hits) != 4 {
			t.Fatalf("status %v attemptCount %v hits %d; want completed, 4, 4", doc["status"], doc["attemptCount"], len(hits))
		}
		attempts := doc["attempts"].([]any)
		outcomes := []string{}
		for _, a := range attempts {
			outcomes = append(outcomes, a.(map[string]any)["outcome"].(string))
		}
		if strings.Join(outcomes, ",") != "retryable,retryable,retryable,success" {
			t.Errorf("outcomes %v", outcomes)
		}
		if doc["result"] != "answer 200 to call 4" {
			t.Errorf("result %v", doc["result"])
		}
		p := retry.Policy{Base: 200 * time.Millisecond, Max: time.Hour}
		for i, h := range hits {
			if h.header.Get("Idempotency-Key") != id || h.header.Get("Retryd-Request-Id") != id ||
				h.header.Get("Retryd-Attempt") != fmt.Sprint(i+1) || h.body != "payload" {
				t.Errorf("call %d carried %v body %q", i+1, h.header, h.body)
			}
			if i == 0 {
				continue
			}
			// Retry n waits raw(n)·U(0.8,1.2) after the previous attempt
			// ended; the attempts here take about a millisecond. Late is
			// bounded widely for a loaded machine (the timer's promise is
			// 150 ms at worst), and still catches a retry left to asynq's
			// whole seconds or to a timer's once-a-second look.
			gap := h.at.Sub(hits[i-1].at)
			raw := p.Raw(i)
			lo, hi := time.Duration(float64(raw)*0.8), time.Duration(float64(raw)*1.2)+250*time.Millisecond
			if gap < lo || gap > hi {
				t.Errorf("gap before attempt %d = %v, want within [%v, %v]", i+1, gap, lo, hi)
			}
		}
	})

	t.Run("404 fails at once", func(t *testing.T) {
		t.Parallel()
		url := dest.script("/gone", 404)
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":5,"backoffMs":100}`, url))
		doc := s.waitTerminal(t, id, 10*time.Second)
		if doc["status"] != "failed" || doc["failureClass"] != "client_error" || doc["lastStatusCode"] != 404.0 {
			t.Errorf("doc %v", doc)
		}
		// Nothing more arrives afterwards.
		time.Sleep(300 * time.Millisecond)
		if n := len(dest.calls("/gone")); n != 1 {
			t.Errorf("destination hit %d times, want 1", n)
		}
	})

	t.Run("503 with maxRetries 2 fails after 3 attempts", func(t *testing.T) {
		t.Parallel()
		url := dest.script("/down", 503)
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":2,"backoffMs":100}`, url))
		doc := s.waitTerminal(t, id, 10*time.Second)
		if doc["status"] != "failed" || doc["attemptCount"] != 3.0 || doc["failureClass"] != "server_error" {
			t.Errorf("doc %v", doc)
		}
		time.Sleep(300 * time.Millisecond)
		if n := len(dest.calls("/down")); n != 3 {
			t.Errorf("destination hit %d times, want 3", n)
		}
	})

	t.Run("delayMs 2000 is not attempted early", func(t *testing.T) {
		t.Parallel()
		url := dest.script("/later", 200)
		submitted := time.Now()
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"delayMs":2000}`, url))
		doc := s.waitTerminal(t, id, 10*time.Second)
		hits := dest.calls("/later")
		if doc["status"] != "completed" || len(hits) != 1 {
			t.Fatalf("doc %v hits %d", doc["status"], len(hits))
		}
		// Never early; late within a bound wide for a loaded machine that
		// still catches a delay left to asynq's whole seconds.
		if d := hits[0].at.Sub(submitted); d < 2*time.Second || d > 2*time.Second+500*time.Millisecond {
			t.Errorf("first attempt %v after submit, want 2s (never early)", d)
		}
	})

	t.Run("cancel stops further attempts", func(t *testing.T) {
		t.Parallel()
		url := dest.script("/cancel-me", 500)
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":5,"backoffMs":1500}`, url))
		waitFor(t, 5*time.Second, "first attempt", func() bool { return len(dest.calls("/cancel-me")) == 1 })
		waitFor(t, 5*time.Second, "retrying status", func() bool { return s.get(t, id)["status"] == "retrying" })
		a := call(t, "DELETE", s.api+"/requests/"+id, "")
		if a.status != 200 || a.body["status"] != "canceled" {
			t.Fatalf("cancel: %d %s", a.status, a.raw)
		}
		time.Sleep(2500 * time.Millisecond) // past the 1.5s·1.2 retry time
		if n := len(dest.calls("/cancel-me")); n != 1 {
			t.Errorf("destination hit %d times after cancel, want 1", n)
		}
		if doc := s.get(t, id); doc["status"] != "canceled" {
			t.Errorf("status %v after cancel", doc["status"])
		}
	})

	t.Run("list by status", func(t *testing.T) {
		t.Parallel()
		okURL := dest.script("/list-ok", 200)
		badURL := dest.script("/list-bad", 400)
		okID := s.submit(t, fmt.Sprintf(`{"url":%q}`, okURL))
		badID := s.submit(t, fmt.Sprintf(`{"url":%q}`, badURL))
		s.waitTerminal(t, okID, 10*time.Second)
		s.waitTerminal(t, badID, 10*time.Second)
		for status, want := range map[string]string{"completed": okID, "failed": badID} {
			a := call(t, "GET", s.api+"/requests?status="+status+"&limit=500", "")
			found := false
			for _, d := range a.body["data"].([]any) {
				doc := d.(map[string]any)
				if doc["status"] != status {
					t.Errorf("status=%s listed a %v request", status, doc["status"])
				}
				found = found || doc["id"] == want
			}
			if !found {
				t.Errorf("status=%s does not list %s", status, want)
			}
		}
	})

	t.Run("validation errors", func(t *testing.T) {
		t.Parallel()
		for body, field := range map[string]string{
			`{"method":"GET"}`:                                         "url",
			`{"url":"https://e.com","maxRetries":26}`:                  "maxRetries",
			`{"url":"https://e.com","backoffMs":50}`:                   "backoffMs",
			`{"url":"https://e.com","timeoutMs":1000000}`:              "timeoutMs",
			`{"url":"https://e.com","headers":{"Connection":"close"}}`: "headers",
		} {
			a := call(t, "POST", s.api+"/request", body)
			e, _ := a.body["error"].(map[string]any)
			if a.status != 400 || e["field"] != field {
				t.Errorf("%s: %d %s, want 400 naming %s", body, a.status, a.raw, field)
			}
		}
	})
}
