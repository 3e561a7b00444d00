package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// retryctl runs the CLI against the stack and returns its stdout, stderr
// and exit status.
func (s *stack) retryctl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin.retryctl, args...)
	cmd.Env = append([]string{"RETRYD_URL=" + s.api}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("retryctl %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// retryctl's commands against the real programs: tables for people, the
// API's JSON with --json, a non-zero exit with the API's message on error.
func TestRetryctl(t *testing.T) {
	t.Parallel()
	const key = "ops-key"
	s := startStack(t, 1, "API_KEYS="+key)
	auth := []string{"RETRYD_API_KEY=" + key}
	authed := func(method, url, body string) answer {
		return call(t, method, url, body, "Authorization", "Bearer "+key)
	}
	dest := newDestination(t)
	submit := func(body string) string {
		a := authed("POST", s.api+"/requests", body)
		if a.status != 202 {
			t.Fatalf("submit: %d %s", a.status, a.raw)
		}
		return a.body["id"].(string)
	}
	wait := func(id, status string) {
		waitFor(t, 15*time.Second, id+" "+status, func() bool { return authed("GET", s.api+"/requests/"+id, "").body["status"] == status })
	}
	done := submit(fmt.Sprintf(`{"url":%q}`, dest.script("/ok", 200)))
	gone := submit(fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script("/gone", 410)))
	broken := submit(fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script("/broken", 500)))
	later := submit(fmt.Sprintf(`{"url":%q,"delayMs":600000}`, dest.script("/later", 200)))
	wait(done, "completed")
	wait(gone, "failed")
	wait(broken, "failed")

	t.Run("list", func(t *testing.T) {
		out, _, code := s.retryctl(t, auth, "list", "--status", "completed", "--limit", "5")
		if code != 0 || !strings.Contains(out, done) || !strings.Contains(out, "ATTEMPTS") || strings.Contains(out, gone) {
			t.Errorf("list --status completed (%d):\n%s", code, out)
		}
		out, _, _ = s.retryctl(t, auth, "list", "--json", "--limit", "2")
		var page map[string]any
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page["data"].([]any)) != 2 || page["nextCursor"] == nil {
			t.Errorf("list --json: %v\n%s", err, out)
		}
	})
	t.Run("get", func(t *testing.T) {
		out, _, code := s.retryctl(t, auth, "get", gone)
		if code != 0 || !strings.Contains(out, "failed") || !strings.Contains(out, "410") || !strings.Contains(out, "client_error") {
			t.Errorf("get (%d):\n%s", code, out)
		}
		out, _, _ = s.retryctl(t, auth, "--json", "get", done)
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["id"] != done || doc["status"] != "completed" {
			t.Errorf("get --json: %v\n%s", err, out)
		}
		_, errOut, code := s.retryctl(t, auth, "get", "01m8zzzzzzzzzzzzzzzz")
		if code == 0 || !strings.Contains(errOut, "404") {
			t.Errorf("get of a missing id: exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("errors carry the API's message", func(t *testing.T) {
		_, errOut, code := s.retryctl(t, []string{"RETRYD_API_KEY=wrong"}, "list")
		if code == 0 || !strings.Contains(errOut, "401") {
			t.Errorf("a wrong key: exit %d, stderr %q", code, errOut)
		}
		_, errOut, code = s.retryctl(t, auth, "list", "--status", "lost")
		if code == 0 || !strings.Contains(errOut, "status") {
			t.Errorf("a bad status: exit %d, stderr %q", code, errOut)
		}
		_, errOut, code = s.retryctl(t, auth, "dlq", "redrive")
		if code == 0 || !strings.Contains(errOut, "--all") {
			t.Errorf("redrive without id or --all: exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		out, _, code := s.retryctl(t, auth, "cancel", later)
		if code != 0 || !strings.Contains(out, later+" canceled") {
			t.Errorf("cancel (%d): %s", code, out)
		}
		_, errOut, code := s.retryctl(t, auth, "cancel", done)
		if code == 0 || !strings.Contains(errOut, "409") {
			t.Errorf("cancel of a completed request: exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("dlq", func(t *testing.T) {
		out, _, _ := s.retryctl(t, auth, "dlq", "list", "--failure-class", "client_error", "--host", "127.0.0.1")
		if !strings.Contains(out, gone) || strings.Contains(out, broken) {
			t.Errorf("dlq list --failure-class client_error:\n%s", out)
		}
		out, _, code := s.retryctl(t, auth, "dlq", "redrive", "--all", "--failure-class", "server_error", "--actor", "ops", "--reason", "check", "--dry-run")
		if code != 0 || !strings.Contains(out, broken) || !strings.Contains(out, "dry run: 1") {
			t.Errorf("dry run (%d):\n%s", code, out)
		}
		if doc := authed("GET", s.api+"/requests/"+broken, ""); doc.body["redriveCount"] != 0.0 {
			t.Errorf("the dry run redrove: %s", doc.raw)
		}
		dest.script("/gone", 200)
		out, _, code = s.retryctl(t, auth, "dlq", "redrive", gone, "--actor", "alice", "--reason", "fixed the endpoint")
		if code != 0 || !strings.Contains(out, gone+" redriven") {
			t.Errorf("redrive (%d): %s", code, out)
		}
		wait(gone, "completed")
		rd := authed("GET", s.api+"/requests/"+gone, "").body["redrives"].([]any)[0].(map[string]any)
		if rd["actor"] != "alice" || rd["reason"] != "fixed the endpoint" {
			t.Errorf("the redrive's audit: %v", rd)
		}
		dest.script("/broken", 200)
		out, _, code = s.retryctl(t, auth, "--json", "dlq", "redrive", "--all", "--host", "127.0.0.1", "--actor", "bob", "--reason", "bulk")
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || fmt.Sprint(res["redriven"]) != "["+broken+"]" {
			t.Errorf("bulk redrive --json (%d): %v\n%s", code, err, out)
		}
		wait(broken, "completed")
	})
	t.Run("resend and expunge", func(t *testing.T) {
		orig := submit(fmt.Sprintf(`{"url":%q,"method":"POST","headers":{"X-Trace":"7"},"body":"order 42"}`, dest.script("/resent", 200)))
		wait(orig, "completed")
		out, errOut, code := s.retryctl(t, auth, "resend", orig, "--reason", "partner lost it")
		if code != 0 || !strings.Contains(out, orig+" resent as ") {
			t.Fatalf("resend (%d): %s %s", code, out, errOut)
		}
		id := strings.Fields(strings.TrimPrefix(out, orig+" resent as "))[0]
		wait(id, "completed")
		calls := dest.calls("/resent")
		if len(calls) != 2 {
			t.Fatalf("the destination got %d calls, want the original's and the resend's", len(calls))
		}
		first, second := calls[0], calls[1]
		if second.method != "POST" || second.body != "order 42" || second.header.Get("X-Trace") != "7" {
			t.Errorf("the resend delivered %s %q %v, want the original's method, body and headers", second.method, second.body, second.header)
		}
		if second.header.Get("Retryd-Request-Id") != id || second.header.Get("Idempotency-Key") == first.header.Get("Idempotency-Key") {
			t.Errorf("the resend's delivery: Retryd-Request-Id %q, Idempotency-Key %q (the original's was %q): want a new delivery",
				second.header.Get("Retryd-Request-Id"), second.header.Get("Idempotency-Key"), first.header.Get("Idempotency-Key"))
		}
		out, errOut, code = s.retryctl(t, auth, "expunge", orig, "--actor", "dpo")
		if code != 0 || !strings.Contains(out, orig+" payload expunged") {
			t.Fatalf("expunge (%d): %s %s", code, out, errOut)
		}
		doc := authed("GET", s.api+"/requests/"+orig, "")
		if doc.body["expunged"] != true || strings.Contains(doc.raw, "X-Trace") || strings.Contains(doc.raw, "answer 200") ||
			doc.body["status"] != "completed" || doc.body["lastStatusCode"] != 200.0 {
			t.Errorf("after expunge: %s", doc.raw)
		}
		if _, errOut, code := s.retryctl(t, auth, "resend", orig); code == 0 || !strings.Contains(errOut, "expunged") {
			t.Errorf("resend of an expunged request: exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("flows paused and resumed", func(t *testing.T) {
		if out, errOut, code := s.retryctl(t, auth, "flows", "pause", "held"); code != 0 || !strings.Contains(out, "held paused") {
			t.Fatalf("flows pause (%d): %s %s", code, out, errOut)
		}
		var ids []string
		for range 3 {
			ids = append(ids, submit(fmt.Sprintf(`{"url":%q,"flowControl":{"key":"held"}}`, dest.script("/held", 200))))
		}
		// GET /flows says the key is paused, and counts its waiters.
		waitFor(t, 15*time.Second, "the paused key's 3 waiters in GET /flows", func() bool {
			for _, f := range authed("GET", s.api+"/flows", "").body["data"].([]any) {
				if f := f.(map[string]any); f["key"] == "held" {
					return f["paused"] == true && f["waiting"] == 3.0
				}
			}
			return false
		})
		out, _, code := s.retryctl(t, auth, "flows")
		if code != 0 || !strings.Contains(out, "PAUSED") || !regexp.MustCompile(`(?m)^held\s+yes\s+0\s+3\s`).MatchString(out) {
			t.Errorf("flows does not show the key paused with its 3 waiters (%d):\n%s", code, out)
		}
		// The resume says how many it let go: after it, none wait.
		out, errOut, code := s.retryctl(t, auth, "flows", "resume", "held")
		if code != 0 || !strings.Contains(out, "held running (3 released, 0 waiting)") {
			t.Errorf("flows resume (%d): %s %s, want 3 released", code, out, errOut)
		}
		for _, id := range ids {
			wait(id, "completed")
		}
	})
	t.Run("schedules", func(t *testing.T) {
		sc := authed("POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"0 3 * * *","request":{"url":%q}}`, dest.URL+"/nightly"))
		out, _, code := s.retryctl(t, auth, "schedules", "list")
		if code != 0 || !strings.Contains(out, sc.body["id"].(string)) || !strings.Contains(out, "0 3 * * *") {
			t.Errorf("schedules list (%d):\n%s", code, out)
		}
	})
	t.Run("tail", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := exec.CommandContext(ctx, bin.retryctl, "tail", "--interval", "100ms")
		cmd.Env = append([]string{"RETRYD_URL=" + s.api}, auth...)
		var mu sync.Mutex
		var out, errOut bytes.Buffer
		cmd.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
		cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return errOut.Write(p) })
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		waitFor(t, 10*time.Second, "tail's first look (history is not shown)", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return strings.Contains(errOut.String(), "following")
		})
		id := submit(fmt.Sprintf(`{"url":%q}`, dest.script("/tailed", 200)))
		waitFor(t, 10*time.Second, "tail to show the outcome", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return strings.Contains(out.String(), id+" completed")
		})
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(out.String(), done) {
			t.Errorf("tail printed history:\n%s", out.String())
		}
		// Attempt numbers in the words of get, list and the dashboard.
		if !strings.Contains(out.String(), id+" completed 1 attempt · run 1: 1 of 6 allowed") {
			t.Errorf("tail does not word the attempts as every surface does:\n%s", out.String())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
