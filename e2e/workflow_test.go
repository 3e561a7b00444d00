package e2e

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Workflows written with the official @upstash/workflow SDK run on retryd
// (e2e/oracles/workflow.test.js): a workflow of every step kind (run,
// sleep, sleepUntil, parallel runs, call, waitForEvent notified and timed
// out, notify, invoke, createWebhook and waitForWebhook), a run id started
// twice, a failure function, resume, restart and delete from the DLQ, the
// logs, cancels, and a run whose step outlives the worker delivering it:
// the suite signals when it is inside that step, and this test kills
// every worker then and starts a new one.
func TestUpstashWorkflowSDK(t *testing.T) {
	t.Parallel()
	const current, next = "sig_current_workflow_1", "sig_next_workflow_2"
	// The SDK makes a webhook's URL with the user id its token carries,
	// as QStash's tokens do (base64 JSON): here the tenant's name.
	token := base64.StdEncoding.EncodeToString([]byte(`{"UserID":"wf-team","Password":"workflow-token"}`))
	s := startStack(t, 1, "API_KEYS=wf-team:"+token, "QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next)
	oracle(t, nil, "--version") // installs the oracles when missing
	killFile := filepath.Join(t.TempDir(), "kill")
	dir, _ := filepath.Abs("oracles")
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "workflow.test.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RETRYD_URL="+s.api, "RETRYD_TOKEN="+token,
		"QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next, "KILL_FILE="+killFile)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("node --test workflow.test.js: %v\n%s", err, out.String())
			}
			t.Logf("node --test workflow.test.js:\n%s", out.String())
			if !killed {
				t.Fatal("the durable workflow never signalled its slow step: no worker was killed")
			}
			s.noneLeftToDeliver(t, token)
			return
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("the workflow suite did not end in 5 minutes:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := os.Stat(killFile); err == nil && !killed {
			// The step's delivery is in flight: kill its worker without a
			// chance to record anything, and start a new one.
			for _, w := range s.workers {
				_ = w.cmd.Process.Kill()
				<-w.done
			}
			s.startWorker(t)
			killed = true
			if err := os.Remove(killFile); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// noneLeftToDeliver checks that no request of the stack is left pending or
// retrying: every run's messages were delivered, or canceled with it.
func (s *stack) noneLeftToDeliver(t *testing.T, token string) {
	t.Helper()
	waitFor(t, time.Minute, "no request left to deliver after every run ended or was canceled", func() bool {
		a := call(t, "GET", s.api+"/requests?status=pending,retrying", "", "Authorization", "Bearer "+token)
		items, _ := a.body["data"].([]any)
		return a.status == 200 && len(items) == 0
	})

}
