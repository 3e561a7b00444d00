package e2e

import (
	"net/http"
	"testing"
	"time"
)

// What the official QStash Python SDK relies on, on the wire, against a
// real API and worker: 4xx answers retried on /v2 (and still permanent on
// retryd's own API), 489 with Upstash-NonRetryable-Error straight into the
// DLQ, GET /v2/dlq/{dlqId}, retryDelayExpr on log events, compound
// durations, the period QStash reports for parallelism alone, and a URL
// group's delete when it does not exist.
func TestQStashPythonSDKWire(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	d := newDestination(t)
	auth := []string{"Authorization", "Bearer any"}
	publish := func(t *testing.T, url string, headers ...string) string {
		t.Helper()
		a := call(t, "POST", s.api+"/v2/publish/"+url, `{"k":"v"}`, append(append([]string{}, auth...), headers...)...)
		if a.status != http.StatusCreated {
			t.Fatalf("publish to %s %v: %d %s", url, headers, a.status, a.raw)
		}
		return a.body["messageId"].(string)
	}
	v2 := func(t *testing.T, method, path string) answer {
		t.Helper()
		return call(t, method, s.api+path, "", auth...)
	}

	t.Run("a 4xx is retried on /v2, permanent on retryd's own API", func(t *testing.T) {
		// A 404 is retried on /v2, as QStash retries it...
		retried := publish(t, d.script("/missing", 404), "Upstash-Retries", "5", "Upstash-Retry-Delay", "500")
		waitFor(t, 20*time.Second, "a second attempt at the 404 destination", func() bool { return len(d.calls("/missing")) >= 2 })
		if m := v2(t, "GET", "/v2/messages/"+retried); m.status != 200 {
			t.Errorf("the retried message: %d %s", m.status, m.raw)
		}
		if g := v2(t, "GET", "/v2/dlq/"+retried); g.status != 404 {
			t.Errorf("the retried message is in the DLQ: %d %s", g.status, g.raw)
		}
		if c := v2(t, "DELETE", "/v2/messages/"+retried); c.status != 200 {
			t.Errorf("cancel the retried message: %d %s", c.status, c.raw)
		}
		// ...while retryd's own API keeps a 404 permanent.
		own := s.submit(t, `{"url":"`+d.script("/own-missing", 404)+`","maxRetries":5,"backoffMs":100}`)
		if doc := s.waitTerminal(t, own, 20*time.Second); doc["status"] != "failed" || doc["attemptCount"] != 1.0 {
			t.Errorf("retryd's own request to a 404: status %v after %v attempts", doc["status"], doc["attemptCount"])
		}
	})

	t.Run("489 with Upstash-NonRetryable-Error goes into the DLQ at once, shown by GET /v2/dlq/{dlqId}", func(t *testing.T) {
		d.mu.Lock()
		d.headers["/stop"] = http.Header{"Upstash-Nonretryable-Error": {"true"}}
		d.mu.Unlock()
		stopped := publish(t, d.script("/stop", 489), "Upstash-Retries", "5", "Upstash-Retry-Delay", "7000 * retried")
		var entry answer
		waitFor(t, 20*time.Second, "the 489 message in the DLQ", func() bool {
			entry = v2(t, "GET", "/v2/dlq/"+stopped)
			return entry.status == 200
		})
		if entry.body["dlqId"] != stopped || entry.body["messageId"] != stopped || entry.body["responseStatus"] != 489.0 ||
			entry.body["retryDelayExpression"] != "7000 * retried" || entry.body["responseBody"] != "answer 489 to call 1" {
			t.Errorf("GET /v2/dlq/%s: %s", stopped, entry.raw)
		}
		if n := len(d.calls("/stop")); n != 1 {
			t.Errorf("the 489 destination was called %d times, want once", n)
		}
		if g := v2(t, "GET", "/v2/dlq/"+publish(t, d.script("/fine", 200))); g.status != 404 {
			t.Errorf("GET /v2/dlq of a message not in the DLQ: %d %s", g.status, g.raw)
		}
	})

	t.Run("log events carry retryDelayExpr", func(t *testing.T) {
		delivered := publish(t, d.script("/ok", 200), "Upstash-Retry-Delay", "15000")
		waitFor(t, 20*time.Second, "the DELIVERED event", func() bool {
			ev := v2(t, "GET", "/v2/events?messageId="+delivered+"&state=DELIVERED")
			list, _ := ev.body["events"].([]any)
			if len(list) != 1 {
				return false
			}
			if e := list[0].(map[string]any); e["retryDelayExpr"] != "15000" {
				t.Fatalf("the DELIVERED event: %v", e)
			}
			return true
		})
	})

	t.Run("compound durations", func(t *testing.T) {
		later := publish(t, d.script("/later", 200), "Upstash-Delay", "1h30m3s", "Upstash-Timeout", "1m30s")
		m := v2(t, "GET", "/v2/messages/"+later)
		if nb, _ := m.body["notBefore"].(float64); time.Until(time.UnixMilli(int64(nb))) < 90*time.Minute {
			t.Errorf("Upstash-Delay 1h30m3s: notBefore %v", m.body["notBefore"])
		}
	})

	t.Run("flow control periods as QStash reports them", func(t *testing.T) {
		for value, want := range map[string][3]float64{"rate=23, period=1h30m3s": {0, 23, 5403}, "parallelism=5": {5, 0, 1}, "rate=1": {0, 1, 1}} {
			id := publish(t, d.script("/fc", 200), "Upstash-Flow-Control-Key", "py-key", "Upstash-Flow-Control-Value", value)
			got := v2(t, "GET", "/v2/messages/"+id)
			p, _ := got.body["parallelism"].(float64)
			r, _ := got.body["rate"].(float64)
			if [3]float64{p, r, got.body["period"].(float64)} != want {
				t.Errorf("flow control %q: the message says %s", value, got.raw)
			}
		}
		sched := call(t, "POST", s.api+"/v2/schedules/"+d.script("/sched", 200), "", append(append([]string{}, auth...),
			"Upstash-Cron", "1 1 1 1 1", "Upstash-Flow-Control-Key", "py-key", "Upstash-Flow-Control-Value", "parallelism=2")...)
		if sched.status/100 != 2 {
			t.Fatalf("create a schedule: %d %s", sched.status, sched.raw)
		}
		if sc := v2(t, "GET", "/v2/schedules/"+sched.body["scheduleId"].(string)); sc.body["period"] != 1.0 || sc.body["parallelism"] != 2.0 {
			t.Errorf("the schedule's flow control: %s", sc.raw)
		}
	})

	t.Run("deleting a missing URL group is 200, as on QStash", func(t *testing.T) {
		if del := v2(t, "DELETE", "/v2/topics/never-made"); del.status != 200 {
			t.Errorf("DELETE a missing URL group: %d %s", del.status, del.raw)
		}
	})
}
