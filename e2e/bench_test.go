package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// benchConfig sizes one benchmark run.
type benchConfig struct {
	N      int  // requests per throughput figure
	Rounds int  // runs per figure; medians are reported
	Rate   int  // submissions per second for the latency figure
	BullMQ bool // run the BullMQ peer (needs node and npm)
}

// BenchmarkSuite is `make bench`: every figure of docs/benchmarks.md in one
// run, each measured Rounds times and reported as the median. Size it with
// BENCH_N (default 20000) and BENCH_ROUNDS (default 3).
func BenchmarkSuite(b *testing.B) {
	cfg := benchConfig{N: envInt("BENCH_N", 20000), Rounds: envInt("BENCH_ROUNDS", 3), Rate: envInt("BENCH_RATE", 1000), BullMQ: os.Getenv("BENCH_BULLMQ") != "0"}
	for i := 0; i < b.N; i++ {
		runBench(b, cfg)
	}
}

// TestBenchSmoke keeps the benchmark working: a tiny run of the Go figures
// (the BullMQ peer runs in `make bench`). It asserts no timing.
func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	res := runBench(t, benchConfig{N: 200, Rounds: 1, Rate: 200})
	for _, k := range []string{"ceiling_asynq", "ceiling_asynq_end_to_end", "retryd_end_to_end",
		"drain_retryd", "drain_cpu_per_request_workers", "drain_cpu_per_request_redis", "drain_ratio_to_ceiling", "submit_answer_p99", "first_attempt_p99", "retry_late_p99", "redis_bytes_per_request"} {
		if _, ok := res[k]; !ok {
			t.Errorf("the benchmark did not produce %s", k)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// sink is the destination of every figure: 200 to a POST, body read.
type sink struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	arrived map[string][]time.Time // by Retryd-Request-Id or Idempotency-Key
	track   atomic.Bool
	failOne atomic.Bool // fail the first call of each request
}

func newSink(t testing.TB) *sink {
	s := &sink{arrived: map[string][]time.Time{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		s.hits.Add(1)
		if s.track.Load() {
			id := r.Header.Get("Retryd-Request-Id")
			s.mu.Lock()
			s.arrived[id] = append(s.arrived[id], now)
			first := len(s.arrived[id]) == 1
			s.mu.Unlock()
			if first && s.failOne.Load() {
				w.WriteHeader(500)
				return
			}
		}
		w.WriteHeader(200)
	}))
	s.Config.SetKeepAlivesEnabled(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *sink) reset(track, failOne bool) {
	s.mu.Lock()
	s.arrived = map[string][]time.Time{}
	s.mu.Unlock()
	s.hits.Store(0)
	s.track.Store(track)
	s.failOne.Store(failOne)
}

func (s *sink) arrival(id string, k int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.arrived[id]) <= k {
		return time.Time{}, false
	}
	return s.arrived[id][k], true
}

// inFlight counts a destination's calls under way, and the most at once.
type inFlight struct{ now, peak atomic.Int64 }

// enter counts a call in; the returned func counts it out.
func (f *inFlight) enter() (leave func()) {
	n := f.now.Add(1)
	for m := f.peak.Load(); n > m && !f.peak.CompareAndSwap(m, n); m = f.peak.Load() {
	}
	return func() { f.now.Add(-1) }
}

var payload = strings.Repeat("x", 1024)

// tunedClient is the HTTP client a careful Go team would use.
func tunedClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
	}}
}

func runBench(t testing.TB, cfg benchConfig) map[string]float64 {
	dest := newSink(t)
	samples := map[string][]float64{}
	add := func(k string, v float64) { samples[k] = append(samples[k], v) }

	for round := 0; round < cfg.Rounds; round++ {
		drain := benchCeiling(t, dest, cfg.N)
		add("ceiling_asynq", drain.perSecond)
		// The yardstick for the CPU figures below, from the same run: what
		// one task costs asynq alone (its servers and the destination in
		// one process; its Redis).
		add("ceiling_cpu_per_task_process", drain.cpu["process"])
		add("ceiling_cpu_per_task_redis", drain.cpu["redis"])
		// The same yardstick run as retryd's end-to-end figure is: tasks
		// enqueued by 32 clients while the servers run.
		e2e := benchCeilingEndToEnd(t, dest, cfg.N)
		add("ceiling_asynq_end_to_end", e2e.perSecond)
		add("ceiling_end_to_end_cpu_per_task_process", e2e.cpu["process"])
		add("ceiling_end_to_end_cpu_per_task_redis", e2e.cpu["redis"])

		// retryd draining a backlog its API accepted before the workers
		// started: timed as the drained ceiling and the BullMQ peers are.
		d := benchRetrydDrain(t, dest, cfg.N, envInt("BENCH_WORKERS", 2))
		add("drain_retryd", d.perSecond)
		add("drain_first_delivery", d.firstMs)
		for k, v := range d.cpu {
			add("drain_cpu_per_request_"+k, v)
		}

		r := benchStartRedis(t)
		apiEnv, workerEnv := benchStackEnv()
		s := startStackFull(t, r, envInt("BENCH_WORKERS", 2), apiEnv, workerEnv)
		extra, tokens := "", (*atomic.Int64)(nil)
		if benchCredential() == "oauth2" {
			var tokenURL string
			tokenURL, tokens = startBenchTokenServer(t)
			extra = useBenchCredential(t, s, tokenURL)
		}
		tp, fp := benchRetryd(t, s, dest, cfg.N, extra)
		if tokens != nil {
			add("token_requests", float64(tokens.Load()))
		}
		add("retryd_end_to_end", tp)
		add("redis_commands_per_request", fp.commands)
		add("redis_bytes_per_request", fp.bytes)
		add("worker_rss_mib", fp.rssMiB)
		for k, v := range fp.cpu {
			add("cpu_per_request_"+k, v)
		}
		for k, v := range fp.switches {
			add("switches_per_request_"+k, v)
		}

		sub, first := benchLatency(t, s, dest, cfg.Rate)
		add("submit_answer_p50", pct(sub, 50))
		add("submit_answer_p99", pct(sub, 99))
		add("first_attempt_p50", pct(first, 50))
		add("first_attempt_p99", pct(first, 99))

		late, _ := benchRetries(t, s, dest, min(50, cfg.N), 1000, 20*time.Millisecond, 10*time.Second)
		add("retry_late_p50", pct(late, 50))
		add("retry_late_p99", pct(late, 99))
		add("retry_late_max", pct(late, 100))
		// The shortest backoff the API takes: the retry is due before
		// asynq's early hand-over, so it rides on asynq's forwarder.
		short, _ := benchRetries(t, s, dest, min(50, cfg.N), 100, 20*time.Millisecond, 10*time.Second)
		add("retry_short_late_p99", pct(short, 99))
		add("retry_short_late_max", pct(short, 100))
		early := 0.0
		for _, l := range append(late, short...) {
			if l < 0 {
				early++
			}
		}
		add("retry_early", early)

		add("idle_worker_cpu", benchIdle(s))

		if cfg.BullMQ {
			// Drained (jobs added in bulk before the clock starts), then
			// end to end (32 producers add while the worker runs).
			for _, mode := range []string{"fetch", "undici", "fetch-e2e", "undici-e2e"} {
				add(bullmqFigure(mode), benchBullMQ(t, r, dest, cfg.N, mode))
			}
		}
	}

	med := map[string]float64{}
	for k, v := range samples {
		med[k] = pct(v, 50)
	}
	med["ratio_to_ceiling"] = med["retryd_end_to_end"] / med["ceiling_asynq"]
	med["ratio_to_ceiling_end_to_end"] = med["retryd_end_to_end"] / med["ceiling_asynq_end_to_end"]
	med["drain_ratio_to_ceiling"] = med["drain_retryd"] / med["ceiling_asynq"]
	// Both runs keep the 2 cores busy, so the ratio is about the inverse
	// ratio of these two totals.
	med["cpu_per_request_total"] = med["cpu_per_request_api"] + med["cpu_per_request_workers"] + med["cpu_per_request_redis"] + med["cpu_per_request_loadgen_and_destination"]
	med["ceiling_cpu_per_task_total"] = med["ceiling_cpu_per_task_process"] + med["ceiling_cpu_per_task_redis"]
	med["cpu_ratio_to_ceiling"] = (med["cpu_per_request_api"] + med["cpu_per_request_workers"] + med["cpu_per_request_redis"]) / med["ceiling_cpu_per_task_total"]
	med["ceiling_end_to_end_cpu_per_task_total"] = med["ceiling_end_to_end_cpu_per_task_process"] + med["ceiling_end_to_end_cpu_per_task_redis"]
	// Like for like: every process of both runs (retryd's load generator
	// and destination are one process; the ceiling's enqueuers, servers
	// and destination another).
	med["cpu_ratio_to_ceiling_end_to_end"] = med["cpu_per_request_total"] / med["ceiling_end_to_end_cpu_per_task_total"]
	med["redis_bytes_per_request_excl_payload"] = med["redis_bytes_per_request"] - float64(len(payload))
	if cfg.BullMQ {
		med["ratio_to_bullmq_fetch"] = med["retryd_end_to_end"] / med["bullmq_fetch"]
		med["ratio_to_bullmq_undici"] = med["retryd_end_to_end"] / med["bullmq_undici"]
		// Like for like: drain against drain, end to end against end to end.
		med["drain_ratio_to_bullmq_fetch"] = med["drain_retryd"] / med["bullmq_fetch"]
		med["drain_ratio_to_bullmq_undici"] = med["drain_retryd"] / med["bullmq_undici"]
		med["ratio_to_bullmq_fetch_end_to_end"] = med["retryd_end_to_end"] / med["bullmq_fetch_end_to_end"]
		med["ratio_to_bullmq_undici_end_to_end"] = med["retryd_end_to_end"] / med["bullmq_undici_end_to_end"]
	}
	units := map[string]string{
		"ceiling_asynq": "tasks/s", "retryd_end_to_end": "req/s", "bullmq_fetch": "jobs/s", "bullmq_undici": "jobs/s",
		"ratio_to_ceiling": "x", "ratio_to_bullmq_fetch": "x", "ratio_to_bullmq_undici": "x",
		"submit_answer_p50": "ms", "submit_answer_p99": "ms", "first_attempt_p50": "ms", "first_attempt_p99": "ms",
		"retry_late_p50": "ms", "retry_late_p99": "ms", "retry_late_max": "ms", "retry_early": "count",
		"retry_short_late_p99": "ms", "retry_short_late_max": "ms",
		"redis_commands_per_request": "commands", "token_requests": "requests", "redis_bytes_per_request": "bytes", "worker_rss_mib": "MiB",
		"redis_bytes_per_request_excl_payload": "bytes",
		"cpu_per_request_api":                  "us", "cpu_per_request_workers": "us", "cpu_per_request_redis": "us",
		"cpu_per_request_loadgen_and_destination": "us", "idle_worker_cpu": "% of a core",
		"ceiling_cpu_per_task_process": "us", "ceiling_cpu_per_task_redis": "us", "cpu_per_request_total": "us",
		"ceiling_cpu_per_task_total": "us", "cpu_ratio_to_ceiling": "x",
		"ceiling_asynq_end_to_end":    "tasks/s",
		"ratio_to_ceiling_end_to_end": "x", "ceiling_end_to_end_cpu_per_task_process": "us",
		"ceiling_end_to_end_cpu_per_task_redis": "us", "ceiling_end_to_end_cpu_per_task_total": "us",
		"cpu_ratio_to_ceiling_end_to_end": "x",
		"switches_per_request_api":        "switches", "switches_per_request_workers": "switches",
		"switches_per_request_redis": "switches", "switches_per_request_loadgen_and_destination": "switches",
		"drain_retryd": "req/s", "drain_first_delivery": "ms", "drain_ratio_to_ceiling": "x",
		"drain_ratio_to_bullmq_fetch": "x", "drain_ratio_to_bullmq_undici": "x",
		"drain_cpu_per_request_workers": "us", "drain_cpu_per_request_redis": "us",
		"bullmq_fetch_end_to_end": "jobs/s", "bullmq_undici_end_to_end": "jobs/s",
		"ratio_to_bullmq_fetch_end_to_end": "x", "ratio_to_bullmq_undici_end_to_end": "x",
	}
	keys := make([]string, 0, len(med))
	for k := range med {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-46s %12s  %s   (median of %d, N=%d)\n", "figure", "value", "unit", cfg.Rounds, cfg.N)
	for _, k := range keys {
		fmt.Printf("RESULT %s %.3f %s\n", k, med[k], units[k])
		fmt.Fprintf(&table, "%-46s %12.2f  %s\n", k, med[k], units[k])
	}
	fmt.Print(table.String())
	return med
}

type footprint struct {
	commands, bytes, rssMiB float64
	cpu                     map[string]float64 // µs of CPU per request, by process
	switches                map[string]float64 // context switches per request, by process
}

// benchRetryd: N requests through the real API from 32 concurrent clients,
// completed by the real workers; submitted→completed throughput.
func benchRetryd(t testing.TB, s *stack, dest *sink, n int, extra string) (float64, footprint) {
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr})
	defer rdb.Close()
	ctx := context.Background()
	usedBefore := usedMemory(t, rdb)
	callsBefore := commandCalls(t, rdb)
	statsBefore := commandStats(t, rdb)
	dest.reset(false, false)
	hc := tunedClient()
	body := fmt.Sprintf(`{"url":%q,"method":"POST","body":%q,"headers":{"Content-Type":"application/octet-stream"}%s}`, dest.URL+"/bench", payload, extra)
	stopPerf := perfRecord(t, s)
	cpu0, cs0 := stackCPU(s), stackSwitches(s)
	start := time.Now()
	submitAll(t, hc, s.api, body, n, 32)
	waitFor(t, 10*time.Minute, "retryd drain", func() bool { return dest.hits.Load() >= int64(n) })
	// Delivered is not yet recorded: wait for the records too.
	waitFor(t, time.Minute, "records completed", func() bool {
		c, _ := rdb.ZCard(ctx, "{retryd}:idx:completed").Result()
		return c >= int64(n)
	})
	el := time.Since(start)
	cpu1, cs1 := stackCPU(s), stackSwitches(s)
	stopPerf()
	fp := footprint{cpu: map[string]float64{}, switches: map[string]float64{}}
	for k := range cpu1 {
		fp.cpu[k] = (cpu1[k] - cpu0[k]) * 1e6 / float64(n)
		fp.switches[k] = (cs1[k] - cs0[k]) / float64(n)
	}
	if os.Getenv("BENCH_COMMANDSTATS") == "1" {
		fmt.Println("COMMANDSTATS retryd (submission to recorded outcome):")
		printCommandStats(statsBefore, commandStats(t, rdb), n)
	}
	fp = footprint{cpu: fp.cpu, switches: fp.switches,
		commands: float64(commandCalls(t, rdb)-callsBefore) / float64(n),
		bytes:    float64(usedMemory(t, rdb)-usedBefore) / float64(n),
	}
	for _, w := range s.workers {
		fp.rssMiB = max(fp.rssMiB, rssMiB(w.cmd.Process.Pid))
	}
	// Leave the next figures a clean Redis of completed records.
	return float64(n) / el.Seconds(), fp
}

// submitAll submits body n times from clients concurrent clients, as fast
// as the API answers.
func submitAll(t testing.TB, hc *http.Client, api, body string, n, clients int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				resp, err := hc.Post(api+"/requests", "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 202 {
					t.Errorf("submit answered %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// benchLatency submits at a steady rate for 3 s from a pool of clients and
// measures the answer time and submit → first attempt at the destination.
func benchLatency(t testing.TB, s *stack, dest *sink, rate int) (submit, first []float64) {
	dest.reset(true, false)
	hc := tunedClient()
	body := fmt.Sprintf(`{"url":%q,"method":"POST","body":%q}`, dest.URL+"/lat", payload)
	total := rate * 3
	type sent struct {
		id string
		at time.Time
		d  time.Duration
	}
	results := make([]sent, total)
	jobs := make(chan int, total)
	var wg sync.WaitGroup
	for c := 0; c < 32; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				resp, err := hc.Post(s.api+"/requests", "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("submit: %v", err)
					continue
				}
				var a struct{ ID string }
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				results[i] = sent{a.ID, t0, time.Since(t0)}
			}
		}()
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < total; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, r := range results {
		if r.id == "" {
			continue
		}
		submit = append(submit, ms(r.d))
		waitFor(t, 30*time.Second, "latency attempt", func() bool { _, ok := dest.arrival(r.id, 0); return ok })
		at, _ := dest.arrival(r.id, 0)
		first = append(first, ms(at.Sub(r.at)))
	}
	return submit, first
}

// benchRetries: n requests that fail once with backoffMs backoff,
// submitted one every `every`; the retry's arrival minus the exact
// nextRetryAt retryd scheduled (negative = early). A short backoff's
// nextRetryAt is visible for a moment only; a request whose retry came
// before the reader saw it gives no sample and counts in unseen. A request
// with no retry scheduled, or whose retry has not arrived, within `within`
// fails t.
func benchRetries(t testing.TB, s *stack, dest *sink, n, backoffMs int, every, within time.Duration) (late []float64, unseen int) {
	dest.reset(true, true)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := s.submit(t, fmt.Sprintf(`{"url":%q,"backoffMs":%d,"maxRetries":3}`, dest.URL+"/retry", backoffMs))
			var due time.Time
			deadline := time.Now().Add(within)
			for due.IsZero() && time.Now().Before(deadline) {
				if _, retried := dest.arrival(id, 1); retried {
					mu.Lock()
					unseen++
					mu.Unlock()
					return
				}
				doc := s.get(t, id)
				if next, _ := doc["nextRetryAt"].(string); doc["status"] == "retrying" && next != "" {
					due, _ = time.Parse(time.RFC3339Nano, next)
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if due.IsZero() {
				t.Errorf("request %s: no retry scheduled within %v", id, within)
				return
			}
			// Polled here rather than with waitFor, which may not stop the
			// test from this goroutine.
			for {
				if at, ok := dest.arrival(id, 1); ok {
					mu.Lock()
					late = append(late, ms(at.Sub(due)))
					mu.Unlock()
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("request %s: its retry, due %s, did not arrive within %v of its submission", id, due.Format(time.RFC3339Nano), within)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		time.Sleep(every)
	}
	wg.Wait()
	return late, unseen
}

// benchBullMQ runs the BullMQ peer on the same Redis and destination.
func benchBullMQ(t testing.TB, r *redistest.Server, dest *sink, n int, mode string) float64 {
	dir, _ := filepath.Abs("bullmq")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "bullmq")); err != nil {
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install for the BullMQ peer (needs node and the npm registry): %v\n%s", err, out)
		}
	}
	dest.reset(false, false)
	cmd := exec.Command("node", "bench.js", strconv.Itoa(r.Port), dest.URL+"/bullmq", strconv.Itoa(n), mode, "100")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("BullMQ %s: %v\n%s", mode, err, out)
	}
	var res struct{ JobsPerSec float64 }
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("BullMQ output %q: %v", out, err)
	}
	return res.JobsPerSec
}

func usedMemory(t testing.TB, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// commandStats is INFO commandstats: calls and usec per command.
func commandStats(t testing.TB, rdb *redis.Client) map[string][2]int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		var v [2]int64
		for _, kv := range strings.Split(rest, ",") {
			if x, ok := strings.CutPrefix(kv, "calls="); ok {
				v[0], _ = strconv.ParseInt(x, 10, 64)
			}
			if x, ok := strings.CutPrefix(kv, "usec="); ok {
				v[1], _ = strconv.ParseInt(x, 10, 64)
			}
		}
		out[name] = v
	}
	return out
}

// printCommandStats prints each command's calls and usec per request
// (BENCH_COMMANDSTATS=1), busiest first.
func printCommandStats(before, after map[string][2]int64, n int) {
	type row struct {
		name        string
		calls, usec float64
	}
	var rows []row
	for k, v := range after {
		d := row{k, float64(v[0]-before[k][0]) / float64(n), float64(v[1]-before[k][1]) / float64(n)}
		if d.calls > 0.001 {
			rows = append(rows, d)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].calls > rows[j].calls })
	for _, r := range rows {
		fmt.Printf("COMMANDSTATS %-28s %7.2f calls %8.2f usec per request\n", r.name, r.calls, r.usec)
	}
}

func commandCalls(t testing.TB, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		// cmdstat_get:calls=1,usec=...
		_, rest, _ := strings.Cut(line, ":")
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, _ := strconv.ParseFloat(f[0], 64)
			return kb / 1024
		}
	}
	return 0
}

// benchIdle is the CPU an idle worker uses (percent of one core, the mean
// over the stack's workers), measured over 5 s once the queue is empty.
func benchIdle(s *stack) float64 {
	time.Sleep(time.Second) // let the last attempts' bookkeeping settle
	before := map[int]float64{}
	for _, w := range s.workers {
		before[w.cmd.Process.Pid] = procCPU(w.cmd.Process.Pid)
	}
	const window = 5 * time.Second
	time.Sleep(window)
	var sum float64
	for pid, b := range before {
		sum += procCPU(pid) - b
	}
	return 100 * sum / float64(len(before)) / window.Seconds()
}

// procCPU is the CPU time (user+system, seconds) process pid used so far.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}

// stackSwitches counts the context switches (voluntary and not, over all
// threads) each process made so far.
func stackSwitches(s *stack) map[string]float64 {
	out := map[string]float64{}
	read := func(name string, pid int) {
		threads, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
		for _, path := range threads {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "voluntary_ctxt_switches") {
					n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					out[name] += n
				}
			}
		}
	}
	read("api", s.apiProc.cmd.Process.Pid)
	for _, w := range s.workers {
		read("workers", w.cmd.Process.Pid)
	}
	read("redis", s.redis.Pid())
	read("loadgen_and_destination", os.Getpid())
	return out
}

// stackCPU is the CPU time (user+system, seconds) each process used so far.
func stackCPU(s *stack) map[string]float64 {
	out := map[string]float64{}
	out["api"] = procCPU(s.apiProc.cmd.Process.Pid)
	for _, w := range s.workers {
		out["workers"] += procCPU(w.cmd.Process.Pid)
	}
	out["redis"] = procCPU(s.redis.Pid())
	out["loadgen_and_destination"] = procCPU(os.Getpid())
	return out
}
