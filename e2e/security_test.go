package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIdempotencyKeyAbsorbsConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s := startStack(t, 2)
	dest := newDestination(t)
	url := dest.script("/charge", 200)
	body := fmt.Sprintf(`{"url":%q,"method":"POST","body":"charge 10 EUR"}`, url)

	const n = 50
	var wg sync.WaitGroup
	answers := make([]answer, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			answers[i] = call(t, "POST", s.api+"/requests", body, "Idempotency-Key", "charge-7")
		}(i)
	}
	close(start)
	wg.Wait()
	ids := map[string]bool{}
	accepted := 0
	for _, a := range answers {
		switch a.status {
		case 202:
			accepted++
		case 200:
			if a.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("replay without Idempotent-Replayed: %v", a.header)
			}
		default:
			t.Fatalf("submission answered %d %s", a.status, a.raw)
		}
		ids[a.body["id"].(string)] = true
	}
	if accepted != 1 || len(ids) != 1 {
		t.Fatalf("%d accepted, %d distinct ids; want exactly 1 and 1", accepted, len(ids))
	}
	var id string
	for k := range ids {
		id = k
	}
	doc := s.waitTerminal(t, id, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // room for a duplicate delivery to show up
	if hits := dest.calls("/charge"); doc["status"] != "completed" || len(hits) != 1 {
		t.Errorf("status %v, %d deliveries; want completed and 1", doc["status"], len(hits))
	}
	if list := call(t, "GET", s.api+"/requests", ""); len(list.body["data"].([]any)) != 1 {
		t.Errorf("list holds %d requests, want 1", len(list.body["data"].([]any)))
	}
}

func TestSubmittersKeyReachesTheDestinationOnEveryAttempt(t *testing.T) {
	t.Parallel()
	s := startStack(t, 2)
	dest := newDestination(t)
	url := dest.script("/flaky", 503, 500, 200)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"backoffMs":100}`, url), "Idempotency-Key", "invoice-99")
	s.waitTerminal(t, id, 10*time.Second)
	hits := dest.calls("/flaky")
	if len(hits) != 3 {
		t.Fatalf("%d hits, want 3", len(hits))
	}
	for i, h := range hits {
		if got := h.header.Get("Idempotency-Key"); got != "invoice-99" {
			t.Errorf("attempt %d carried Idempotency-Key %q, want the submitter's invoice-99", i+1, got)
		}
	}
	if doc := s.get(t, id); doc["idempotencyKey"] != "invoice-99" {
		t.Errorf("idempotencyKey %v", doc["idempotencyKey"])
	}
}

// With the defaults, loopback and the cloud metadata address are refused
// at submit, and nothing reaches them.
func TestDefaultsBlockLoopbackAndMetadataEndToEnd(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, nil, nil)
	dest := newDestination(t)
	url := dest.script("/internal", 200)
	for _, target := range []string{url, "http://169.254.169.254/latest/meta-data/", "http://[::1]:9/x", "http://localhost:9/x"} {
		a := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q}`, target))
		e, _ := a.body["error"].(map[string]any)
		if a.status != 422 || e["code"] != "blocked_destination" || e["field"] != "url" {
			t.Errorf("%s: %d %s, want 422 blocked_destination", target, a.status, a.raw)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(dest.calls("/internal")); n != 0 {
		t.Errorf("the loopback destination was called %d times", n)
	}
}

// An API that lets a private destination through does not make the worker
// call it: the worker checks the address it dials.
func TestWorkerRefusesPrivateAddressAtDialTime(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, []string{"ALLOW_PRIVATE_TARGETS=true"}, nil)
	dest := newDestination(t)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":3,"backoffMs":100}`, dest.script("/private", 200)))
	doc := s.waitTerminal(t, id, 10*time.Second)
	if doc["status"] != "failed" || doc["failureClass"] != "blocked_destination" || doc["attemptCount"] != 0.0 {
		t.Errorf("doc: status %v class %v attempts %v; want failed blocked_destination with no attempt counted (no call was made)",
			doc["status"], doc["failureClass"], doc["attemptCount"])
	}
	if as, _ := doc["attempts"].([]any); len(as) != 1 || as[0].(map[string]any)["called"] != false {
		t.Errorf("attempts %v; want one entry with called: false", doc["attempts"])
	}
	if n := len(dest.calls("/private")); n != 0 {
		t.Errorf("destination called %d times", n)
	}
}

func TestSecretsAreRedactedInAnswersAndLogsButDelivered(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1, "LOG_LEVEL=debug")
	dest := newDestination(t)
	url := dest.script("/secret", 500, 200)
	secrets := map[string]string{
		"Authorization": "Bearer sk_live_AUTHSECRET", "X-Api-Key": "APIKEYSECRET",
		"X-Session-Token": "TOKENSECRET", "Cookie": "sid=COOKIESECRET", "X-Webhook-Secret": "WEBHOOKSECRET",
	}
	var hdr []string
	for k, v := range secrets {
		hdr = append(hdr, fmt.Sprintf("%q:%q", k, v))
	}
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"backoffMs":100,"headers":{%s,"X-Plain":"plain-value"}}`, url, strings.Join(hdr, ",")))
	s.waitTerminal(t, id, 10*time.Second)

	hits := dest.calls("/secret")
	if len(hits) != 2 {
		t.Fatalf("%d hits, want 2", len(hits))
	}
	for _, h := range hits {
		for k, v := range secrets {
			if h.header.Get(k) != v {
				t.Errorf("destination got %s=%q, want the real value", k, h.header.Get(k))
			}
		}
	}
	doc := call(t, "GET", s.api+"/requests/"+id, "")
	list := call(t, "GET", s.api+"/requests", "")
	logs := ""
	for _, p := range append([]*proc{s.apiProc}, s.workers...) {
		b, _ := os.ReadFile(p.log)
		logs += string(b)
	}
	if !strings.Contains(logs, id) {
		t.Fatal("logs do not mention the request at all; the check below would prove nothing")
	}
	for _, v := range secrets {
		secret := v[strings.LastIndexAny(v, " =")+1:]
		for where, text := range map[string]string{"GET document": doc.raw, "list": list.raw, "logs": logs} {
			if strings.Contains(text, secret) {
				t.Errorf("%s leaks %s", where, secret)
			}
		}
	}
	if h := doc.body["headers"].(map[string]any); h["X-Plain"] != "plain-value" || h["Authorization"] != "[REDACTED]" {
		t.Errorf("headers shown as %v", h)
	}
}
