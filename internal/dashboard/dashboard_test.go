package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
)

var t0 = time.Date(2026, 1, 2, 7, 6, 1, 0, time.UTC)

// A row reads as the API and retryctl read: the request's attempts over its
// life, its run and that run's budget, and why and until when it waits.
func TestSummaryShowsTheRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    record.Request
		want string
	}{
		{record.Request{Method: "POST", URL: "https://api.e.com/v1/hook?token=abc&x=1", Status: record.Retrying, AttemptCount: 2, BudgetUsed: 2, MaxRetries: 5, LastStatusCode: 503},
			"retrying · 2 attempts · run 1: 2 of 6 allowed · POST api.e.com/v1/hook?token=[REDACTED]&x=1 · last 503"},
		{record.Request{Method: "GET", URL: "http://e.com/", Status: record.Pending, MaxRetries: 0, WaitingFor: record.WaitingPaused, NextAttemptAt: t0.Add(-time.Minute)},
			"pending · waiting for paused · starts when its flow-control key is resumed · 0 attempts · run 1: 0 of 1 allowed · GET e.com/ · no answer yet"},
		{record.Request{Method: "GET", URL: "http://e.com/", Status: record.Pending, AttemptCount: 1, BudgetUsed: 1, MaxRetries: 3,
			WaitingFor: record.WaitingRate, WaitUntil: t0.Add(1152 * time.Millisecond), LastStatusCode: 503},
			"pending · waiting for rate · starts 2026-01-02T07:06:02.152Z · 1 attempt · run 1: 1 of 4 allowed · GET e.com/ · last 503"},
		{record.Request{Method: "POST", URL: "http://e.com/", Status: record.Retrying, AttemptCount: 1, BudgetUsed: 1, MaxRetries: 3,
			WaitingFor: record.WaitingEndpointOpen, WaitUntil: t0.Add(4 * time.Second), LastStatusCode: 503},
			"retrying · waiting for endpoint_open · next probe 2026-01-02T07:06:05.000Z · 1 attempt · run 1: 1 of 4 allowed · POST e.com/ · last 503"},
		// A redriven request: 4 attempts in its life, the second run spent
		// its 2; the run number says it was redriven once.
		{record.Request{Method: "PUT", URL: "http://e.com/x", Status: record.Failed, AttemptCount: 4, BudgetUsed: 2, MaxRetries: 1, FailureClass: "timeout", RedriveCount: 1},
			"failed · 4 attempts · run 2: 2 of 2 allowed · PUT e.com/x · last timeout"},
		{record.Request{Tenant: "team-a", Method: "GET", URL: "http://e.com/", Status: record.Completed, AttemptCount: 1, BudgetUsed: 1, LastStatusCode: 200},
			"completed · 1 attempt · run 1: 1 of 1 allowed · GET e.com/ · last 200 · tenant team-a"},
		{record.Request{Method: "POST", URL: "https://api.partner.com/x", Status: record.Completed, AttemptCount: 1, BudgetUsed: 1, LastStatusCode: 200,
			Credential: "partner-oauth", Proxy: "fixed-ip"},
			"completed · 1 attempt · run 1: 1 of 1 allowed · POST api.partner.com/x · last 200 · credential partner-oauth · proxy fixed-ip"},
		{record.Request{Tenant: "default", Method: "GET", URL: "http://e.com/", Status: record.Completed, AttemptCount: 1, BudgetUsed: 1, LastStatusCode: 200},
			"completed · 1 attempt · run 1: 1 of 1 allowed · GET e.com/ · last 200"},
		{record.Request{Method: "POST", URL: "http://e.com/", Status: record.Failed, AttemptCount: 1, BudgetUsed: 1, LastStatusCode: 410, Expunged: true},
			"failed · 1 attempt · run 1: 1 of 1 allowed · POST e.com/ · last 410 · payload expunged"},
		{record.Request{Method: "POST", URL: "http://e.com/", Status: record.Completed, AttemptCount: 1, BudgetUsed: 1, LastStatusCode: 200, Expunged: true,
			ExpungedBy: record.RetentionActor}, "completed · 1 attempt · run 1: 1 of 1 allowed · POST e.com/ · last 200 · payload expired (payload retention)"},
	} {
		if got := Summary(&c.r, t0); got != c.want {
			t.Errorf("Summary = %q\n want %q", got, c.want)
		}
	}
}

type records map[string]*record.Request

func (r records) Get(_ context.Context, id string) (*record.Request, error) {
	if q, ok := r[id]; ok {
		return q, nil
	}
	return nil, record.ErrNotFound
}

type counter map[record.Status]int64

func (c counter) CountByStatus(context.Context, tenant.Scope) (map[record.Status]int64, error) {
	return c, nil
}

// asynqmon answers with asynq's view; the dashboard's answer carries
// retryd's: the next attempt's due time to the millisecond (none while an
// event starts the request; asynq's is a safety net minutes away), the
// request's timeout (asynq's has a margin), the run's attempts against its
// budget (asynq's retry count also counts interruptions and redrives).
func TestTaskJSONShowsRetrydsTimesAndBudget(t *testing.T) {
	t.Parallel()
	reqs := records{
		"01due":    {ID: "01due", Status: record.Retrying, AttemptCount: 3, BudgetUsed: 3, MaxRetries: 5, TimeoutMs: 30000, NextAttemptAt: t0.Add(10152 * time.Millisecond)},
		"01paused": {ID: "01paused", Status: record.Pending, MaxRetries: 1, TimeoutMs: 1500, NextAttemptAt: t0.Add(-time.Minute), WaitingFor: record.WaitingPaused},
		"01late":   {ID: "01late", Status: record.Pending, MaxRetries: 1, TimeoutMs: 1000, NextAttemptAt: t0.Add(-time.Second)},
	}
	asynq := map[string]string{
		"/monitoring/api/queues/retryd/retry_tasks": `{"tasks":[` +
			`{"id":"01due","next_process_at":"2026-01-02T07:06:13Z","retried":2,"max_retry":5,"timeout_seconds":41},` +
			`{"id":"01paused","next_process_at":"2026-01-02T07:11:00Z","retried":0,"max_retry":4,"timeout_seconds":13},` +
			`{"id":"callback:01due","next_process_at":"2026-01-02T07:06:13Z","retried":1,"max_retry":25,"timeout_seconds":30}],"stats":{"size":3}}`,
		"/monitoring/api/queues/retryd/tasks/01late": `{"id":"01late","next_process_at":"2026-01-02T07:06:00Z","retried":0,"max_retry":1,"timeout_seconds":12}`,
	}
	d := &Dashboard{Root: "/monitoring", Records: reqs, Now: func() time.Time { return t0 },
		UI: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(asynq[r.URL.Path]))
		})}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	d.Routes(e)
	get := func(path string) map[string]any {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return out
	}
	list := get("/monitoring/api/queues/retryd/retry_tasks")
	want := []any{
		map[string]any{"id": "01due", "next_process_at": "2026-01-02T07:06:11.152Z", "retried": 3.0, "max_retry": 6.0, "timeout_seconds": 30.0},
		map[string]any{"id": "01paused", "next_process_at": "", "retried": 0.0, "max_retry": 2.0, "timeout_seconds": 2.0},
		map[string]any{"id": "callback:01due", "next_process_at": "2026-01-02T07:06:13Z", "retried": 1.0, "max_retry": 25.0, "timeout_seconds": 30.0},
	}
	if diff := cmp.Diff(want, list["tasks"]); diff != "" {
		t.Errorf("retry tasks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"size": 3.0}, list["stats"]); diff != "" {
		t.Errorf("stats changed (-want +got):\n%s", diff)
	}
	// Due already: a free worker slot starts it, never a time "in the past".
	one := get("/monitoring/api/queues/retryd/tasks/01late")
	if one["next_process_at"] != "" || one["timeout_seconds"] != 1.0 {
		t.Errorf("task = %v, want no next_process_at and timeout_seconds 1", one)
	}
}

// The headline numbers are requests by status, every status named, and
// the endpoints that hold their requests with their next probe.
func TestCountsAreRequestsByStatus(t *testing.T) {
	t.Parallel()
	probe := time.Date(2026, 1, 2, 7, 6, 11, 0, time.UTC)
	d := &Dashboard{Root: "/monitoring", Counter: counter{record.Completed: 16, record.Failed: 12, record.Pending: 4},
		Endpoints: func(context.Context) ([]flow.EndpointInfo, error) {
			return []flow.EndpointInfo{
				{Name: tenant.Qualify("acme", "https://api.example.com:443"), State: flow.EndpointOpen, Waiting: 7, NextProbe: probe},
				{Name: "http://up.example.com:80", State: flow.EndpointClosed},
				{Name: "http://held.example.com:80", State: flow.EndpointOpen, Waiting: 2, By: "operator"},
			}, nil
		}}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	d.Routes(e)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/monitoring"+countsPath, nil))
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	want := map[string]any{"pending": 4.0, "retrying": 0.0, "completed": 16.0, "failed": 12.0, "canceled": 0.0,
		"endpoints": []any{
			map[string]any{"endpoint": "https://api.example.com:443", "tenant": "acme", "state": "open", "waiting": 7.0,
				"nextProbe": "2026-01-02T07:06:11Z"},
			map[string]any{"endpoint": "http://held.example.com:80", "tenant": "", "state": "open", "waiting": 2.0, "openedBy": "operator"},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

// Every page carries the script that relabels asynq's counters and shows
// the requests by status first.
func TestPagesCarryTheTruthScript(t *testing.T) {
	t.Parallel()
	d := &Dashboard{Root: "/monitoring", UI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><head></head><body></body></html>"))
	})}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	d.Routes(e)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/monitoring/", nil))
	body := rec.Body.String()
	for _, want := range []string{`"/monitoring/retryd/requests"`, `"Attempts processed"`, "retryd-requests"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// retryd's own pages are served below the dashboard, and their calls reach
// the API's routes (the same method, credentials and body, at the API's
// path); any other path below apiPrefix is refused, never forwarded.
func TestOwnPagesCallTheAPIsRoutes(t *testing.T) {
	t.Parallel()
	type call struct{ method, path, auth, body string }
	var got []call
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, call{r.Method, r.URL.Path, r.Header.Get("Authorization"), string(b)})
		w.WriteHeader(http.StatusAccepted)
	})
	d := &Dashboard{Root: "/monitoring", API: api, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	d.Routes(e)
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.SetBasicAuth("", "admin-key")
		e.ServeHTTP(rec, req)
		return rec
	}
	const id = "01m8mg842n8nbsaee7cq"
	for path, want := range map[string]string{
		"/monitoring/retryd/schedules":      `/retryd/api/schedules?limit=100`,
		"/monitoring/retryd/requests/" + id: `"01m8mg842n8nbsaee7cq"`,
	} {
		rec := serve("GET", path, "")
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d %s, want a page holding %s", path, rec.Code, rec.Header().Get("Content-Type"), want)
		}
	}
	if rec := serve("GET", "/monitoring/retryd/requests/NOT-AN-ID", ""); rec.Code != http.StatusNotFound {
		t.Errorf("a request page for a bad id: %d", rec.Code)
	}
	for _, c := range []call{
		{"POST", "/requests/" + id + "/resend", "", `{"actor":"dashboard"}`},
		{"DELETE", "/requests/" + id + "/payload", "", `{"actor":"dashboard"}`},
		{"GET", "/requests/" + id, "", ""},
		{"GET", "/schedules", "", ""},
	} {
		got = nil
		rec := serve(c.method, "/monitoring/retryd/api"+c.path, c.body)
		c.auth = "Basic OmFkbWluLWtleQ=="
		if rec.Code != http.StatusAccepted || len(got) != 1 || got[0] != c {
			t.Errorf("%s %s: %d, the API got %+v; want %+v", c.method, c.path, rec.Code, got, c)
		}
	}
	for _, c := range []call{{"DELETE", "/requests/" + id, "", ""}, {"POST", "/dlq/redrive", "", "{}"}, {"GET", "/metrics", "", ""}} {
		got = nil
		if rec := serve(c.method, "/monitoring/retryd/api"+c.path, c.body); rec.Code != http.StatusNotFound || len(got) != 0 {
			t.Errorf("%s %s was forwarded: %d %+v", c.method, c.path, rec.Code, got)
		}
	}
}
