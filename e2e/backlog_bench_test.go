package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting/asynqx"
	"github.com/retryd/retryd/tasks"
)

// The backlog figures of SPEC §8.1 (`make bench-backlog`): what waiting
// costs. A backlog is submitted, then the stack is watched in its steady
// state; the figures are per attempt made in that window, so a design
// whose cost grows with the backlog shows here and not in the per-request
// figures of BenchmarkSuite.

// backlogSlots is the stack's worker slots: two workers at the test
// stack's WORKER_CONCURRENCY (20).
const backlogSlots = 2 * 20

// backlogScenario is one kind of backlog.
type backlogScenario struct {
	name string
	// body is the submission of the backlog's requests to url.
	body func(url string) string
	// handler is the backlog's destination.
	handler http.HandlerFunc
}

var backlogScenarios = []backlogScenario{
	{
		name: "rate", // (a) behind one key with rate 20/s
		body: func(url string) string {
			return fmt.Sprintf(`{"url":%q,"method":"POST","flowControl":{"key":"backlog","rate":20,"periodMs":1000}}`, url)
		},
		handler: func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) },
	},
	{
		name: "slow", // (b) a destination answering in 2 s, default fairness
		body: func(url string) string { return fmt.Sprintf(`{"url":%q,"method":"POST","timeoutMs":30000}`, url) },
		handler: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		},
	},
	{
		name: "parallel", // behind one key with parallelism 4, answers in 100 ms
		body: func(url string) string {
			return fmt.Sprintf(`{"url":%q,"method":"POST","flowControl":{"key":"backlog","parallelism":4}}`, url)
		},
		handler: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
			}
		},
	},
	{
		name: "failing", // (c) a destination answering 503
		body: func(url string) string {
			return fmt.Sprintf(`{"url":%q,"method":"POST","maxRetries":25,"backoffMs":1000,"maxBackoffMs":60000}`, url)
		},
		handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
	},
}

// BenchmarkBacklog prints the backlog figures: BENCH_BACKLOG requests
// (default 20000) per scenario, BENCH_WINDOW seconds of steady state
// (default 30), scenarios named in BENCH_SCENARIOS (default all).
func BenchmarkBacklog(b *testing.B) {
	n, window := envInt("BENCH_BACKLOG", 20000), time.Duration(envInt("BENCH_WINDOW", 30))*time.Second
	want := strings.Fields(strings.ReplaceAll(os.Getenv("BENCH_SCENARIOS"), ",", " "))
	for i := 0; i < b.N; i++ {
		for _, sc := range backlogScenarios {
			if len(want) > 0 && !slices.Contains(want, sc.name) {
				continue
			}
			res := runBacklog(b, sc, n, window)
			keys := make([]string, 0, len(res))
			for k := range res {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Printf("BACKLOG %s n=%d %s %.2f\n", sc.name, n, k, res[k])
			}
		}
	}
}

// TestBacklogSmoke keeps the backlog benchmark working: a tiny run of each
// scenario. It asserts no figure, only that each is produced.
func TestBacklogSmoke(t *testing.T) {
	t.Parallel()
	for _, sc := range backlogScenarios {
		res := runBacklog(t, sc, 50, 2*time.Second)
		for _, k := range []string{"commands_per_attempt", "cpu_ms_per_attempt", "other_destination_first_attempt_max_ms", "attempts_per_s"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%s: no figure %s", sc.name, k)
			}
		}
	}
}

// runBacklog submits n requests of sc, lets the stack settle, and measures
// window of steady state: Redis commands and CPU (Redis and workers) per
// attempt made, and how soon a request to another destination starts.
func runBacklog(t testing.TB, sc backlogScenario, n int, window time.Duration) map[string]float64 {
	var hits atomic.Int64
	var calls callTimes
	backlog := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		start := time.Now()
		sc.handler(w, r)
		calls.add(start, time.Now())
	}))
	t.Cleanup(backlog.Close)
	probe := newSink(t)
	probe.reset(true, false)

	r := redistest.StartServer(t, redistest.Options{})
	// As deployed: two workers at GOMAXPROCS=1, default concurrency.
	// BENCH_WORKER_ENV adds settings (FLOW_ADAPTIVE_MIN_RATE=10: the cost
	// per attempt apart from the stack's fixed cost).
	workerEnv := append([]string{"ALLOW_PRIVATE_TARGETS=true", "GOMAXPROCS=1"}, strings.Fields(os.Getenv("BENCH_WORKER_ENV"))...)
	// The API admits the whole backlog and the probes (none of (c) finishes).
	s := startStackFull(t, r, 2, []string{"ALLOW_PRIVATE_TARGETS=true", "MAX_UNFINISHED_PER_KEY=1000000"}, workerEnv)
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr})
	defer rdb.Close()

	hc := tunedClient()
	body := sc.body(backlog.URL + "/backlog")
	submitted := time.Now()
	submitAll(t, hc, s.api, body, n, 16)
	submitTime := time.Since(submitted)
	// Settle: the first admission of every request (a park, for most) is
	// not the steady state; wait until asynq holds no backlog of runnable
	// tasks, then a little more.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	waitFor(t, 10*time.Minute, "the backlog's first admissions", func() bool {
		q, err := insp.GetQueueInfo(tasks.Queue)
		return err == nil && q.Pending < 100
	})
	time.Sleep(min(5*time.Second, window))

	cmd0, cpu0, hits0, cs0 := commandCalls(t, rdb), stackCPU(s), hits.Load(), stackSwitches(s)
	stats0 := commandStats(t, rdb)
	stopPerf := perfRecord(t, s)
	start := time.Now()
	// Slots busy: asynq's active list, sampled every 250 ms (one LLEN
	// each, taken off the command count).
	var busyMax, busySum, samples atomic.Int64
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		every := time.NewTicker(250 * time.Millisecond)
		defer every.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-every.C:
			}
			n, err := rdb.LLen(sampleCtx, asynqx.QueueKeys(tasks.Queue).Active()).Result()
			if err != nil {
				continue
			}
			samples.Add(1)
			busySum.Add(n)
			if n > busyMax.Load() {
				busyMax.Store(n)
			}
		}
	}()
	// Probes to another destination, spread over the window.
	var probeWorst time.Duration
	probes := 10
	gap := window / time.Duration(probes+1)
	for i := 0; i < probes; i++ {
		time.Sleep(gap)
		at := time.Now()
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"method":"POST"}`, probe.URL+"/probe"))
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if hit, ok := probe.arrival(id, 0); ok {
				probeWorst = max(probeWorst, hit.Sub(at))
				break
			}
			if time.Now().After(deadline) {
				probeWorst = max(probeWorst, time.Since(at))
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if rest := window - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	stopPerf()
	stopSampling()
	<-sampled
	el := time.Since(start)
	cmd1, cpu1, hits1, cs1 := commandCalls(t, rdb), stackCPU(s), hits.Load(), stackSwitches(s)
	cmd1 -= samples.Load()
	attempts := float64(hits1 - hits0)
	if os.Getenv("BENCH_COMMANDSTATS") == "1" {
		fmt.Printf("COMMANDSTATS backlog %s, per attempt made:\n", sc.name)
		printCommandStats(stats0, commandStats(t, rdb), int(max(attempts, 1)))
	}
	cpu := (cpu1["redis"] - cpu0["redis"]) + (cpu1["workers"] - cpu0["workers"])
	per := func(v float64) float64 {
		if attempts == 0 {
			return v // no attempt: the whole window's cost, for one
		}
		return v / attempts
	}
	out := map[string]float64{
		"submit_s":                               submitTime.Seconds(),
		"attempts_per_s":                         attempts / el.Seconds(),
		"redis_commands_per_s":                   float64(cmd1-cmd0) / el.Seconds(),
		"cpu_cores_redis":                        (cpu1["redis"] - cpu0["redis"]) / el.Seconds(),
		"cpu_cores_workers":                      (cpu1["workers"] - cpu0["workers"]) / el.Seconds(),
		"cpu_ms_per_s_redis":                     (cpu1["redis"] - cpu0["redis"]) * 1000 / el.Seconds(),
		"cpu_ms_per_s_workers":                   (cpu1["workers"] - cpu0["workers"]) * 1000 / el.Seconds(),
		"commands_per_attempt":                   per(float64(cmd1 - cmd0)),
		"cpu_ms_per_attempt":                     per(cpu * 1000),
		"switches_per_attempt_redis":             per(cs1["redis"] - cs0["redis"]),
		"switches_per_attempt_workers":           per(cs1["workers"] - cs0["workers"]),
		"other_destination_first_attempt_max_ms": float64(probeWorst.Microseconds()) / 1000,
		"slots_busy_max_share":                   float64(busyMax.Load()) / backlogSlots,
		"slots_busy_mean_share":                  float64(busySum.Load()) / float64(max(samples.Load(), 1)) / backlogSlots,
	}
	if p50, p99, worst, ok := calls.handOff(start, start.Add(el-3*time.Second)); ok {
		// A call that ended while others waited: how soon the next began.
		out["handoff_p50_ms"], out["handoff_p99_ms"], out["handoff_max_ms"] = p50, p99, worst
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if info, err := rdb.Info(ctx, "memory").Result(); err == nil {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				var b float64
				fmt.Sscan(v, &b)
				out["redis_used_mib"] = b / (1 << 20)
			}
		}
	}
	return out
}

// callTimes are the backlog destination's calls, start and end.
type callTimes struct {
	mu           sync.Mutex
	starts, ends []time.Time
}

func (c *callTimes) add(start, end time.Time) {
	c.mu.Lock()
	c.starts, c.ends = append(c.starts, start), append(c.ends, end)
	c.mu.Unlock()
}

// handOff is, for the calls that ended between from and to, how long
// until the destination's next call began (p99 and worst, ms): with a
// backlog waiting, a freed slot's hand-off to the next waiter on any
// worker. Meaningful where the slots stay full (the slow backlog).
func (c *callTimes) handOff(from, to time.Time) (p50, p99, worst float64, ok bool) {
	c.mu.Lock()
	starts := slices.Clone(c.starts)
	ends := slices.Clone(c.ends)
	c.mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []float64
	for _, e := range ends {
		if e.Before(from) || e.After(to) {
			continue
		}
		i, _ := slices.BinarySearchFunc(starts, e, func(a, b time.Time) int { return a.Compare(b) })
		if i < len(starts) {
			gaps = append(gaps, float64(starts[i].Sub(e).Microseconds())/1000)
		}
	}
	if len(gaps) < 10 {
		return 0, 0, 0, false
	}
	sort.Float64s(gaps)
	return gaps[len(gaps)/2], gaps[len(gaps)*99/100], gaps[len(gaps)-1], true
}
