package app_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting"
)

func infoField(t *testing.T, rdb *redis.Client, section, prefix, field string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, field+"="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
			if v, ok := strings.CutPrefix(kv, field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

// startIdleWorker runs a worker (RunWorker) with env on a Redis of its own
// and returns that Redis once the worker waits on the doorbell.
func startIdleWorker(t *testing.T, env map[string]string) *redis.Client {
	t.Helper()
	srv := redistest.StartServer(t, redistest.Options{})
	cfg, err := config.Load(func(k string) string {
		if k == "REDIS_URL" {
			return srv.URL
		}
		if k == "SWEEP_INTERVAL" {
			return "1h"
		}
		return env[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunWorker(ctx, cfg, app.WorkerOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { stop(); <-done })
	rdb := srv.Client()
	deadline := time.Now().Add(10 * time.Second)
	for infoField(t, rdb, "clients", "", "blocked_clients") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the idle worker never waited on the doorbell (BLPOP)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rdb
}

// The worker as RunWorker composes it waits on the doorbell when idle; if
// the hooks were composed wrong (or asynq's dequeue no longer recognised),
// it would poll every TaskCheckInterval: hundreds of scripts a second.
func TestIdleWorkerWaitsOnTheDoorbellInsteadOfPolling(t *testing.T) {
	t.Parallel()
	rdb := startIdleWorker(t, nil)
	before := infoField(t, rdb, "commandstats", "cmdstat_evalsha:", "calls")
	time.Sleep(time.Second) // a measuring window, not synchronisation
	calls := infoField(t, rdb, "commandstats", "cmdstat_evalsha:", "calls") - before
	// The forwarder (every DelayedTaskCheckInterval) and a dequeue per
	// doorbell wait are expected; polling every TaskCheckInterval is not.
	tune := waiting.DefaultTuning
	limit := int64(time.Second/tune.AsynqForward) + int64(time.Second/tune.BellWait) + 40
	if calls > limit {
		t.Errorf("an idle worker ran %d scripts in 1 s (at most %d expected): it polls", calls, limit)
	}
}

// An idle worker's Redis commands grow with the partitions it serves
// (asynq's forwarding, retryd's timer and scheduler look at each), but
// stay a few hundred a second at PARTITIONS=16 (SPEC 8.1); each partition
// looked at every 50–100 ms cost 1,444.
func TestIdleWorkerWithSixteenPartitionsCostsLittle(t *testing.T) {
	t.Parallel()
	rdb := startIdleWorker(t, map[string]string{"PARTITIONS": "16"})
	before := infoField(t, rdb, "stats", "", "total_commands_processed")
	time.Sleep(3 * time.Second) // a measuring window, not synchronisation
	perSecond := (infoField(t, rdb, "stats", "", "total_commands_processed") - before) / 3
	if perSecond > 300 {
		t.Errorf("an idle worker at PARTITIONS=16 made %d Redis commands/s, want at most 300", perSecond)
	}
}
