package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

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
	srv := httptest.NewServer(workerMux(metrics.New(store, asynq.NewInspectorFromRedisClient(rdb)), store))
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
