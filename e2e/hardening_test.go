package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A destination's response headers are capped at 64 KiB in all: over the
// cap the attempt fails with an error that says so (the worker reads no
// more of them), under it the answer counts as usual.
func TestResponseHeadersAreCapped(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	huge := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("a", 1<<20))
		w.WriteHeader(200)
	})
	fits := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 60<<10))
		w.WriteHeader(200)
	})
	over := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, huge+"/h"))
	under := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, fits+"/h"))
	doc := s.waitTerminal(t, over, 15*time.Second)
	if last, _ := doc["lastError"].(string); doc["status"] != "failed" || !strings.Contains(last, "headers exceeded 65536 bytes") {
		t.Errorf("1 MiB of headers: status %v, lastError %q; want failed saying the headers exceeded 65536 bytes", doc["status"], last)
	}
	if doc := s.waitTerminal(t, under, 15*time.Second); doc["status"] != "completed" {
		t.Errorf("60 KiB of headers: %v %v, want completed", doc["status"], doc["lastError"])
	}
}

// Dashboard actions are retryd's, decided on the request's real state:
// asynqmon's cancel of an active task is retryd's cancel (final, actor
// dashboard), never a failed attempt that lands in the DLQ; a route of the
// archived list naming a live task cannot delete it behind retryd's back.
func TestDashboardActionsMatchWhatTheyDo(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	dash := s.api + "/monitoring/api/queues/retryd"
	active := func() string {
		t.Helper()
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0,"timeoutMs":60000}`, slow+"/hold"))
		waitFor(t, 10*time.Second, "the attempt in flight", func() bool {
			return s.get(t, id)["attemptCount"] == 1.0
		})
		return id
	}
	expectCanceled := func(id string) {
		t.Helper()
		var doc map[string]any
		waitFor(t, 10*time.Second, id+" canceled, its attempt over", func() bool {
			doc = s.get(t, id)
			return doc["status"] == "canceled" && len(doc["attempts"].([]any)) == 1
		})
		// No late write may turn it into a failure (it would land in the DLQ).
		for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); {
			if doc = s.get(t, id); doc["status"] != "canceled" || doc["canceledBy"] != "dashboard" {
				t.Fatalf("%s: status %v canceledBy %v, want canceled by dashboard", id, doc["status"], doc["canceledBy"])
			}
		}
	}

	one := active()
	if a := call(t, "POST", dash+"/active_tasks/"+one+":cancel", ""); a.status != 204 {
		t.Fatalf("cancel of an active task: %d %s", a.status, a.raw)
	}
	expectCanceled(one)
	if a := call(t, "POST", dash+"/active_tasks/"+one+":cancel", ""); a.status != 409 {
		t.Errorf("cancel of a canceled request: %d %s, want 409", a.status, a.raw)
	}
	two := active()
	a := call(t, "POST", dash+"/active_tasks:batch_cancel", fmt.Sprintf(`{"task_ids":[%q]}`, two))
	if ids, _ := a.body["canceled_ids"].([]any); a.status != 200 || len(ids) != 1 || ids[0] != two {
		t.Fatalf("batch cancel: %d %s", a.status, a.raw)
	}
	expectCanceled(two)
	if a := call(t, "POST", dash+"/active_tasks:cancel_all", ""); a.status != 409 {
		t.Errorf("cancel_all: %d %s, want 409", a.status, a.raw)
	}

	// A delayed request named through the archived list.
	later := s.submit(t, fmt.Sprintf(`{"url":%q,"delayMs":600000}`, slow+"/later"))
	if a := call(t, "POST", dash+"/archived_tasks/"+later+":run", ""); a.status != 409 {
		t.Errorf("run of a delayed request through the archived list: %d %s, want 409", a.status, a.raw)
	}
	if a := call(t, "POST", dash+"/pending_tasks/"+later+":archive", ""); a.status != 409 {
		t.Errorf("archive of a delayed request: %d %s, want 409", a.status, a.raw)
	}
	if doc := s.get(t, later); doc["status"] != "pending" {
		t.Fatalf("refused actions changed the request: %v", doc["status"])
	}
	if a := call(t, "DELETE", dash+"/archived_tasks/"+later, ""); a.status != 204 {
		t.Fatalf("delete through the archived list: %d %s", a.status, a.raw)
	}
	if doc := s.get(t, later); doc["status"] != "canceled" || doc["canceledBy"] != "dashboard" {
		t.Errorf("a live request deleted through the archived list: %v by %v, want canceled by dashboard", doc["status"], doc["canceledBy"])
	}
}

// A request without a valid key is answered 401 at once, before its body
// is read: a body that never arrives holds nothing (the connection is
// closed after the answer).
func TestUnauthenticatedRequestsAreRefusedBeforeTheirBody(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0, "API_KEYS=the-key")
	addr := strings.TrimPrefix(s.api, "http://")
	for _, auth := range []string{"", "Authorization: Bearer wrong\r\n"} {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /requests HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n%s\r\n{\"url\":", addr, auth)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer while the body is still due (%q): %v", auth, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !resp.Close {
			t.Errorf("answer %d (close %v) with auth %q, want 401 and the connection closed", resp.StatusCode, resp.Close, auth)
		}
	}
}

// QStash headers parse without overflow, Upstash-Failure-Callback follows
// the callbackUrl rules, and the framing headers the official SDKs forward
// are dropped on /v2 (retryd's own API stays strict about them).
func TestQStashHeadersParseSafely(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	dest := newDestination(t)
	publish := func(headers ...string) answer {
		return call(t, "POST", s.api+"/v2/publish/"+dest.script("/qstash-headers", 200), "hello", headers...)
	}
	for _, h := range [][2]string{
		{"Upstash-Timeout", "18446744073710s"}, {"Upstash-Delay", "213504d"}, {"Upstash-Delay", "9223372036854775807"},
		{"Upstash-Not-Before", "99999999999999"}, {"Upstash-Retries", "99999999999999999999"},
		{"Upstash-Failure-Callback", "http://user:pass@example.com/cb"}, {"Upstash-Failure-Callback", "ftp://example.com/cb"},
	} {
		if a := publish(h[0], h[1]); a.status != 400 || !strings.Contains(a.raw, h[0]) {
			t.Errorf("%s: %s: %d %s, want 400 naming it", h[0], h[1], a.status, a.raw)
		}
	}
	a := publish("Upstash-Forward-Content-Length", "999", "Upstash-Forward-Host", "evil.example", "Upstash-Forward-Connection", "close",
		"Upstash-Forward-Transfer-Encoding", "chunked", "Upstash-Forward-X-Kept", "yes")
	if a.status != 201 {
		t.Fatalf("publish with forwarded framing headers: %d %s", a.status, a.raw)
	}
	id := a.body["messageId"].(string)
	if doc := s.waitTerminal(t, id, 10*time.Second); doc["status"] != "completed" {
		t.Fatalf("the message: %v %v", doc["status"], doc["lastError"])
	}
	hit := dest.calls("/qstash-headers")[0]
	if hit.header.Get("X-Kept") != "yes" || hit.body != "hello" {
		t.Errorf("the delivery lost a forwarded header or its body: %v %q", hit.header, hit.body)
	}
	if a := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"headers":{"Content-Length":"5"}}`, dest.URL)); a.status != 400 {
		t.Errorf("/requests with a Content-Length header: %d, want 400", a.status)
	}
}

// asynqmon shows a request's own budget: a task's retry count and max
// retry read as the attempts of the request's run and the run's budget
// (maxRetries + 1), the words every surface uses, never asynq's counts.
func TestDashboardShowsTheRequestsBudget(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	dest := newDestination(t)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":2,"backoffMs":60000,"maxBackoffMs":60000}`, dest.script("/budget", 500)))
	var task map[string]any
	waitFor(t, 15*time.Second, "the request's task waiting for its retry", func() bool {
		a := call(t, "GET", s.api+"/monitoring/api/queues/retryd/retry_tasks", "")
		list, _ := a.body["tasks"].([]any)
		for _, x := range list {
			if m := x.(map[string]any); m["id"] == id {
				task = m
				return true
			}
		}
		return false
	})
	// The run's attempts of its budget (maxRetries 2: 3 allowed), not
	// asynq's retry count of its max (which adds room for interruptions
	// and would read 1 of 5, as if 4 were left).
	if task["max_retry"] != 3.0 || task["retried"] != 1.0 {
		t.Errorf("the dashboard shows %v of %v, want 1 attempt of the run's 3 allowed", task["retried"], task["max_retry"])
	}
}
