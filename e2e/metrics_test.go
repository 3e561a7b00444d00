package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape returns the value of the first sample of series matching
// pattern (a regexp over the whole line before the value), or -1.
func scrape(t *testing.T, url, auth, pattern string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, body)
	}
	m := regexp.MustCompile(`(?m)^` + pattern + ` ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// The series an operator watches move with the work: submissions,
// attempts by outcome, attempt duration and lateness, DLQ size, redrives,
// asynq's queue metrics; on the API (behind the key) and on the worker's
// METRICS_ADDR.
func TestMetricsMoveWithTheWork(t *testing.T) {
	t.Parallel()
	const key = "metrics-key"
	workerMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := startStackWith(t, 0, []string{"ALLOW_PRIVATE_TARGETS=true", "API_KEYS=" + key},
		[]string{"ALLOW_PRIVATE_TARGETS=true", "METRICS_ADDR=" + workerMetrics, "API_KEYS=" + key})
	s.startWorker(t)
	dest := newDestination(t)
	api := s.api + "/metrics"
	if req, _ := http.NewRequest("GET", api, nil); true {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("/metrics without the key: %d, want 401", resp.StatusCode)
		}
	}
	submit := func(body string) string {
		a := call(t, "POST", s.api+"/requests", body, "Authorization", "Bearer "+key)
		if a.status != 202 {
			t.Fatalf("submit: %d %s", a.status, a.raw)
		}
		return a.body["id"].(string)
	}
	get := func(id string) map[string]any {
		return call(t, "GET", s.api+"/requests/"+id, "", "Authorization", "Bearer "+key).body
	}
	ok := submit(fmt.Sprintf(`{"url":%q}`, dest.script("/m-ok", 200)))
	bad := submit(fmt.Sprintf(`{"url":%q}`, dest.script("/m-bad", 404)))
	_ = call(t, "POST", s.api+"/requests", `{}`, "Authorization", "Bearer "+key)
	for _, id := range []string{ok, bad} {
		waitFor(t, 10*time.Second, "request finished", func() bool {
			st := get(id)["status"]
			return st == "completed" || st == "failed"
		})
	}
	checks := map[string]float64{
		`retryd_submissions_total\{result="accepted"\}`:                             2,
		`retryd_submissions_total\{result="rejected"\}`:                             1,
		`retryd_attempts_total\{failure_class="",outcome="success"\}`:               1,
		`retryd_attempts_total\{failure_class="client_error",outcome="permanent"\}`: 1,
		`retryd_attempt_duration_seconds_count`:                                     2,
		`retryd_attempt_lateness_seconds_count`:                                     2,
		`retryd_dlq_size`:                                                           1,
		`retryd_requests\{status="completed",tenant="default"\}`:                    1,
	}
	// The attempt counters reach Redis within a second of the attempt
	// (each worker adds its counts once a second).
	for pattern, want := range checks {
		got := scrape(t, api, key, pattern)
		for deadline := time.Now().Add(10 * time.Second); got != want && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			got = scrape(t, api, key, pattern)
		}
		if got != want {
			t.Errorf("API %s = %v, want %v", pattern, got, want)
		}
	}
	if got := scrape(t, api, key, `asynq_tasks_enqueued_total\{queue="retryd",state="archived"\}`); got != 1 {
		t.Errorf("asynq queue metrics: archived = %v, want 1", got)
	}
	if got := scrape(t, api, key, `retryd_redrives_total\{source="api"\}`); got != -1 {
		t.Errorf("redrives before any: %v", got)
	}
	if a := call(t, "POST", s.api+"/dlq/"+bad+"/redrive", `{"actor":"ops"}`, "Authorization", "Bearer "+key); a.status != 202 {
		t.Fatalf("redrive: %d", a.status)
	}
	if got := scrape(t, api, key, `retryd_redrives_total\{source="api"\}`); got != 1 {
		t.Errorf("redrives after one: %v", got)
	}
	// The worker's own listener: health without a key, and the same
	// cluster-wide series (the endpoints' among them) behind the admin key.
	if a := call(t, "GET", "http://"+workerMetrics+"/healthz", ""); a.status != 200 {
		t.Errorf("worker /healthz: %d", a.status)
	}
	for _, auth := range []string{"", "Bearer wrong"} {
		if a := call(t, "GET", "http://"+workerMetrics+"/metrics", "", "Authorization", auth); a.status != 401 || strings.Contains(a.raw, "retryd_") {
			t.Errorf("worker /metrics with %q: %d, want 401 and no series", auth, a.status)
		}
	}
	if got := scrape(t, "http://"+workerMetrics+"/metrics", key, `retryd_attempts_total\{failure_class="",outcome="success"\}`); got != 1 {
		t.Errorf("worker /metrics success attempts = %v", got)
	}
	if got := scrape(t, "http://"+workerMetrics+"/metrics", key, `retryd_endpoints\{state="open"\}`); got != 0 {
		t.Errorf("worker /metrics retryd_endpoints{state=open} = %v, want 0 (the endpoint alert's series)", got)
	}
	if got := scrape(t, "http://"+workerMetrics+"/metrics", key, `go_goroutines`); got <= 0 {
		t.Errorf("worker /metrics go_goroutines = %v", got)
	}
}
