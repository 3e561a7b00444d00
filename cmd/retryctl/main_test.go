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
	base, _ := apiOn(t)
	return base
}

// apiOn is apiFor that also gives the Redis it runs on.
func apiOn(t *testing.T) (string, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": testKey,
			"SECRETS_KEYS": "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	e, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeEngine)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return ts.URL, srv
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

func TestSubmit(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "submit", "https://example.com/hook", "-X", "post", "-H", "X-Trace: 7", "--header", "Content-Type: text/plain",
		"-d", "hello", "--retries", "2", "--backoff", "500ms", "--max-backoff", "1m", "--timeout", "5s", "--delay", "1h",
		"--flow-key", "k1", "--parallelism", "1", "--idempotency-key", "s1")
	fields := strings.Fields(out)
	if code != 0 || len(fields) != 2 || fields[1] != "pending" {
		t.Fatalf("submit (%d): %s %s", code, out, errOut)
	}
	doc := api(t, base, "GET", "/requests/"+fields[0], "")
	h, _ := doc["headers"].(map[string]any)
	fc, _ := doc["flowControl"].(map[string]any)
	if doc["method"] != "POST" || h["X-Trace"] != "7" || h["Content-Type"] != "text/plain" || doc["maxRetries"] != 2.0 || doc["backoffMs"] != 500.0 ||
		doc["maxBackoffMs"] != 60000.0 || doc["timeoutMs"] != 5000.0 || fc["key"] != "k1" || fc["parallelism"] != 1.0 || doc["nextRetryAt"] == nil {
		t.Errorf("submitted: %v", doc)
	}
	// The same key: the same request.
	if again, _, _ := ctl(t, base, "submit", "https://example.com/hook", "-X", "POST", "-H", "X-Trace: 7", "--header", "Content-Type: text/plain",
		"-d", "hello", "--retries", "2", "--backoff", "500ms", "--max-backoff", "1m", "--timeout", "5s", "--delay", "1h",
		"--flow-key", "k1", "--parallelism", "1", "--idempotency-key", "s1"); !strings.HasPrefix(again, fields[0]+" ") {
		t.Errorf("replayed submit: %s", again)
	}
	// Without --retries the API's default holds (not 0).
	out, _, _ = ctl(t, base, "submit", "https://example.com/plain")
	if doc := api(t, base, "GET", "/requests/"+strings.Fields(out)[0], ""); doc["maxRetries"] != 5.0 || doc["method"] != "GET" {
		t.Errorf("defaults: %v", doc)
	}
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"a header without a colon", []string{"submit", "https://example.com", "-H", "X-Trace"}, "Name: value"},
		{"a flow limit without a key", []string{"submit", "https://example.com", "--parallelism", "2"}, "--flow-key"},
		{"a body file that is not there", []string{"submit", "https://example.com", "-d", "@/nonexistent/body"}, "--data"},
		{"a URL the API refuses", []string{"submit", "ftp://example.com"}, "url"},
		{"retries over the API's bound", []string{"submit", "https://example.com", "--retries", "99"}, "maxRetries"},
		{"no URL", []string{"submit"}, "accepts 1 arg"},
	} {
		if _, errOut, code := ctl(t, base, c.args...); code != 1 || !strings.Contains(errOut, c.says) {
			t.Errorf("%s: exit %d, stderr %q, want it to say %q", c.name, code, errOut, c.says)
		}
	}
}

func TestFlowsPauseResume(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "flows", "pause", "acme")
	if code != 0 || !strings.Contains(out, "acme paused") {
		t.Fatalf("flows pause (%d): %s %s", code, out, errOut)
	}
	if info := api(t, base, "GET", "/flows/acme", ""); info["isPaused"] != true {
		t.Errorf("after flows pause: %v", info)
	}
	if out, _, code := ctl(t, base, "flows", "resume", "acme"); code != 0 || !strings.Contains(out, "acme running") {
		t.Errorf("flows resume (%d): %s", code, out)
	}
	if info := api(t, base, "GET", "/flows/acme", ""); info["isPaused"] != false {
		t.Errorf("after flows resume: %v", info)
	}
	if _, errOut, code := ctl(t, base, "flows", "pause"); code != 1 || !strings.Contains(errOut, "accepts 1 arg") {
		t.Errorf("flows pause without a key (%d): %s", code, errOut)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "schedules", "create", "https://example.com/tick", "--cron", "*/5 * * * *", "--timezone", "Europe/Paris",
		"-X", "POST", "-d", "tick", "--retries", "1")
	if code != 0 || !strings.Contains(out, " created (*/5 * * * * Europe/Paris, next ") {
		t.Fatalf("schedules create (%d): %s %s", code, out, errOut)
	}
	id := strings.Fields(out)[0]
	sc := api(t, base, "GET", "/schedules/"+id, "")
	if req, _ := sc["request"].(map[string]any); req["url"] != "https://example.com/tick" || req["method"] != "POST" || req["body"] != "tick" {
		t.Errorf("schedule's request: %v", sc)
	}
	if out, _, _ := ctl(t, base, "schedules", "list"); !strings.Contains(out, id) || !strings.Contains(out, "active") {
		t.Errorf("schedules list:\n%s", out)
	}
	if out, _, code := ctl(t, base, "schedules", "pause", id); code != 0 || out != id+" paused\n" || api(t, base, "GET", "/schedules/"+id, "")["paused"] != true {
		t.Errorf("schedules pause (%d): %s", code, out)
	}
	if out, _, code := ctl(t, base, "schedules", "resume", id); code != 0 || out != id+" resumed\n" || api(t, base, "GET", "/schedules/"+id, "")["paused"] != false {
		t.Errorf("schedules resume (%d): %s", code, out)
	}
	if out, _, code := ctl(t, base, "schedules", "delete", id); code != 0 || out != id+" deleted\n" {
		t.Errorf("schedules delete (%d): %s", code, out)
	}
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"a deleted schedule", []string{"schedules", "pause", id}, "404"},
		{"create without --cron", []string{"schedules", "create", "https://example.com"}, "--cron"},
		{"a cron the API refuses", []string{"schedules", "create", "https://example.com", "--cron", "not cron"}, "cron"},
	} {
		if _, errOut, code := ctl(t, base, c.args...); code != 1 || !strings.Contains(errOut, c.says) {
			t.Errorf("%s: exit %d, stderr %q, want it to say %q", c.name, code, errOut, c.says)
		}
	}
}

// list shows why each request waits and when its next attempt starts.
func TestListShowsWaitingAndNextAttempt(t *testing.T) {
	t.Parallel()
	base, srv := apiOn(t)
	delayed := api(t, base, "POST", "/requests", `{"url":"https://example.com/later","delayMs":3600000}`)["id"].(string)
	held := api(t, base, "POST", "/requests", `{"url":"https://example.com/held","flowControl":{"key":"acme"}}`)["id"].(string)
	// What a worker records of a request its paused key holds (no worker
	// runs here): the reason, and no time, since a resume starts it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Client().HSet(ctx, "{retryd}:req:"+held, "waitingFor", "paused").Err(); err != nil {
		t.Fatal(err)
	}
	next := api(t, base, "GET", "/requests/"+delayed, "")["nextRetryAt"].(string)
	out, errOut, code := ctl(t, base, "list")
	if code != 0 || !strings.Contains(out, "WAITING FOR") || !strings.Contains(out, "NEXT ATTEMPT") {
		t.Fatalf("list (%d): %s %s", code, out, errOut)
	}
	due, _ := time.Parse(time.RFC3339, next)
	for _, c := range []struct{ id, want string }{
		{delayed, "pending  -            " + due.UTC().Format(time.RFC3339)},
		{held, "pending  paused       on resume"},
	} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, c.id) {
				line = l
			}
		}
		if !strings.Contains(strings.Join(strings.Fields(line), " "), strings.Join(strings.Fields(c.want), " ")) {
			t.Errorf("list line of %s: %q, want %q", c.id, line, c.want)
		}
	}
}
