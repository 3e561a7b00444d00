package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/tasks"
)

// BenchmarkWorker measures one worker process's cost per delivered request
// (in-process, real Redis, a local destination): b.N requests are stored
// with their tasks first, then the worker drains them.
func BenchmarkWorker(b *testing.B) {
	srv := redistest.Start(b)
	var hits atomic.Int64
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
	}))
	defer dest.Close()
	store := record.NewStore(srv.Client(), time.Hour)
	body := []byte(`{"url":"` + dest.URL + `","method":"POST","body":"` + strings.Repeat("x", 1024) + `"}`)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		now := time.Now()
		r, _ := submit.Parse(body, now)
		r.ID = ids.New(now)
		if _, err := store.Create(ctx, r, "", nil, tasks.NewTask(r.ID, now, time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	cfg, _ := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "WORKER_CONCURRENCY": "200", "LOG_LEVEL": "warn"}[k]
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		_ = app.RunWorker(wctx, cfg, app.WorkerOptions{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	}()
	for hits.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	stop()
	<-done
}
