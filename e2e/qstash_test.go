package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// The official @upstash/qstash client drives retryd's /v2 API: publish
// (JSON, raw with a method, deduplicated), messages.get and cancel, and a
// readable QstashError; every delivery passes the official Receiver.
func TestOfficialQStashClient(t *testing.T) {
	t.Parallel()
	const token, current, next = "qstash-token", "sig_current_1234567890", "sig_next_0987654321"
	s := startStack(t, 1, "API_KEYS="+token, "QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next)
	lines := oracle(t, nil, "qstash-oracle.js", s.api, token, current, next)
	var out struct {
		Published, Plain, Later, Flaky, Gone string
		Batch                                []string
		BulkCancelled                        map[string]int
		DLQIDs                               []string `json:"dlqIds"`
		DLQStatus                            []int
		Retried                              []string
		DLQAfter                             []string `json:"dlqAfter"`
		DedupSame                            bool
		GetURL                               string `json:"getUrl"`
		GetMethod                            string
		Cancelled                            map[string]int
		MissingThrew                         any
		Deliveries                           []struct {
			Path, Body, MessageID, Retried, Forwarded, Method string
			Verified                                          bool
			Error                                             *string
		}
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		t.Fatalf("oracle output %q: %v", lines, err)
	}
	if !out.DedupSame {
		t.Error("a deduplicated publish got a new message id")
	}
	if !strings.HasSuffix(out.GetURL, "/hook?a=1") || out.GetMethod != "POST" {
		t.Errorf("messages.get: url %q method %q", out.GetURL, out.GetMethod)
	}
	if out.Cancelled["cancelled"] != 1 {
		t.Errorf("messages.cancel answered %v", out.Cancelled)
	}
	if threw, _ := out.MissingThrew.(string); !strings.Contains(threw, "QstashError") {
		t.Errorf("messages.get of a missing id: %v, want a QstashError", out.MissingThrew)
	}
	if len(out.Batch) != 2 || out.BulkCancelled["cancelled"] != 2 {
		t.Errorf("batch %v, bulk cancel %v", out.Batch, out.BulkCancelled)
	}
	if len(out.DLQIDs) != 2 || len(out.DLQStatus) != 2 || out.DLQStatus[0] != 410 {
		t.Errorf("dlq.listMessages: ids %v statuses %v, want the 2 failed with 410", out.DLQIDs, out.DLQStatus)
	}
	if len(out.Retried) != 1 || out.Retried[0] != out.Flaky || len(out.DLQAfter) != 0 {
		t.Errorf("dlq.retry %v (want [%s]); DLQ after retry and delete %v (want empty)", out.Retried, out.Flaky, out.DLQAfter)
	}
	byPath := map[string]int{}
	for _, d := range out.Deliveries {
		byPath[strings.SplitN(d.Path, "?", 2)[0]]++
		if !d.Verified {
			t.Errorf("delivery to %s failed the official Receiver: %v", d.Path, d.Error)
		}
		wantRetried := "0"
		if d.Path == "/flaky" && byPath["/flaky"] == 2 {
			wantRetried = "1" // the delivery after dlq.retry is the message's second
		}
		if d.Retried != wantRetried || d.MessageID == "" {
			t.Errorf("delivery to %s: Upstash-Retried %q, Upstash-Message-Id %q", d.Path, d.Retried, d.MessageID)
		}
		switch d.Path {
		case "/hook?a=1":
			if d.Body != `{"hello":"world"}` || d.Forwarded != "42" || d.MessageID != out.Published {
				t.Errorf("publishJSON delivery: %+v", d)
			}
		case "/plain":
			if d.Method != "PUT" || d.Body != "raw body" {
				t.Errorf("publish delivery: %+v", d)
			}
		}
	}
	if byPath["/hook"] != 1 || byPath["/plain"] != 1 || byPath["/dedup"] != 1 || byPath["/later"] != 0 ||
		byPath["/batch-1"] != 1 || byPath["/batch-2"] != 1 || byPath["/later-1"]+byPath["/later-2"] != 0 || byPath["/flaky"] != 2 || byPath["/gone"] != 1 {
		t.Errorf("deliveries by path %v, want one each and none of the canceled one", byPath)
	}
	// A QStash message is a retryd request.
	doc := call(t, "GET", s.api+"/requests/"+out.Published, "", "Authorization", "Bearer "+token)
	if doc.status != 200 || doc.body["status"] != "completed" {
		t.Errorf("GET /requests/%s: %d %s", out.Published, doc.status, doc.raw)
	}
	if c := call(t, "GET", s.api+"/requests/"+out.Later, "", "Authorization", "Bearer "+token); c.body["status"] != "canceled" {
		t.Errorf("the canceled message is %v", c.body["status"])
	}
	// dlq.retry is a redrive in retryd's audit trail; dlq.delete removed the other.
	flaky := call(t, "GET", s.api+"/requests/"+out.Flaky, "", "Authorization", "Bearer "+token)
	if flaky.body["status"] != "completed" || flaky.body["redriveCount"] != 1.0 {
		t.Errorf("the retried message: %s", flaky.raw)
	}
	if g := call(t, "GET", s.api+"/requests/"+out.Gone, "", "Authorization", "Bearer "+token); g.status != 404 {
		t.Errorf("the deleted DLQ message: %d", g.status)
	}
	keys := call(t, "GET", s.api+"/v2/keys", "", "Authorization", "Bearer "+token)
	if keys.body["current"] != current || keys.body["next"] != next {
		t.Errorf("/v2/keys: %s", keys.raw)
	}
}
