package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/metrics"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// A worker's metrics listener answers Prometheus, and nothing to a call
// retryd's egress sent (every such call is marked), however it got there.
func TestWorkerMetricsRefuseRetrydsOwnCalls(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	store := record.NewStore(rdb, time.Hour)
	srv := httptest.NewServer(workerMux(metrics.New(store, asynq.NewInspectorFromRedisClient(rdb)), nil, store))
	defer srv.Close()

	get := func(c *http.Client) (int, string) {
		t.Helper()
		resp, err := c.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(http.DefaultClient); code != 200 || !strings.Contains(body, "# HELP") {
		t.Fatalf("Prometheus' scrape: %d %.200s", code, body)
	}
	// The egress client with no Own set: only the marker stands between.
	code, body := get((&egress.Guard{AllowPrivate: true}).Client())
	if code != http.StatusForbidden || strings.Contains(body, "# HELP") || !strings.Contains(body, "loop_detected") {
		t.Errorf("a call of retryd's egress: %d %.200s, want 403 loop_detected", code, body)
	}
}

// A worker's /metrics names every tenant: it answers only an admin key,
// as the API's does, while its probes stay open to the kubelet. And it
// holds every cluster-wide series the documented alerts read, the
// endpoints' and the flow keys' among them.
func TestWorkerMetricsNeedTheAdminKey(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	store := record.NewStore(rdb, time.Hour)
	cfg := config.Config{APIKeys: []config.APIKey{{Tenant: "team-a", Secret: "tenant-key"}}, AdminKeys: []string{"admin-key"}}
	srv := httptest.NewServer(workerMux(clusterMetrics(store, asynq.NewInspectorFromRedisClient(rdb), rdb), AdminSecrets(cfg), store))
	defer srv.Close()

	get := func(path, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, auth := range []string{"", "Bearer tenant-key", "Bearer wrong", "Basic Zm9vOmJhcg=="} {
		if code, body := get("/metrics", auth); code != http.StatusUnauthorized || strings.Contains(body, "retryd_") || !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("/metrics with %q: %d %.200s, want 401 and no series", auth, code, body)
		}
	}
	code, body := get("/metrics", "Bearer admin-key")
	if code != 200 {
		t.Fatalf("/metrics with the admin key: %d %.200s", code, body)
	}
	for _, name := range []string{"retryd_endpoints", "retryd_dlq_size", "retryd_attempt_lateness_seconds"} {
		if !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("the worker's /metrics lacks %s", name)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(path, ""); code != 200 {
			t.Errorf("%s without a key: %d, want 200 (probes send no key)", path, code)
		}
	}
	// While ADMIN_KEYS is unset the default tenant's keys are the admins,
	// as on the API; a named tenant's never is.
	bare := AdminSecrets(config.Config{APIKeys: []config.APIKey{{Tenant: "default", Secret: "bare"}, {Tenant: "team-a", Secret: "a"}}})
	if len(bare) != 1 || bare[0] != "bare" {
		t.Errorf("admin secrets without ADMIN_KEYS: %v, want [bare]", bare)
	}
}

// Every alert docs/operating.md recommends reads series that the API and
// each worker serve (the shipped deployments scrape both), so none of them
// is silent for want of data.
func TestEveryDocumentedAlertHasData(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?s)\*\*Alerts worth having\.\*\*(.*?)\n## `).FindSubmatch(doc)
	if section == nil {
		t.Fatal("docs/operating.md has no alerts section")
	}
	var names []string
	for _, expr := range regexp.MustCompile("`([^`]*\\(.*?)`").FindAllSubmatch(section[1], -1) {
		for _, n := range regexp.MustCompile(`\b(?:retryd|asynq)_[a-z_]+`).FindAll(expr[1], -1) {
			names = append(names, strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(string(n), "_bucket"), "_sum"), "_count"))
		}
	}
	if len(names) < 5 {
		t.Fatalf("found the metrics %v in the alerts section", names)
	}
	rdb := redistest.Start(t).Client()
	// asynq describes its queue series only once a queue exists.
	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("probe", nil), asynq.Queue("retryd")); err != nil {
		t.Fatal(err)
	}
	reg := clusterMetrics(record.NewStore(rdb, time.Hour), asynq.NewInspectorFromRedisClient(rdb), rdb).Registry
	descs := make(chan *prometheus.Desc, 256)
	go func() { reg.Describe(descs); close(descs) }()
	served := map[string]bool{}
	for d := range descs {
		if m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String()); m != nil {
			served[m[1]] = true
		}
	}
	for _, n := range names {
		if !served[n] {
			t.Errorf("a documented alert reads %s, which the scraped processes do not serve", n)
		}
	}
}

// With no key configured at all, a worker's /metrics answers loopback
// callers only: a port that names every tenant is never an open door.
func TestWorkerMetricsWithoutKeysAnswerLoopbackOnly(t *testing.T) {
	t.Parallel()
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "retryd_series 1") })
	h := adminOnly(nil, served)
	for addr, want := range map[string]int{"127.0.0.1:5555": 200, "[::1]:5555": 200, "192.0.2.1:5555": 403, "10.0.0.7:5555": 403} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want || (want == 403 && (strings.Contains(rec.Body.String(), "retryd_") || !strings.Contains(rec.Body.String(), "ADMIN_KEYS"))) {
			t.Errorf("/metrics from %s without keys: %d %s, want %d", addr, rec.Code, rec.Body.String(), want)
		}
	}
}
