package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// benchStackEnv is the API's and the workers' extra environment of every
// retryd run of BenchmarkSuite. The workers run with GOMAXPROCS=1, as
// docker-compose.yml and the Kubernetes manifest run them. BENCH_API_ENV
// and BENCH_WORKER_ENV set either side's extra environment, for A/B runs of
// the same code (BENCH_WORKER_ENV= runs the workers with Go's default).
func benchStackEnv() (apiEnv, workerEnv []string) {
	workers, ok := os.LookupEnv("BENCH_WORKER_ENV")
	if !ok {
		workers = "GOMAXPROCS=1"
	}
	env := []string{"ALLOW_PRIVATE_TARGETS=true", "WORKER_CONCURRENCY=200", benchSecretsKey}
	return append(append([]string{}, env...), strings.Fields(os.Getenv("BENCH_API_ENV"))...),
		append(append([]string{}, env...), strings.Fields(workers)...)
}

// benchStartRedis starts the Redis of one retryd run, with a replica under
// BENCH_REPLICA=1 (for A/B runs of REDIS_WAIT_REPLICAS in BENCH_API_ENV).
func benchStartRedis(t testing.TB) *redistest.Server {
	r := redistest.StartServer(t, redistest.Options{})
	if os.Getenv("BENCH_REPLICA") == "1" {
		redistest.StartReplica(t, r)
	}
	return r
}

// drainFigures are one drain run's: requests/s, the time from the
// workers' start to the first delivery, and CPU per request of the workers
// and of Redis.
type drainFigures struct {
	perSecond, firstMs float64
	cpu                map[string]float64
}

// benchRetrydDrain: retryd draining a backlog, timed as the drained
// ceiling and the BullMQ peers are. The API alone, with no worker running,
// accepts N requests from 32 clients; then the workers start. The clock
// runs from the first delivery until the destination got all N and every
// record says completed, and the CPU is counted over the same span: the
// workers' start (a process each, connecting to Redis), which the
// ceiling's servers and BullMQ's worker do inside a running process, is
// left out, and firstMs says how long it took.
func benchRetrydDrain(t testing.TB, dest *sink, n, workers int) drainFigures {
	apiEnv, workerEnv := benchStackEnv()
	r := benchStartRedis(t)
	defer r.Kill()
	s := startStackFull(t, r, 0, apiEnv, workerEnv)
	defer s.apiProc.stop(5 * time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	ctx := context.Background()
	dest.reset(false, false)
	body := fmt.Sprintf(`{"url":%q,"method":"POST","body":%q,"headers":{"Content-Type":"application/octet-stream"}}`, dest.URL+"/drain", payload)
	submitAll(t, tunedClient(), s.api, body, n, 32)
	if h := dest.hits.Load(); h != 0 {
		t.Fatalf("the destination got %d calls with no worker running", h)
	}

	start := time.Now()
	for i := 0; i < workers; i++ {
		s.startWorker(t)
	}
	// Polled finer than waitFor's 10 ms: this figure is tens of ms.
	for deadline := start.Add(time.Minute); dest.hits.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("retryd drain: no delivery within a minute of the workers' start")
		}
		time.Sleep(time.Millisecond)
	}
	first := time.Now()
	workers0, redis0 := workersCPU(s), procCPU(r.Pid())
	waitFor(t, 10*time.Minute, "retryd drain", func() bool { return dest.hits.Load() >= int64(n) })
	waitFor(t, time.Minute, "drained records completed", func() bool {
		c, _ := rdb.ZCard(ctx, "{retryd}:idx:completed").Result()
		return c >= int64(n)
	})
	el := time.Since(first)
	workerCPU, redisCPU := workersCPU(s)-workers0, procCPU(r.Pid())-redis0
	// Stopped now: idle, they would still take CPU from the runs after.
	for _, w := range s.workers {
		w.stop(5 * time.Second)
	}
	drained := float64(n - 1) // the first delivery starts the clock
	return drainFigures{perSecond: drained / el.Seconds(), firstMs: ms(first.Sub(start)), cpu: map[string]float64{
		"workers": workerCPU * 1e6 / drained,
		"redis":   redisCPU * 1e6 / drained,
	}}
}

// workersCPU is the CPU seconds s's workers have used.
func workersCPU(s *stack) float64 {
	var sum float64
	for _, w := range s.workers {
		sum += procCPU(w.cmd.Process.Pid)
	}
	return sum
}

// bullmqFigure names the figure of a mode of e2e/bullmq/bench.js.
func bullmqFigure(mode string) string {
	if m, ok := strings.CutSuffix(mode, "-e2e"); ok {
		return "bullmq_" + m + "_end_to_end"
	}
	return "bullmq_" + mode
}
