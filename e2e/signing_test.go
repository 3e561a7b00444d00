package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oracle runs script (in e2e/oracles, with the official npm packages
// pinned in its package-lock.json) with input on stdin and returns its
// output lines. `make deps` installs the packages; a bare `go test`
// installs them here if they are missing.
func oracle(t *testing.T, input []byte, script string, args ...string) []string {
	t.Helper()
	dir, _ := filepath.Abs("oracles")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--silent")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in e2e/oracles (needs node, npm and the npm registry; `make deps` does it): %v\n%s", err, out)
		}
	}
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\n%s", script, err, out, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// Every delivery and callback carries Standard Webhooks headers that the
// reference implementation (npm standardwebhooks) accepts with each of the
// rotating secrets; webhook-id stays the request's across attempts and
// redrives.
func TestDeliveriesAndCallbacksAreSignedWithStandardWebhooks(t *testing.T) {
	t.Parallel()
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_" + strings.Repeat("cm90YXRl", 4)}
	s := startStack(t, 1, "SIGNING_SECRETS="+strings.Join(secrets, ","), "CALLBACK_SIGNING_SECRET=legacy")
	dest := newDestination(t)
	retried := s.submit(t, fmt.Sprintf(`{"url":%q,"method":"POST","body":"{\"order\":1}","backoffMs":100,"callbackUrl":%q}`,
		dest.script("/signed", 503, 200), dest.script("/cb", 200)))
	redriven := s.failed(t, dest.script("/signed-redrive", 500))
	dest.script("/signed-redrive", 200)
	if a := call(t, "POST", s.api+"/dlq/"+redriven+"/redrive", `{"actor":"ops"}`); a.status != 202 {
		t.Fatalf("redrive: %d %s", a.status, a.raw)
	}
	s.waitTerminal(t, retried, 20*time.Second)
	s.waitTerminal(t, redriven, 20*time.Second)
	waitFor(t, 20*time.Second, "the callback", func() bool { return len(dest.calls("/cb")) == 1 })

	var lines bytes.Buffer
	var n int
	check := func(path, wantID string, wantHits int) {
		hits := dest.calls(path)
		if len(hits) != wantHits {
			t.Fatalf("%s: %d deliveries, want %d", path, len(hits), wantHits)
		}
		for _, h := range hits {
			if got := h.header.Get("webhook-id"); got != wantID {
				t.Errorf("%s: webhook-id %q, want %q", path, got, wantID)
			}
			if sigs := strings.Fields(h.header.Get("webhook-signature")); len(sigs) != 2 {
				t.Errorf("%s: %d signatures, want one per secret", path, len(sigs))
			}
			for _, secret := range secrets {
				b, _ := json.Marshal(map[string]string{"secret": secret, "id": h.header.Get("webhook-id"),
					"timestamp": h.header.Get("webhook-timestamp"), "signature": h.header.Get("webhook-signature"), "body": h.body})
				lines.Write(append(b, '\n'))
				n++
			}
		}
	}
	check("/signed", retried, 2)
	check("/signed-redrive", redriven, 3) // two attempts, then one after the redrive
	check("/cb", retried+"_callback", 1)
	if cb := dest.calls("/cb")[0]; cb.header.Get("Retryd-Signature") == "" {
		t.Error("the callback lost its Retryd-Signature")
	}
	results := oracle(t, lines.Bytes(), "verify-standardwebhooks.js")
	if len(results) != n {
		t.Fatalf("%d verdicts for %d messages: %v", len(results), n, results)
	}
	for i, r := range results {
		if r != "ok" {
			t.Errorf("message %d: standardwebhooks says %s", i, r)
		}
	}
}

// The operator's events (OPERATOR_EVENTS_URL) are signed like deliveries:
// the reference implementation accepts each POST with each secret.
func TestOperatorEventsAreSignedWithStandardWebhooks(t *testing.T) {
	t.Parallel()
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_" + strings.Repeat("cm90YXRl", 4)}
	ops := newDestination(t)
	s := startStack(t, 1, "SIGNING_SECRETS="+strings.Join(secrets, ","), "OPERATOR_EVENTS_URL="+ops.script("/events", 200))
	dest := newDestination(t)
	failed := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script("/gone", 410)))
	waitFor(t, 20*time.Second, "the request.failed event", func() bool { return len(ops.calls("/events")) > 0 })
	var lines bytes.Buffer
	n := 0
	for _, h := range ops.calls("/events") {
		if !strings.Contains(h.body, `"request.failed"`) || !strings.Contains(h.body, failed) {
			t.Errorf("operator event %s, want request.failed of %s", h.body, failed)
		}
		for _, secret := range secrets {
			b, _ := json.Marshal(map[string]string{"secret": secret, "id": h.header.Get("webhook-id"),
				"timestamp": h.header.Get("webhook-timestamp"), "signature": h.header.Get("webhook-signature"), "body": h.body})
			lines.Write(append(b, '\n'))
			n++
		}
	}
	results := oracle(t, lines.Bytes(), "verify-standardwebhooks.js")
	if len(results) != n {
		t.Fatalf("%d verdicts for %d messages: %v", len(results), n, results)
	}
	for i, r := range results {
		if r != "ok" {
			t.Errorf("event POST %d: standardwebhooks says %s", i, r)
		}
	}
}
