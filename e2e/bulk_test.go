package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Bulk calls of both APIs act on what they name, on the real programs:
// ids sent in a JSON body (as qstash-py sends them), a misspelled filter,
// a count and a messageId filter each once acted on every request.
func TestBulkCallsActOnWhatTheyName(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	dest := newDestination(t)
	publish := func(path string, headers ...string) string {
		t.Helper()
		a := call(t, "POST", s.api+"/v2/publish/"+dest.script(path, 404), "x", headers...)
		if a.status != 201 {
			t.Fatalf("publish to %s: %d %s", path, a.status, a.raw)
		}
		return a.body["messageId"].(string)
	}
	status := func(id string) string { return s.get(t, id)["status"].(string) }
	statuses := func(ids []string) string {
		var out []string
		for _, id := range ids {
			out = append(out, status(id))
		}
		return strings.Join(out, " ")
	}

	t.Run("messages.cancel", func(t *testing.T) {
		var waiting []string
		for i := 0; i < 4; i++ {
			waiting = append(waiting, publish(fmt.Sprintf("/later-%d", i), "Upstash-Delay", "1h"))
		}
		own := s.submit(t, fmt.Sprintf(`{"url":%q,"delayMs":3600000}`, dest.URL+"/own"))
		all := append(append([]string{}, waiting...), own)

		// qstash-py's cancel_many: the ids in the body.
		a := call(t, "DELETE", s.api+"/v2/messages", fmt.Sprintf(`{"messageIds":[%q]}`, waiting[0]))
		if a.status != 200 || a.body["cancelled"] != 1.0 {
			t.Fatalf("cancel_many of one id: %d %s", a.status, a.raw)
		}
		if got := statuses(all); got != "canceled pending pending pending pending" {
			t.Fatalf("after cancelling one by a body: %s", got)
		}
		for _, q := range []struct{ query, key string }{{"labeel=x", "labeel"}, {"label=nightly&hots=a", "hots"}, {"messageId=" + waiting[1], "messageId"}} {
			a := call(t, "DELETE", s.api+"/v2/messages?"+q.query, "")
			if a.status != 400 || !strings.Contains(a.raw, q.key) {
				t.Errorf("DELETE /v2/messages?%s: %d %s, want 400 naming %s", q.query, a.status, a.raw, q.key)
			}
		}
		if got := statuses(all); got != "canceled pending pending pending pending" {
			t.Fatalf("a refused call changed something: %s", got)
		}
		a = call(t, "DELETE", s.api+"/v2/messages?count=1&url="+dest.URL+"/later-3", "")
		if a.status != 200 || a.body["cancelled"] != 1.0 {
			t.Fatalf("cancel by url: %d %s", a.status, a.raw)
		}
		// {all: true} sends only a count: it caps the call.
		a = call(t, "DELETE", s.api+"/v2/messages?count=1", "")
		if a.status != 200 || a.body["cancelled"] != 1.0 {
			t.Fatalf("cancel all, count 1: %d %s", a.status, a.raw)
		}
		if got := statuses(all); strings.Count(got, "canceled") != 3 {
			t.Fatalf("after count=1: %s, want 3 canceled", got)
		}
	})

	t.Run("dlq", func(t *testing.T) {
		var failed []string
		for i := 0; i < 5; i++ {
			failed = append(failed, publish(fmt.Sprintf("/gone-%d", i), "Upstash-Retries", "0", "Upstash-Label", "batch"))
		}
		for _, id := range failed {
			if doc := s.waitTerminal(t, id, 15*time.Second); doc["status"] != "failed" {
				t.Fatalf("%s: %v", id, doc["status"])
			}
		}
		count := func() int {
			a := call(t, "GET", s.api+"/v2/dlq?label=batch", "")
			return len(a.body["messages"].([]any))
		}
		// listMessages({filter: {messageId}}) lists that one message.
		a := call(t, "GET", s.api+"/v2/dlq?messageId="+failed[2], "")
		if ms := a.body["messages"].([]any); a.status != 200 || len(ms) != 1 || ms[0].(map[string]any)["dlqId"] != failed[2] {
			t.Errorf("listMessages by messageId: %d %s", a.status, a.raw)
		}
		for _, req := range []struct{ method, path string }{
			{"DELETE", "/v2/dlq?labeel=x"}, {"POST", "/v2/dlq/retry?labeel=x"}, {"GET", "/v2/dlq?labeel=x"},
			{"DELETE", "/v2/dlq?count=0"}, {"DELETE", "/v2/dlq?dlqIds=" + failed[0] + "&label=batch"},
		} {
			if a := call(t, req.method, s.api+req.path, ""); a.status != 400 {
				t.Errorf("%s %s: %d %s, want 400", req.method, req.path, a.status, a.raw)
			}
		}
		if n := count(); n != 5 {
			t.Fatalf("refused calls changed the DLQ: %d entries, want 5", n)
		}
		// qstash-py's delete_many: ids in the body.
		a = call(t, "DELETE", s.api+"/v2/dlq", fmt.Sprintf(`{"dlqIds":[%q]}`, failed[0]))
		if a.status != 200 || a.body["deleted"] != 1.0 || count() != 4 {
			t.Fatalf("delete_many of one id: %d %s, %d left", a.status, a.raw, count())
		}
		a = call(t, "DELETE", s.api+"/v2/dlq?label=batch&count=1", "")
		if a.status != 200 || a.body["deleted"] != 1.0 || a.body["cursor"] == nil || count() != 3 {
			t.Fatalf("delete with count 1: %d %s, %d left", a.status, a.raw, count())
		}
		a = call(t, "POST", s.api+"/v2/dlq/retry", fmt.Sprintf(`{"dlqIds":[%q]}`, failed[1]))
		if rs := a.body["responses"].([]any); a.status != 200 || len(rs) != 1 || rs[0].(map[string]any)["messageId"] != failed[1] {
			t.Fatalf("retry of one id by body: %d %s", a.status, a.raw)
		}
	})

	t.Run("retryd's own DLQ", func(t *testing.T) {
		var failed []string
		for i := 0; i < 3; i++ {
			failed = append(failed, s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script(fmt.Sprintf("/own-gone-%d", i), 404))))
		}
		for _, id := range failed {
			s.waitTerminal(t, id, 15*time.Second)
		}
		for _, body := range []string{`{"failureClas":"client_error"}`, `{"ids":["` + failed[0] + `"],"host":"x"}`, `{"limit":0}`, `[1]`} {
			if a := call(t, "POST", s.api+"/dlq/redrive", body); a.status != 400 {
				t.Errorf("bulk redrive %s: %d %s, want 400", body, a.status, a.raw)
			}
		}
		if a := call(t, "GET", s.api+"/dlq?hots=x", ""); a.status != 400 || !strings.Contains(a.raw, "hots") {
			t.Errorf("GET /dlq?hots=x: %d %s", a.status, a.raw)
		}
		if a := call(t, "GET", s.api+"/requests?statsu=failed", ""); a.status != 400 {
			t.Errorf("GET /requests?statsu=failed: %d %s", a.status, a.raw)
		}
		if got := statuses(failed); got != "failed failed failed" {
			t.Fatalf("refused redrives changed something: %s", got)
		}
		a := call(t, "POST", s.api+"/dlq/redrive", `{"ids":["`+failed[1]+`"],"actor":"alice"}`)
		if rs := a.body["redriven"].([]any); a.status != 200 || len(rs) != 1 || rs[0] != failed[1] {
			t.Fatalf("bulk redrive of one id: %d %s", a.status, a.raw)
		}
	})
}
