package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// An API that allows private destinations and a worker that does not, on
// one Redis: /readyz and both logs name the disagreement, and the request
// the API accepted and the worker refused says why in its lastError,
// naming the setting and both values.
func TestProcessesThatDisagreeOnDestinationRulesSaySo(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, []string{"ALLOW_PRIVATE_TARGETS=true"}, nil)
	dest := newDestination(t)
	const want = "ALLOW_PRIVATE_TARGETS: false (worker"
	// Each process reads the others' settings at start and then every 10 s.
	var ready answer
	waitFor(t, 60*time.Second, "/readyz to name the disagreement", func() bool {
		ready = call(t, "GET", s.api+"/readyz", "")
		return strings.Contains(ready.raw, want)
	})
	if ready.status != 200 || !strings.Contains(ready.raw, "true (api ") {
		t.Errorf("/readyz: %d %s, want 200 naming both values", ready.status, ready.raw)
	}
	logSays := func(p *proc) func() bool {
		return func() bool {
			b, _ := os.ReadFile(p.log)
			return strings.Contains(string(b), "disagree") && strings.Contains(string(b), want)
		}
	}
	waitFor(t, 60*time.Second, "the API's log to name the disagreement", logSays(s.apiProc))
	waitFor(t, 60*time.Second, "the worker's log to name the disagreement", logSays(s.workers[0]))

	id := s.submit(t, fmt.Sprintf(`{"url": %q, "maxRetries": 0}`, dest.URL+"/private"))
	doc := s.waitTerminal(t, id, 60*time.Second)
	lastErr, _ := doc["lastError"].(string)
	t.Logf("/readyz: %s\nlastError: %s", ready.raw, lastErr)
	if doc["status"] != "failed" || doc["failureClass"] != "blocked_destination" ||
		!strings.Contains(lastErr, "this worker has ALLOW_PRIVATE_TARGETS=false, the API that accepted it had true") {
		t.Errorf("the refused request: status %v, failureClass %v, lastError %q; want it to name ALLOW_PRIVATE_TARGETS and both values",
			doc["status"], doc["failureClass"], lastErr)
	}
}
