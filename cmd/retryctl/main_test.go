package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
)

const testKey = "ctl-key"

// apiFor serves the whole API in process over a private Redis (no
// worker: requests stay where the API puts them).
func apiFor(t *testing.T) string {
	t.Helper()
	srv := redistest.Start(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": testKey}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	e, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeEngine)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return ts.URL
}

// ctl runs one retryctl command line against api.
func ctl(t *testing.T, api string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	env := map[string]string{"RETRYD_URL": api, "RETRYD_API_KEY": testKey}
	code = run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), code
}

// api calls the API directly (to set up and to check what a command did).
func api(t *testing.T, base, method, path, body string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, doc)
	}
	return doc
}

// canceled submits a request due in an hour and cancels it.
func canceled(t *testing.T, base string) string {
	t.Helper()
	id := api(t, base, "POST", "/requests", `{"url":"https://example.com/x","method":"POST","body":"hi","delayMs":3600000}`)["id"].(string)
	api(t, base, "DELETE", "/requests/"+id, "")
	return id
}

func TestResend(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	orig := canceled(t, base)
	out, errOut, code := ctl(t, base, "resend", orig, "--reason", "partner lost it", "--actor", "erin", "--idempotency-key", "k1")
	if code != 0 || !strings.Contains(out, orig+" resent as ") {
		t.Fatalf("resend (%d): %s %s", code, out, errOut)
	}
	id := strings.Fields(strings.TrimPrefix(out, orig+" resent as "))[0]
	doc := api(t, base, "GET", "/requests/"+id, "")
	rf, _ := doc["resentFrom"].(map[string]any)
	if rf["id"] != orig || rf["actor"] != "erin" || rf["reason"] != "partner lost it" || doc["status"] != "pending" {
		t.Errorf("new request: %v", doc)
	}
	// The same key: the same new request.
	if again, _, code := ctl(t, base, "resend", orig, "--idempotency-key", "k1"); code != 0 || !strings.Contains(again, "resent as "+id) {
		t.Errorf("replay (%d): %s", code, again)
	}
	out, _, _ = ctl(t, base, "get", orig)
	if !strings.Contains(out, "resends:") || !strings.Contains(out, id) {
		t.Errorf("get of the original:\n%s", out)
	}
	out, _, _ = ctl(t, base, "get", id)
	if !strings.Contains(out, "resent from:") || !strings.Contains(out, orig) {
		t.Errorf("get of the resend:\n%s", out)
	}
	// An unfinished request: the API's 409, with what to do, and exit 1.
	_, errOut, code = ctl(t, base, "resend", id)
	if code != 1 || !strings.Contains(errOut, "cancel it first") {
		t.Errorf("resend of a pending request (%d): %s", code, errOut)
	}
}

func TestExpunge(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	id := canceled(t, base)
	out, errOut, code := ctl(t, base, "expunge", id, "--actor", "dpo")
	if code != 0 || !strings.Contains(out, id+" payload expunged (canceled, by dpo at ") {
		t.Fatalf("expunge (%d): %s %s", code, out, errOut)
	}
	if doc := api(t, base, "GET", "/requests/"+id, ""); doc["expunged"] != true || doc["expungedBy"] != "dpo" {
		t.Errorf("after expunge: %v", doc)
	}
	if out, _, _ := ctl(t, base, "get", id); !strings.Contains(out, "payload:") || !strings.Contains(out, "expunged at") {
		t.Errorf("get of an expunged request:\n%s", out)
	}
	// An expunged request cannot be resent; a pending one cannot be
	// expunged: the API's 409 with what to do, and exit 1.
	if _, errOut, code := ctl(t, base, "resend", id); code != 1 || !strings.Contains(errOut, "expunged") {
		t.Errorf("resend of an expunged request (%d): %s", code, errOut)
	}
	pending := api(t, base, "POST", "/requests", `{"url":"https://example.com/x","delayMs":3600000}`)["id"].(string)
	if _, errOut, code := ctl(t, base, "expunge", pending); code != 1 || !strings.Contains(errOut, "cancel it first") {
		t.Errorf("expunge of a pending request (%d): %s", code, errOut)
	}
}
