package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/faultpoint"
)

// crashRecovery bounds how long a killed worker's task takes to run again:
// asynq's 30 s lease must expire, then the sweeper (SWEEP_INTERVAL=1s) puts
// it back. asynq alone would take 60–120 s.
const crashRecovery = 75 * time.Second

// A worker dies at each fault point of the attempt path; a new worker takes
// over; the request completes, every delivery carries the same
// Idempotency-Key, and the crash did not use up the budget (maxRetries is 0:
// one more counted attempt would fail the request).
func TestWorkerCrashAtEachFaultPoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		point    string
		outcomes string // recorded attempt outcomes at the end
		calls    int    // deliveries the destination saw
	}{
		{faultpoint.BeforeCall, "interrupted,success", 1},
		{faultpoint.AfterCall, "interrupted,success", 2},
		{faultpoint.AfterRecord, "success", 1},
	} {
		t.Run(c.point, func(t *testing.T) {
			t.Parallel()
			s := startStack(t, 0, "SWEEP_INTERVAL=1s")
			dest := newDestination(t)
			path := "/crash-" + c.point
			doomed := s.startWorker(t, faultpoint.EnvVar+"="+c.point)
			id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script(path, 200)))
			select {
			case <-doomed.done:
			case <-time.After(20 * time.Second):
				t.Fatalf("the worker did not die at %s", c.point)
			}
			s.startWorker(t)
			doc := s.waitTerminal(t, id, crashRecovery)
			if doc["status"] != "completed" {
				t.Fatalf("status %v after a crash at %s, want completed (lastError %v)", doc["status"], c.point, doc["lastError"])
			}
			var outcomes []string
			for _, a := range doc["attempts"].([]any) {
				outcomes = append(outcomes, a.(map[string]any)["outcome"].(string))
			}
			if strings.Join(outcomes, ",") != c.outcomes {
				t.Errorf("attempt outcomes %v, want %s", outcomes, c.outcomes)
			}
			if doc["attemptCount"] != float64(len(outcomes)) {
				t.Errorf("attemptCount %v, %d attempts recorded", doc["attemptCount"], len(outcomes))
			}
			time.Sleep(200 * time.Millisecond)
			hits := dest.calls(path)
			if len(hits) != c.calls {
				t.Errorf("destination saw %d deliveries, want %d", len(hits), c.calls)
			}
			for _, h := range hits {
				if h.header.Get("Idempotency-Key") != id {
					t.Errorf("a delivery carried Idempotency-Key %q, want %s", h.header.Get("Idempotency-Key"), id)
				}
			}
		})
	}

	t.Run(faultpoint.MidRedrive, func(t *testing.T) {
		t.Parallel()
		s := startStackWith(t, 1, []string{"ALLOW_PRIVATE_TARGETS=true", faultpoint.EnvVar + "=" + faultpoint.MidRedrive},
			[]string{"ALLOW_PRIVATE_TARGETS=true", "SWEEP_INTERVAL=1s"})
		dest := newDestination(t)
		id := s.failed(t, dest.script("/crash-redrive", 500))
		dest.script("/crash-redrive", 200)
		// The API dies between recording the redrive and requeueing the
		// archived task: the client sees the connection drop.
		req, _ := http.NewRequest("POST", s.api+"/dlq/"+id+"/redrive", strings.NewReader(`{"actor":"gina"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("redrive answered %d; the API should have died mid-redrive", resp.StatusCode)
		}
		s.restartAPI(t)
		doc := s.waitTerminal(t, id, 30*time.Second)
		waitFor(t, 5*time.Second, "redrive outcome", func() bool {
			doc = s.get(t, id)
			r := redrivesOf(doc)
			return len(r) == 1 && r[0]["outcome"] != nil
		})
		if r := redrivesOf(doc)[0]; doc["status"] != "completed" || r["actor"] != "gina" || r["outcome"] != "completed" {
			t.Errorf("status %v, redrive %v", doc["status"], r)
		}
	})
}

// A request whose attempts keep killing workers (here each worker dies at
// the call, as an OOM kill would) ends: its third interrupted attempt ends
// it failed with failureClass "interrupted", whatever its maxRetries, and a
// redrive gives it a fresh allowance.
func TestPoisonRequestEndsAfterThreeInterruptions(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0, "SWEEP_INTERVAL=1s")
	dest := newDestination(t)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script("/poison", 200)))
	for i := 1; i <= 3; i++ {
		doomed := s.startWorker(t, faultpoint.EnvVar+"="+faultpoint.BeforeCall)
		select {
		case <-doomed.done:
		case <-time.After(crashRecovery):
			t.Fatalf("worker %d did not die at the call", i)
		}
	}
	s.startWorker(t)
	doc := s.waitTerminal(t, id, crashRecovery)
	var outcomes []string
	for _, a := range doc["attempts"].([]any) {
		outcomes = append(outcomes, a.(map[string]any)["outcome"].(string))
	}
	if doc["status"] != "failed" || doc["failureClass"] != "interrupted" || strings.Join(outcomes, ",") != "interrupted,interrupted,interrupted" {
		t.Fatalf("status %v class %v outcomes %v, want failed, interrupted after 3 interrupted attempts", doc["status"], doc["failureClass"], outcomes)
	}
	if last, _ := doc["lastError"].(string); !strings.Contains(last, "interrupted") {
		t.Errorf("lastError %q does not say why", last)
	}
	if dlq := s.dlqIDs(t, "failureClass=interrupted"); dlq[id] == nil {
		t.Errorf("the request is not in the DLQ under failureClass=interrupted")
	}
	if a := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"ops"}`); a.status != 202 {
		t.Fatalf("redrive: %d %s", a.status, a.raw)
	}
	if doc := s.waitTerminal(t, id, 20*time.Second); doc["status"] != "completed" {
		t.Errorf("after the redrive: %v (%v)", doc["status"], doc["lastError"])
	}
}
