package app_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
)

// BenchmarkSubmit measures the API's cost of one accepted submission
// (in-process, real Redis): the figure behind submit latency and the
// end-to-end throughput.
func BenchmarkSubmit(b *testing.B) {
	srv := redistest.Start(b)
	cfg, _ := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true"}[k]
	})
	e, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	defer closeEngine()
	body := `{"url":"http://127.0.0.1:9/bench","method":"POST","body":"` + strings.Repeat("x", 1024) + `"}`
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/requests", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			if w.Code != http.StatusAccepted {
				b.Fatalf("status %d %s", w.Code, w.Body)
			}
		}
	})
}
