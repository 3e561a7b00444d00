package handlers_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/tasks"
)

// engineServer serves the API exactly as cmd/api wires it (app.APIEngine,
// dashboard included) over srv, with env as its environment.
func engineServer(t *testing.T, srv *redistest.Server, env map[string]string) *httptest.Server {
	t.Helper()
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	// The API must know the port it listens on to refuse itself.
	cfg.Port = ts.Listener.Addr().(*net.TCPAddr).Port
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, log)
	ts.Config.Handler = engine
	ts.Start()
	t.Cleanup(func() { ts.Close(); closeEngine() })
	return ts
}

func TestSubmissionWithoutJSONContentTypeIs415(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	for _, path := range []string{"/requests", "/request"} {
		a := do(t, "POST", ts.URL+path, "", `{"url":"https://example.com"}`)
		if code, _ := errorOf(t, a); a.status != 415 || code != "unsupported_media_type" {
			t.Errorf("POST %s without Content-Type: %d %s, want 415", path, a.status, a.raw)
		}
	}
	a := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com","mehtod":"POST"}`)
	if code, field := errorOf(t, a); a.status != 400 || code != "invalid_request" || field != "mehtod" {
		t.Errorf("unknown field: %d %s, want 400 naming mehtod", a.status, a.raw)
	}
	if list := do(t, "GET", ts.URL+"/requests", "", ""); len(list.body["data"].([]any)) != 0 {
		t.Errorf("refused submissions were stored: %s", list.raw)
	}
}

// A call carrying retryd's delivery marker is retryd calling itself.
func TestOwnDeliveriesAreRefused(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	callback := `{"id":"01abc","url":"https://example.com","status":"completed","callbackUrl":"https://example.com/cb"}`
	for _, path := range []string{"/requests", "/request", "/dlq/redrive", "/schedules"} {
		a := do(t, "POST", ts.URL+path, "application/json", callback, "Retryd-Request-Id", "01abc")
		if code, _ := errorOf(t, a); a.status != 422 || code != "loop_detected" {
			t.Errorf("POST %s as a retryd delivery: %d %s, want 422 loop_detected", path, a.status, a.raw)
		}
	}
	if list := do(t, "GET", ts.URL+"/requests", "", ""); len(list.body["data"].([]any)) != 0 {
		t.Errorf("a delivery made a request: %s", list.raw)
	}
	// A GET delivery reads nothing either: /metrics holds every tenant's
	// figures.
	for _, path := range []string{"/metrics", "/requests"} {
		if a := do(t, "GET", ts.URL+path, "", "", "Retryd-Request-Id", "01abc"); a.status != 422 || strings.Contains(a.raw, "retryd_") {
			t.Errorf("GET %s as a retryd delivery: %d %.200s, want 422 loop_detected", path, a.status, a.raw)
		}
	}
}

func TestDestinationAimedAtTheAPIItselfIsRefused(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	for _, body := range []string{
		fmt.Sprintf(`{"url":"http://127.0.0.1:%d/requests"}`, port),
		fmt.Sprintf(`{"url":"http://localhost:%d/requests","method":"POST"}`, port),
		fmt.Sprintf(`{"url":"http://2130706433:%d/requests"}`, port),
		fmt.Sprintf(`{"url":"http://[::ffff:127.0.0.1]:%d/requests"}`, port),
		fmt.Sprintf(`{"url":"https://example.com","callbackUrl":"http://0.0.0.0:%d/requests"}`, port),
	} {
		a := do(t, "POST", ts.URL+"/requests", "application/json", body)
		if code, _ := errorOf(t, a); a.status != 422 || code != "loop_detected" {
			t.Errorf("%s: %d %s, want 422 loop_detected", body, a.status, a.raw)
		}
	}
	// Behind a proxy the API is known by the host the client used.
	req, _ := http.NewRequest("POST", ts.URL+"/requests", strings.NewReader(`{"url":"https://retryd.example.com/requests"}`))
	req.Host = "retryd.example.com"
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 422 {
		t.Errorf("url = the public host the client used: %d, want 422", resp.StatusCode)
	}
	// Another port on loopback is an ordinary (allowed) private destination.
	if a := post(t, ts, fmt.Sprintf(`{"url":"http://127.0.0.1:%d/x"}`, port+1)); a.status != 202 {
		t.Errorf("another local port: %d %s", a.status, a.raw)
	}
}

// Past 20 failures a minute from one address, a request without a valid
// key is 429; the count is shared by the replicas; a valid key still works.
func TestFailedAuthenticationIsThrottledAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	env := map[string]string{"API_KEYS": "right-key"}
	a, b := engineServer(t, srv, env), engineServer(t, srv, env)
	for i := 1; i <= 25; i++ {
		base := a.URL
		if i%2 == 0 {
			base = b.URL
		}
		ans := do(t, "GET", base+"/requests", "", "", "Authorization", fmt.Sprintf("Bearer guess-%d", i))
		want := 401
		if i > 20 {
			want = 429
		}
		if ans.status != want {
			t.Fatalf("failure %d: %d %s, want %d", i, ans.status, ans.raw, want)
		}
		if want == 429 {
			if ra := ans.header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Errorf("429 without Retry-After: %v", ans.header)
			}
		}
	}
	// Without any key, from the same address: throttled too.
	if ans := do(t, "GET", b.URL+"/requests", "", ""); ans.status != 429 {
		t.Errorf("no key after the limit: %d, want 429", ans.status)
	}
	for _, base := range []string{a.URL, b.URL} {
		if ans := do(t, "GET", base+"/requests", "", "", "Authorization", "Bearer right-key"); ans.status != 200 {
			t.Errorf("the valid key after the limit: %d %s, want 200", ans.status, ans.raw)
		}
	}
}

// Failures from one address (a proxy many operators share) never hide the
// dashboard's Basic challenge from a browser that has not failed itself:
// its first visit, without credentials, gets 401 and the challenge, and
// is not counted; a wrong password past the limit is 429 there too.
func TestAuthThrottleKeepsTheDashboardChallenge(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"API_KEYS": "right-key"})
	for i := 1; i <= 21; i++ {
		do(t, "GET", ts.URL+"/monitoring/", "", "", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("u:guess-%d", i))))
	}
	for i := 0; i < 3; i++ {
		ans := do(t, "GET", ts.URL+"/monitoring/", "", "")
		if ans.status != 401 || !strings.HasPrefix(ans.header.Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("a first visit after 21 failures from its address: %d, WWW-Authenticate %q; want 401 with the Basic challenge",
				ans.status, ans.header.Get("WWW-Authenticate"))
		}
	}
	wrong := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:guess-again"))
	if ans := do(t, "GET", ts.URL+"/monitoring/", "", "", "Authorization", wrong); ans.status != 429 || ans.header.Get("Retry-After") == "" {
		t.Errorf("a wrong password past the limit: %d (Retry-After %q), want 429", ans.status, ans.header.Get("Retry-After"))
	}
	right := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:right-key"))
	if ans := do(t, "GET", ts.URL+"/monitoring/", "", "", "Authorization", right); ans.status != 200 {
		t.Errorf("the right password past the limit: %d, want 200", ans.status)
	}
}

// A browser page elsewhere must not drive the dashboard or the API with
// the operator's cached credentials.
func TestCrossSiteStateChangesAreRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := engineServer(t, srv, map[string]string{"API_KEYS": "k", "ALLOW_PRIVATE_TARGETS": "true"})
	pause := ts.URL + "/monitoring/api/queues/" + tasks.Queue + ":pause"
	basic := func(r *http.Request) { r.SetBasicAuth("", "k") }
	send := func(method, url string, headers ...string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader(`{}`))
		basic(req)
		req.Header.Set("Content-Type", "text/plain")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// asynqmon needs the queue to exist before it can pause it.
	if a := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com","delayMs":600000}`, "Authorization", "Bearer k"); a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	for _, h := range [][]string{
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site", "Origin", strings.Replace(ts.URL, "127.0.0.1", "localhost", 1)},
	} {
		if code := send("POST", pause, h...); code != 403 {
			t.Errorf("cross-site pause %v: %d, want 403", h, code)
		}
		if code := send("POST", ts.URL+"/dlq/redrive", h...); code != 403 {
			t.Errorf("cross-site bulk redrive %v: %d, want 403", h, code)
		}
	}
	inspector := asynq.NewInspectorFromRedisClient(srv.Client())
	if info, err := inspector.GetQueueInfo(tasks.Queue); err != nil || info.Paused {
		t.Fatalf("queue paused by a cross-site call (%v)", err)
	}
	// The dashboard's own page (same origin) and programs (no Origin) work.
	if code := send("POST", pause, "Origin", ts.URL, "Sec-Fetch-Site", "same-origin"); code != 204 && code != 200 {
		t.Errorf("same-origin pause: %d", code)
	}
	if info, _ := inspector.GetQueueInfo(tasks.Queue); !info.Paused {
		t.Error("same-origin pause did not pause the queue")
	}
	if code := send("GET", ts.URL+"/monitoring/api/queues", "Sec-Fetch-Site", "cross-site"); code != 200 {
		t.Errorf("cross-site GET: %d, want 200 (reads are not state changes)", code)
	}
}

// The cap counts per tenant: a and a2 are team-a's keys, b is team-b's.
func TestUnfinishedRequestsAreCappedPerTenant(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{
		"API_KEYS": "team-a:a,team-a:a2,team-b:b", "MAX_UNFINISHED_PER_KEY": "3"})
	submit := func(key string) answer {
		return do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com","delayMs":600000}`, "Authorization", "Bearer "+key)
	}
	var ids []string
	for i, key := range []string{"a", "a2", "a"} {
		a := submit(key)
		if a.status != 202 {
			t.Fatalf("submission %d: %d %s", i+1, a.status, a.raw)
		}
		ids = append(ids, a.body["id"].(string))
	}
	a := submit("a2")
	if code, _ := errorOf(t, a); a.status != 429 || code != "rate_limited" || a.header.Get("Retry-After") == "" ||
		!strings.Contains(a.body["error"].(map[string]any)["message"].(string), "unfinished") {
		t.Errorf("the tenant's 4th unfinished request, by its other key: %d %s %v, want 429 saying why, with Retry-After", a.status, a.raw, a.header)
	}
	if b := submit("b"); b.status != 202 {
		t.Errorf("another tenant is capped too: %d %s", b.status, b.raw)
	}
	// A finished (here: canceled) request frees its place.
	if c := do(t, "DELETE", ts.URL+"/requests/"+ids[0], "", "", "Authorization", "Bearer a"); c.status != 200 {
		t.Fatalf("cancel: %d %s", c.status, c.raw)
	}
	if a := submit("a"); a.status != 202 {
		t.Errorf("after one finished: %d %s, want 202", a.status, a.raw)
	}
	// An idempotent replay takes no new place.
	first := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com"}`, "Authorization", "Bearer b", "Idempotency-Key", "k1")
	again := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com"}`, "Authorization", "Bearer b", "Idempotency-Key", "k1")
	if first.status != 202 || again.status != 200 {
		t.Fatalf("idempotent pair: %d, %d", first.status, again.status)
	}
	if b := submit("b"); b.status != 202 {
		t.Errorf("team-b's third request after a replay: %d %s, want 202 (the replay must not count)", b.status, b.raw)
	}
}

func TestSubmissionsAreRefusedNearRedisMaxmemory(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := srv.Client()
	ts := engineServer(t, srv, map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	ctx := context.Background()
	info, _ := rdb.Info(ctx, "memory").Result()
	var usedMem int64
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			fmt.Sscan(v, &usedMem)
		}
	}
	// maxmemory just above what is in use: past the 90 % mark, not yet
	// at Redis's own OOM refusal.
	if err := rdb.ConfigSet(ctx, "maxmemory", fmt.Sprint(usedMem*105/100)).Err(); err != nil {
		t.Fatal(err)
	}
	a := post(t, ts, `{"url":"https://example.com"}`)
	if code, _ := errorOf(t, a); a.status != 503 || code != "unavailable" || !strings.Contains(a.raw, "maxmemory") {
		t.Errorf("near maxmemory: %d %s, want 503 naming maxmemory", a.status, a.raw)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if list := do(t, "GET", ts.URL+"/requests", "", ""); len(list.body["data"].([]any)) != 0 {
		t.Errorf("a refused submission was stored: %s", list.raw)
	}
	// The gate asks Redis again after a second; the deadline leaves room
	// for a loaded machine.
	deadline := time.Now().Add(30 * time.Second)
	for post(t, ts, `{"url":"https://example.com"}`).status != 202 {
		if time.Now().After(deadline) {
			t.Fatal("submissions still refused 30 s after maxmemory was lifted")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSchedulesAreCappedAndFireAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"SCHEDULE_LIMIT": "2"})
	create := func(body string) answer { return do(t, "POST", ts.URL+"/schedules", "application/json", body) }
	for _, c := range []struct{ body, field string }{
		{`{"cron":"@every 500ms","request":{"url":"https://example.com"}}`, "cron"},
		{`{"cron":"@every 1s","request":{"url":"https://example.com"},"crn":"x"}`, "crn"},
		{`{"cron":"@every 1s","request":{"url":"https://example.com","mehtod":"POST"}}`, "request.mehtod"},
		// Valid syntax, but no date has day 31 in February or April.
		{`{"cron":"0 0 31 2 *","request":{"url":"https://example.com"}}`, "cron"},
		{`{"cron":"0 0 31 4 *","request":{"url":"https://example.com"}}`, "cron"},
	} {
		a := create(c.body)
		if _, field := errorOf(t, a); a.status != 400 || field != c.field {
			t.Errorf("%s: %d %s, want 400 naming %s", c.body, a.status, a.raw, c.field)
		}
	}
	if a := create(`{"cron":"0 0 29 2 *","request":{"url":"https://example.com"}}`); a.status != 201 {
		t.Fatalf("29 February exists: %d %s", a.status, a.raw)
	}
	if a := create(`{"cron":"@every 1s","request":{"url":"https://example.com"}}`); a.status != 201 {
		t.Fatalf("second schedule: %d %s", a.status, a.raw)
	}
	a := create(`{"cron":"@hourly","request":{"url":"https://example.com"}}`)
	// A limit of how many there may be is a conflict (409), as QUEUE_LIMIT's
	// is: waiting does not lift it, deleting one does.
	if code, _ := errorOf(t, a); a.status != 409 || code != "conflict" || !strings.Contains(a.raw, "SCHEDULE_LIMIT") {
		t.Errorf("third schedule over SCHEDULE_LIMIT=2: %d %s, want 409", a.status, a.raw)
	}
}

func TestSecretsInURLsAndHeadersAreRedacted(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	secrets := []string{"tok-1", "key-2", "sig-3", "pw-4", "sess-5", "cred-6", "auth-7", "cb-8"}
	req := `{"url":"https://example.com/hook?token=tok-1&api_key=key-2&sig=sig-3&page=2","callbackUrl":"https://example.com/cb?secret=cb-8",` +
		`"headers":{"X-Password":"pw-4","X-Session":"sess-5","X-Credential":"cred-6","Authentication":"auth-7","X-Plain":"visible"}}`
	a := post(t, ts, req)
	doc := do(t, "GET", ts.URL+"/requests/"+a.body["id"].(string), "", "")
	sc := create(t, ts, `{"cron":"@hourly","request":`+req+`}`)
	for _, d := range []answer{doc, sc} {
		for _, s := range secrets {
			if strings.Contains(d.raw, s) {
				t.Errorf("document shows secret %s: %s", s, d.raw)
			}
		}
		if !strings.Contains(d.raw, "page=2") || !strings.Contains(d.raw, "visible") {
			t.Errorf("redaction hid more than the secrets: %s", d.raw)
		}
	}
}

func create(t *testing.T, ts *httptest.Server, body string) answer {
	t.Helper()
	a := do(t, "POST", ts.URL+"/schedules", "application/json", body)
	if a.status != 201 {
		t.Fatalf("create schedule: %d %s", a.status, a.raw)
	}
	return a
}
