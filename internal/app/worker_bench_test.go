package app_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/hibiken/asynq"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/waiting"
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
	// Stored with their tasks in one script each, as the API does.
	queue := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(srv.Client()),
		Waiting: tasks.NewWaiting(srv.Client(), partition.Set{}, nil, waiting.Tuning{}, nil)}
	for i := 0; i < b.N; i++ {
		now := time.Now()
		r, _ := submit.Parse(body, now)
		r.ID = ids.New(now)
		task, err := queue.PendingTask(ctx, r.ID, time.Minute, r.MaxRetries)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.Create(ctx, r, "", nil, record.CreateOptions{Task: task}); err != nil {
			b.Fatal(err)
		}
	}
	cfg, _ := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "WORKER_CONCURRENCY": "200", "LOG_LEVEL": "warn"}[k]
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	cpu0, redis0 := processCPU(os.Getpid()), processCPU(srv.Pid())
	b.ResetTimer()
	go func() {
		defer close(done)
		_ = app.RunWorker(wctx, cfg, app.WorkerOptions{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	}()
	for hits.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	// CPU per request is steadier than wall time on a shared machine.
	b.ReportMetric(float64((processCPU(os.Getpid())-cpu0).Microseconds())/float64(b.N), "worker-cpu-µs/req")
	b.ReportMetric(float64((processCPU(srv.Pid())-redis0).Microseconds())/float64(b.N), "redis-cpu-µs/req")
	stop()
	<-done
}

// processCPU is the user+system CPU time process pid used so far.
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // clock ticks of 1/100 s
}
