package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// What one tenant can do to another, and what an outage leaves behind
// (`make bench-hardening`), on one real stack (Redis, the API, one worker)
// with tenants team-a and team-b:
//   - flood (run last): team-a sends BENCH_HARDENING_FLOOD requests (default 1200) at
//     120 a second to a host:port that answers 7 in 10 of them 503;
//     meanwhile team-b sends 10 healthy requests to the same host:port.
//     The figure is team-b's worst submit-to-completed time.
//   - events: team-a's BENCH_HARDENING_SEED requests (default 32000),
//     then GET /v2/events?label=nomatch: its time and the API's CPU.
//   - resends: five bulk resends of team-a's completed requests (limit
//     1000, following the cursor) under RATE_LIMIT_RPS=200: requests made.
//   - opens: 200 opens by team-a of endpoints with 600 KB hosts: how many
//     were refused; the worker's RSS and team-b's delivery after them.
//   - pause (run first, on the fresh stack): team-a's destination key
//     paused BENCH_HARDENING_PAUSE seconds (default 30) with 50 requests
//     held, then resumed: the lateness samples the workers observed.
func BenchmarkHardening(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res := runHardening(b, envInt("BENCH_HARDENING_SEED", 32000), envInt("BENCH_HARDENING_FLOOD", 1200),
			time.Duration(envInt("BENCH_HARDENING_PAUSE", 30))*time.Second)
		for _, k := range hardeningFigures {
			fmt.Printf("HARDENING %s %.2f\n", k, res[k])
		}
	}
}

var hardeningFigures = []string{"flood_other_tenant_first_attempt_max_ms", "events_nomatch_ms", "events_nomatch_api_cpu_s",
	"resends_made_of_5000", "opens_refused_of_200", "opens_worker_rss_growth_mb", "opens_other_tenant_delivery_max_ms",
	"pause_lateness_samples"}

// TestHardeningSmoke keeps the benchmark working: a small run, every
// figure produced, and the figures that count rather than time as they
// must be.
func TestHardeningSmoke(t *testing.T) {
	t.Parallel()
	res := runHardening(t, 200, 120, time.Second)
	for _, k := range hardeningFigures {
		if _, ok := res[k]; !ok {
			t.Errorf("no figure %s", k)
		}
	}
	if res["opens_refused_of_200"] != 200 || res["pause_lateness_samples"] != 0 {
		t.Errorf("opens refused %.0f of 200, lateness samples after a pause %.0f; want 200 and 0", res["opens_refused_of_200"], res["pause_lateness_samples"])
	}
}

func runHardening(t testing.TB, seed, flood int, pause time.Duration) map[string]float64 {
	res := map[string]float64{}
	var n503 atomic.Int64
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/flood" && n503.Add(1)%10 < 7 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(dest.Close)
	env := []string{"ALLOW_PRIVATE_TARGETS=true", "API_KEYS=team-a:ka,team-b:kb", "ADMIN_KEYS=adm", "MAX_UNFINISHED_PER_KEY=1000000", "LOG_LEVEL=warn"}
	s := startStackWith(t, 1, env, env)
	hc := tunedClient()
	do := func(method, path, key, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, s.api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &doc)
		return resp.StatusCode, doc
	}
	submit := func(key, path, extra string) string {
		code, doc := do("POST", "/requests", key, `{"url":"`+dest.URL+path+`","method":"POST","body":"x"`+extra+`}`)
		if code != http.StatusAccepted {
			t.Fatalf("submit: %d %v", code, doc)
		}
		return doc["id"].(string)
	}
	completedIn := func(key, id string, start time.Time) float64 {
		waitFor(t, 5*time.Minute, id+" completed", func() bool {
			_, doc := do("GET", "/requests/"+id, key, "")
			return doc["status"] == "completed"
		})
		return float64(time.Since(start).Microseconds()) / 1000
	}
	drained := func(key string) {
		waitFor(t, 10*time.Minute, key+"'s requests finished", func() bool {
			_, doc := do("GET", "/requests?status=pending,retrying&limit=1", key, "")
			d, _ := doc["data"].([]any)
			return len(d) == 0
		})
	}

	// pause, first: on a fresh stack every attempt counted is one of the
	// paused requests, and its lateness samples are read once the
	// cluster-wide counters show all of their attempts.
	hostPort := strings.TrimPrefix(dest.URL, "http://")
	if code, doc := do("POST", "/flows/"+hostPort+"/pause", "ka", ""); code != 200 {
		t.Fatalf("pause: %d %v", code, doc)
	}
	for range 50 {
		submit("ka", "/paused", "")
	}
	time.Sleep(pause) // the pause being measured, not a synchronisation
	if code, doc := do("POST", "/flows/"+hostPort+"/resume", "ka", ""); code != 200 {
		t.Fatalf("resume: %d %v", code, doc)
	}
	drained("ka")
	waitFor(t, time.Minute, "the paused requests' attempts counted", func() bool { return metricSum(t, s.api, "retryd_attempts_total") >= 50 })
	res["pause_lateness_samples"] = metricSum(t, s.api, "retryd_attempt_lateness_seconds_count")

	// events
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(seed) {
				submit("ka", "/seed", "")
			}
		}()
	}
	wg.Wait()
	drained("ka")
	cpu0, start := procCPU(s.apiProc.cmd.Process.Pid), time.Now()
	if code, doc := do("GET", "/v2/events?label=nomatch", "ka", ""); code != 200 {
		t.Fatalf("/v2/events: %d %v", code, doc)
	}
	res["events_nomatch_ms"] = float64(time.Since(start).Microseconds()) / 1000
	res["events_nomatch_api_cpu_s"] = procCPU(s.apiProc.cmd.Process.Pid) - cpu0

	// resends
	s.env = append(s.env, "RATE_LIMIT_RPS=200")
	s.restartAPI(t)
	cursor := ""
	for range 5 {
		body := `{"status":"completed","limit":1000`
		if cursor != "" {
			body += `,"cursor":"` + cursor + `"`
		}
		_, doc := do("POST", "/requests/resend", "ka", body+"}")
		made, _ := doc["resent"].([]any)
		res["resends_made_of_5000"] += float64(len(made))
		if c, ok := doc["nextCursor"].(string); ok {
			cursor = c
		}
	}
	drained("ka")

	// opens
	rss0 := rssMiB(s.workers[0].cmd.Process.Pid)
	host := strings.Repeat("a", 600_000)
	for i := range 200 {
		if code, _ := do("POST", "/endpoints/http:"+host+strconv.Itoa(i)+":80/open", "ka", ""); code == http.StatusBadRequest {
			res["opens_refused_of_200"]++
		}
	}
	for range 5 {
		start := time.Now()
		res["opens_other_tenant_delivery_max_ms"] = max(res["opens_other_tenant_delivery_max_ms"], completedIn("kb", submit("kb", "/healthy", ""), start))
	}
	res["opens_worker_rss_growth_mb"] = rssMiB(s.workers[0].cmd.Process.Pid) - rss0

	// flood, last: team-a's requests are left to drain at the rate its
	// cut allows.
	tick := time.NewTicker(time.Second / 120)
	for i := 0; i < flood; i++ {
		<-tick.C
		wg.Add(1)
		go func() { defer wg.Done(); submit("ka", "/flood", `,"maxRetries":3,"backoffMs":1000`) }()
		if i == flood/2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mu sync.Mutex
				var inner sync.WaitGroup
				for range 10 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						start := time.Now()
						ms := completedIn("kb", submit("kb", "/healthy", ""), start)
						mu.Lock()
						res["flood_other_tenant_first_attempt_max_ms"] = max(res["flood_other_tenant_first_attempt_max_ms"], ms)
						mu.Unlock()
					}()
					time.Sleep(100 * time.Millisecond)
				}
				inner.Wait()
			}()
		}
	}
	tick.Stop()
	wg.Wait()

	return res
}

// metricSum is the sum of the samples of series name on the API's
// /metrics.
func metricSum(t testing.TB, api, name string) float64 {
	a := call(t, "GET", api+"/metrics", "", "Authorization", "Bearer adm")
	sum := 0.0
	for _, l := range strings.Split(a.raw, "\n") {
		if rest, ok := strings.CutPrefix(l, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
			if len(f) > 0 {
				n, _ := strconv.ParseFloat(f[0], 64)
				sum += n
			}
		}
	}
	return sum
}
