package handlers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/tasks"
)

type testBundle struct {
	redis     *redistest.Server
	inspector *asynq.Inspector
}

func setup(t *testing.T, guard *egress.Guard) (*httptest.Server, *testBundle) {
	t.Helper()
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := srv.Client()
	if guard == nil {
		guard = &egress.Guard{AllowPrivate: true}
	}
	api := &handlers.API{
		Store:        record.NewStore(rdb, time.Hour),
		Queue:        &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)},
		Destinations: guard,
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:          time.Now,
	}
	ts := httptest.NewServer(app.NewEngine(api, app.Access{}, api.Log))
	t.Cleanup(ts.Close)
	return ts, &testBundle{redis: srv, inspector: asynq.NewInspectorFromRedisClient(rdb)}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(t *testing.T, method, url, contentType, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func post(t *testing.T, ts *httptest.Server, body string, headers ...string) answer {
	t.Helper()
	return do(t, "POST", ts.URL+"/requests", "application/json", body, headers...)
}

func errorOf(t *testing.T, a answer) (code, field string) {
	t.Helper()
	e, ok := a.body["error"].(map[string]any)
	if !ok {
		t.Fatalf("answer %d %s is not in the error shape", a.status, a.raw)
	}
	if m, _ := e["message"].(string); m == "" {
		t.Errorf("error without a message: %s", a.raw)
	}
	f, _ := e["field"].(string)
	c, _ := e["code"].(string)
	return c, f
}

func TestSubmitStoresAndEnqueues(t *testing.T) {
	t.Parallel()
	ts, b := setup(t, nil)
	for _, path := range []string{"/requests", "/request"} {
		a := do(t, "POST", ts.URL+path, "application/json", `{"url":"https://example.com/x","method":"POST","body":"hi","maxRetries":3,"backoffMs":500}`)
		if a.status != http.StatusAccepted {
			t.Fatalf("%s: status %d %s", path, a.status, a.raw)
		}
		id, _ := a.body["id"].(string)
		if a.body["status"] != "pending" || a.header.Get("Location") != "/requests/"+id {
			t.Errorf("%s: answer %s, Location %q", path, a.raw, a.header.Get("Location"))
		}
		if _, err := b.inspector.GetTaskInfo(tasks.Queue, id); err != nil {
			t.Errorf("%s: no asynq task for %s: %v", path, id, err)
		}
		doc := do(t, "GET", ts.URL+"/requests/"+id, "", "")
		if doc.status != 200 || doc.body["method"] != "POST" || doc.body["maxRetries"] != 3.0 || doc.body["status"] != "pending" {
			t.Errorf("%s: GET %d %s", path, doc.status, doc.raw)
		}
		for _, field := range []string{"id", "url", "method", "headers", "status", "attemptCount", "maxRetries", "backoffMs",
			"maxBackoffMs", "timeoutMs", "nextRetryAt", "lastError", "lastStatusCode", "failureClass", "result",
			"resultTruncated", "idempotencyKey", "redriveCount", "createdAt", "updatedAt", "completedAt", "callback",
			"attempts", "redrives"} {
			if _, ok := doc.body[field]; !ok {
				t.Errorf("GET document lacks %q: %s", field, doc.raw)
			}
		}
	}
}

func TestDelayedSubmissionIsScheduledInAsynq(t *testing.T) {
	t.Parallel()
	ts, b := setup(t, nil)
	a := post(t, ts, `{"url":"https://example.com","delayMs":60000}`)
	id, _ := a.body["id"].(string)
	info, err := b.inspector.GetTaskInfo(tasks.Queue, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStateScheduled || time.Until(info.NextProcessAt) < 55*time.Second {
		t.Errorf("task state %v next %v, want scheduled ~59s ahead", info.State, info.NextProcessAt)
	}
	doc := do(t, "GET", ts.URL+"/requests/"+id, "", "")
	next, _ := time.Parse(time.RFC3339, doc.body["nextRetryAt"].(string))
	if d := time.Until(next); d < 58*time.Second || d > 61*time.Second {
		t.Errorf("nextRetryAt %v is %v away", next, d)
	}
}

func TestSubmitRejections(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	big := `{"url":"https://e.com","body":"` + strings.Repeat("a", 256<<10) + `"}`
	cases := []struct {
		name, contentType, body string
		status                  int
		code, field             string
	}{
		{"not json type", "text/plain", `{"url":"https://e.com"}`, 415, "unsupported_media_type", ""},
		{"form", "application/x-www-form-urlencoded", `url=x`, 415, "unsupported_media_type", ""},
		{"too large", "application/json", big, 413, "payload_too_large", ""},
		{"bad json", "application/json", `{"url"`, 400, "invalid_request", ""},
		{"missing url", "application/json", `{}`, 400, "invalid_request", "url"},
		{"bad method", "application/json", `{"url":"https://e.com","method":"BREW"}`, 400, "invalid_request", "method"},
		{"host header", "application/json", `{"url":"https://e.com","headers":{"Host":"x"}}`, 400, "invalid_request", "headers"},
		{"retries", "application/json", `{"url":"https://e.com","maxRetries":99}`, 400, "invalid_request", "maxRetries"},
	}
	for _, c := range cases {
		a := do(t, "POST", ts.URL+"/requests", c.contentType, c.body)
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, a.status, c.status, a.raw)
			continue
		}
		code, field := errorOf(t, a)
		if code != c.code || field != c.field {
			t.Errorf("%s: code %q field %q, want %q %q", c.name, code, field, c.code, c.field)
		}
	}
	a := post(t, ts, `{"url":"https://e.com"}`, "Idempotency-Key", strings.Repeat("k", 256))
	if code, field := errorOf(t, a); a.status != 400 || code != "invalid_request" || field != "Idempotency-Key" {
		t.Errorf("long Idempotency-Key: %d %s", a.status, a.raw)
	}
	// Nothing of the above was stored.
	list := do(t, "GET", ts.URL+"/requests", "", "")
	if data := list.body["data"].([]any); len(data) != 0 {
		t.Errorf("rejected submissions were stored: %s", list.raw)
	}
}

func TestBlockedDestinationIs422ByDefault(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, &egress.Guard{})
	for _, body := range []string{
		`{"url":"http://127.0.0.1:8080/x"}`,
		`{"url":"http://169.254.169.254/latest/meta-data"}`,
		`{"url":"https://example.com","callbackUrl":"http://10.0.0.1/cb"}`,
	} {
		a := post(t, ts, body)
		code, _ := errorOf(t, a)
		if a.status != 422 || code != "blocked_destination" {
			t.Errorf("%s: %d %s, want 422 blocked_destination", body, a.status, a.raw)
		}
	}
}

func TestGetUnknownIs404(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	for _, id := range []string{"01m8mg842n8nbsaee7cq", "nope", "..%2F..%2Fx"} {
		a := do(t, "GET", ts.URL+"/requests/"+id, "", "")
		if code, _ := errorOf(t, a); a.status != 404 || code != "not_found" {
			t.Errorf("GET %s: %d %s", id, a.status, a.raw)
		}
	}
}

func TestSecretHeadersAreRedacted(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	a := post(t, ts, `{"url":"https://e.com","headers":{"Authorization":"Bearer s3cret","X-Api-Key":"key-value-1","X-Auth-Token":"token-value-1","Cookie":"c","X-Client-Secret":"s","X-Plain":"visible"}}`)
	doc := do(t, "GET", ts.URL+"/requests/"+a.body["id"].(string), "", "")
	for _, secret := range []string{"s3cret", "key-value-1", "token-value-1", `"c"`, `"s"`} {
		if strings.Contains(doc.raw, secret) {
			t.Errorf("document leaks %s: %s", secret, doc.raw)
		}
	}
	h := doc.body["headers"].(map[string]any)
	if h["X-Plain"] != "visible" || h["Authorization"] != apidoc.Redacted {
		t.Errorf("headers %v", h)
	}
}

func TestListFiltersAndPaginates(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	var ids []string
	for i := 0; i < 5; i++ {
		a := post(t, ts, fmt.Sprintf(`{"url":"https://e.com/%d","delayMs":600000}`, i))
		ids = append(ids, a.body["id"].(string))
		time.Sleep(2 * time.Millisecond) // distinct creation milliseconds, so order is defined
	}
	canceled := do(t, "DELETE", ts.URL+"/requests/"+ids[1], "", "")
	if canceled.status != 200 || canceled.body["status"] != "canceled" {
		t.Fatalf("cancel: %d %s", canceled.status, canceled.raw)
	}

	var seen []string
	cursor := ""
	for page := 0; page < 10; page++ {
		url := ts.URL + "/requests?limit=2"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		a := do(t, "GET", url, "", "")
		for _, d := range a.body["data"].([]any) {
			doc := d.(map[string]any)
			seen = append(seen, doc["id"].(string))
			if _, has := doc["attempts"]; has {
				t.Error("list entries carry attempts")
			}
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("pages gave %v, want newest first %v", seen, want)
	}

	pending := do(t, "GET", ts.URL+"/requests?status=pending", "", "")
	if n := len(pending.body["data"].([]any)); n != 4 {
		t.Errorf("status=pending gave %d, want 4", n)
	}
	c := do(t, "GET", ts.URL+"/requests?status=canceled", "", "")
	if d := c.body["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != ids[1] {
		t.Errorf("status=canceled gave %s", c.raw)
	}

	bad := do(t, "GET", ts.URL+"/requests?status=done", "", "")
	if code, field := errorOf(t, bad); bad.status != 400 || code != "invalid_request" || field != "status" ||
		!strings.Contains(bad.raw, "pending, retrying, completed, failed, canceled") {
		t.Errorf("unknown status: %d %s", bad.status, bad.raw)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=zz"} {
		a := do(t, "GET", ts.URL+"/requests?"+q, "", "")
		if a.status != 400 {
			t.Errorf("%s: %d %s", q, a.status, a.raw)
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	ts, b := setup(t, nil)
	a := post(t, ts, `{"url":"https://e.com","delayMs":600000}`)
	id := a.body["id"].(string)
	c := do(t, "DELETE", ts.URL+"/requests/"+id, "", "")
	if c.status != 200 || c.body["status"] != "canceled" || c.body["completedAt"] == nil {
		t.Fatalf("cancel: %d %s", c.status, c.raw)
	}
	if _, err := b.inspector.GetTaskInfo(tasks.Queue, id); err == nil {
		t.Error("the canceled request's task is still queued")
	}
	again := do(t, "DELETE", ts.URL+"/requests/"+id, "", "")
	if code, _ := errorOf(t, again); again.status != 409 || code != "conflict" {
		t.Errorf("second cancel: %d %s", again.status, again.raw)
	}
	missing := do(t, "DELETE", ts.URL+"/requests/01m8mg842n8nbsaee7cq", "", "")
	if missing.status != 404 {
		t.Errorf("cancel unknown: %d", missing.status)
	}
}

func TestIdempotentSubmission(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	body := `{"url":"https://e.com","delayMs":600000}`
	first := post(t, ts, body, "Idempotency-Key", "order-42")
	second := post(t, ts, body, "Idempotency-Key", "order-42")
	if first.status != 202 || second.status != 200 || second.header.Get("Idempotent-Replayed") != "true" ||
		second.body["id"] != first.body["id"] || second.body["status"] != "pending" {
		t.Errorf("replay: first %d %s, second %d %s %v", first.status, first.raw, second.status, second.raw, second.header)
	}
	other := post(t, ts, `{"url":"https://e.com/other"}`, "Idempotency-Key", "order-42")
	if code, _ := errorOf(t, other); other.status != 409 || code != "conflict" {
		t.Errorf("same key, other body: %d %s", other.status, other.raw)
	}
	list := do(t, "GET", ts.URL+"/requests", "", "")
	if n := len(list.body["data"].([]any)); n != 1 {
		t.Errorf("%d requests stored, want 1", n)
	}
}

func TestRedisDownIs503AndNothingIsAccepted(t *testing.T) {
	t.Parallel()
	ts, b := setup(t, nil)
	if a := do(t, "GET", ts.URL+"/readyz", "", ""); a.status != 200 {
		t.Fatalf("readyz with redis up: %d", a.status)
	}
	b.redis.Kill()
	a := post(t, ts, `{"url":"https://e.com"}`)
	if code, _ := errorOf(t, a); a.status != 503 || code != "unavailable" {
		t.Errorf("submit with redis down: %d %s", a.status, a.raw)
	}
	if a := do(t, "GET", ts.URL+"/readyz", "", ""); a.status != 503 {
		t.Errorf("readyz with redis down: %d", a.status)
	}
	if a := do(t, "GET", ts.URL+"/healthz", "", ""); a.status != 200 {
		t.Errorf("healthz with redis down: %d", a.status)
	}
	// Recovery without restarting the API.
	b.redis.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := post(t, ts, `{"url":"https://e.com"}`)
		if a.status == 202 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("API did not recover after redis came back: %d %s", a.status, a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestUnknownRouteAndMethodAnswerJSON(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	a := do(t, "GET", ts.URL+"/nope", "", "")
	if code, _ := errorOf(t, a); a.status != 404 || code != "not_found" {
		t.Errorf("unknown route: %d %s", a.status, a.raw)
	}
	m := do(t, "PUT", ts.URL+"/requests", "", "")
	if m.status != 405 {
		t.Errorf("PUT /requests: %d %s", m.status, m.raw)
	}
}
