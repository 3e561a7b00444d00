package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// A tenant's payload retention, through the real programs: its requests'
// payloads are erased after it (the worker's sweeper), and every view says
// so — the API's document and list, the QStash message, retryctl — while
// another tenant's payloads stay. The API refuses a retention under a
// minute, so the test writes a one-second one where the API keeps it.
func TestPayloadRetentionShowsEverywhere(t *testing.T) {
	const admin, gdpr = "admin-key", "gdpr-key"
	r := redistest.StartServer(t, redistest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Client().HSet(ctx, record.RetentionKey, "gdpr", "0 1000").Err(); err != nil {
		t.Fatal(err)
	}
	s := startStackOn(t, r, 1, "API_KEYS="+admin+",gdpr:"+gdpr, "SWEEP_INTERVAL=1s")
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }
	dest := newDestination(t)

	ret := call(t, "GET", s.api+"/tenants/gdpr/retention", "", as(gdpr)...)
	if ret.status != 200 || ret.body["payloadRetention"] != "1s" || ret.body["retention"] != "30d" {
		t.Fatalf("the tenant's retention: %d %s", ret.status, ret.raw)
	}
	submit := func(key string) string {
		a := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"method":"POST","headers":{"X-Card":"4242"},"body":"card 4242"}`,
			dest.script("/retention", 200)), append(as(key), "Content-Type", "application/json")...)
		if a.status != 202 {
			t.Fatalf("submit: %d %s", a.status, a.raw)
		}
		return a.body["id"].(string)
	}
	expiring, kept := submit(gdpr), submit(admin)
	msg := call(t, "POST", s.api+"/v2/publish/"+dest.script("/retention-v2", 200), "card 4242", as(gdpr)...)
	if msg.status != 201 && msg.status != 200 {
		t.Fatalf("publish: %d %s", msg.status, msg.raw)
	}
	msgID := msg.body["messageId"].(string)

	get := func(id string) answer { return call(t, "GET", s.api+"/requests/"+id, "", as(admin)...) }
	waitFor(t, 20*time.Second, "the tenant's payloads to expire", func() bool {
		return get(expiring).body["expunged"] == true && get(msgID).body["expunged"] == true
	})
	doc := get(expiring)
	if doc.body["status"] != "completed" || doc.body["expungedBy"] != "retention" || doc.body["expungedAt"] == nil ||
		strings.Contains(doc.raw, "4242") || doc.body["lastStatusCode"] != 200.0 {
		t.Errorf("the document after its payload retention: %s", doc.raw)
	}
	if atts, _ := doc.body["attempts"].([]any); len(atts) != 1 || atts[0].(map[string]any)["expunged"] != true {
		t.Errorf("its attempt: %s", doc.raw)
	}
	list := call(t, "GET", s.api+"/requests?limit=10", "", as(gdpr)...)
	for _, row := range list.body["data"].([]any) {
		if m := row.(map[string]any); m["expunged"] != true || m["expungedBy"] != "retention" {
			t.Errorf("a row of the tenant's list: %v", m)
		}
	}
	if v2 := call(t, "GET", s.api+"/v2/messages/"+msgID, "", as(gdpr)...); v2.body["expunged"] != true || strings.Contains(v2.raw, "4242") {
		t.Errorf("the QStash message: %d %s", v2.status, v2.raw)
	}
	out, errOut, code := s.retryctl(t, []string{"RETRYD_API_KEY=" + admin}, "get", expiring)
	if code != 0 || !strings.Contains(out, "expired at") || !strings.Contains(out, "payload retention ended") {
		t.Errorf("retryctl get (%d): %s %s", code, out, errOut)
	}
	// Another tenant's payload (the default: as long as the record) stays.
	if k := get(kept); k.body["expunged"] != false || !strings.Contains(k.raw, `"X-Card":"4242"`) || !strings.Contains(k.raw, "answer 200") {
		t.Errorf("the other tenant's request: %s", k.raw)
	}
}
