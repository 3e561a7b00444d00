package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeTest runs a node:test suite of e2e/oracles (the official clients,
// pinned in its package-lock.json) with env, failing with its report.
func nodeTest(t *testing.T, suite string, env ...string) {
	t.Helper()
	oracle(t, nil, "--version") // installs the oracles when missing
	dir, _ := filepath.Abs("oracles")
	cmd := exec.Command("node", "--test", "--test-reporter=spec", suite)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test %s: %v\n%s", suite, err, out)
	}
	t.Logf("node --test %s:\n%s", suite, out)
}

// The official @upstash/qstash client drives retryd's /v2 API through a
// node:test suite (e2e/oracles/qstash.test.js): every call of the issue
// succeeds and every delivery and callback passes the official Receiver.
// Here, what the suite did is checked through retryd's own API: a QStash
// message is a retryd request.
func TestOfficialQStashClient(t *testing.T) {
	t.Parallel()
	const token, current, next = "qstash-token", "sig_current_1234567890", "sig_next_0987654321"
	s := startStack(t, 2, "API_KEYS="+token, "QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next)
	resultFile := filepath.Join(t.TempDir(), "result.json")
	nodeTest(t, "qstash.test.js", "RETRYD_URL="+s.api, "RETRYD_TOKEN="+token,
		"QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next, "RESULT_FILE="+resultFile)
	raw, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Published, Cancelled, KeptThenCancelled, DLQRetried, DLQDeleted, Tick string
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("suite result %s: %v", raw, err)
	}
	get := func(id string) answer {
		return call(t, "GET", s.api+"/requests/"+id, "", "Authorization", "Bearer "+token)
	}
	if doc := get(out.Published); doc.status != 200 || doc.body["status"] != "completed" {
		t.Errorf("GET /requests/%s: %d %s", out.Published, doc.status, doc.raw)
	}
	for _, id := range []string{out.Cancelled, out.KeptThenCancelled} {
		if c := get(id); c.body["status"] != "canceled" {
			t.Errorf("the canceled message %s is %v", id, c.body["status"])
		}
	}
	// dlq.retry is a redrive in retryd's audit trail; dlq.delete removed
	// the record.
	if r := get(out.DLQRetried); r.body["status"] != "completed" || r.body["redriveCount"] != 1.0 {
		t.Errorf("the retried DLQ message: %s", r.raw)
	}
	if g := get(out.DLQDeleted); g.status != 404 {
		t.Errorf("the deleted DLQ message: %d", g.status)
	}
	if tick := get(out.Tick); tick.status != 200 {
		t.Errorf("a schedule's tick: %d %s", tick.status, tick.raw)
	}
	keys := call(t, "GET", s.api+"/v2/keys", "", "Authorization", "Bearer "+token)
	if keys.body["current"] != current || keys.body["next"] != next {
		t.Errorf("/v2/keys: %s", keys.raw)
	}
	if a := call(t, "GET", s.api+"/v2/keys", ""); a.status != 401 {
		t.Errorf("/v2 without the token: %d", a.status)
	}
}

// go run ./cmd/api -dev is also QStash's local development server: an app
// with QSTASH_DEV=true and no credentials reaches it, and its Receiver
// (with the SDK's dev keys) accepts the deliveries.
func TestDevModeServesAsTheQStashDevServer(t *testing.T) {
	t.Parallel()
	port, qport := freePort(t), freePort(t)
	startProc(t, "api-dev", bin.api, []string{fmt.Sprintf("PORT=%d", port), "API_KEYS=some-key", "LOG_LEVEL=info"},
		"-dev", fmt.Sprintf("-qstash-dev=127.0.0.1:%d", qport))
	waitFor(t, 20*time.Second, "the dev server's QStash address", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", qport))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	nodeTest(t, "qstash-dev.test.js", "QSTASH_DEV=true", fmt.Sprintf("QSTASH_DEV_PORT=%d", qport))
	// API_KEYS still guards the API: the dev token is added, not a bypass.
	if a := call(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/v2/keys", qport), "", "Authorization", "Bearer wrong"); a.status != 401 {
		t.Errorf("a wrong token: %d", a.status)
	}
	if !strings.Contains(call(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/v2/keys", qport), "", "Authorization", "Bearer some-key").raw, "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r") {
		t.Error("-dev does not sign with the SDK's dev keys")
	}
	// The public dev token is a key of the QStash dev listener only: on
	// the main listener (and so the dashboard) it is refused.
	devToken := "eyJVc2VySUQiOiJkZWZhdWx0VXNlciIsIlBhc3N3b3JkIjoiZGVmYXVsdFBhc3N3b3JkIn0="
	for _, path := range []string{"/v2/keys", "/requests", "/monitoring/api/queues"} {
		if a := call(t, "GET", fmt.Sprintf("http://127.0.0.1:%d%s", port, path), "", "Authorization", "Bearer "+devToken); a.status != 401 {
			t.Errorf("the dev token on the main listener, GET %s: %d", path, a.status)
		}
	}
	if a := call(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/v2/keys", qport), "", "Authorization", "Bearer "+devToken); a.status != 200 {
		t.Errorf("the dev token on the QStash dev listener: %d %s", a.status, a.raw)
	}
}

// Through the official client, the /v2/publish answer and the failure
// callback show a message as every other view does: the URL's secrets,
// secret headers (by the words of their names, or a credential in the
// value) and what Upstash-Redact-Fields names are masked, the rest shown
// as sent (e2e/oracles/qstash-redaction.test.js).
func TestQStashPublishAnswerAndFailureCallbackAreRedacted(t *testing.T) {
	t.Parallel()
	const token, current, next = "qstash-token", "sig_current_1234567890", "sig_next_0987654321"
	s := startStack(t, 1, "API_KEYS="+token, "QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next)
	nodeTest(t, "qstash-redaction.test.js", "RETRYD_URL="+s.api, "RETRYD_TOKEN="+token,
		"QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next)
}
