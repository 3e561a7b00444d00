package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
)

// Fairness between tenants (`make bench-tenants`), on workers that hold no
// API keys: one tenant floods three slow destinations (answers in 2 s)
// with BENCH_TENANT_FLOOD requests (default 3000); meanwhile another
// tenant sends BENCH_TENANT_PROBES requests (default 20) to a fast
// destination, one every 500 ms. The figure is how soon those start: their first
// attempts' p50, p99 and worst, with FLOW_TENANT_SHARE at its default and
// at 1 (fairness between tenants off, as before it existed).
func BenchmarkTenantFairness(b *testing.B) {
	flood, probes := envInt("BENCH_TENANT_FLOOD", 3000), envInt("BENCH_TENANT_PROBES", 20)
	for i := 0; i < b.N; i++ {
		for _, share := range []string{"0.5", "1"} {
			res := runTenantFairness(b, share, flood, probes)
			for _, k := range []string{"quiet_first_attempt_p50_ms", "quiet_first_attempt_p99_ms", "quiet_first_attempt_max_ms",
				"flooder_slots_max_share"} {
				fmt.Printf("TENANTS FLOW_TENANT_SHARE=%s flood=%d %s %.1f\n", share, flood, k, res[k])
			}
		}
	}
}

// TestTenantFairnessSmoke keeps the benchmark working: a tiny run, every
// figure produced, and the quiet tenant's requests all started, within a
// second, on workers that hold no API keys.
func TestTenantFairnessSmoke(t *testing.T) {
	t.Parallel()
	res := runTenantFairness(t, "0.5", 60, 3)
	for _, k := range []string{"quiet_first_attempt_p50_ms", "quiet_first_attempt_p99_ms", "quiet_first_attempt_max_ms", "flooder_slots_max_share"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no figure %s", k)
		}
	}
	if worst := res["quiet_first_attempt_max_ms"]; worst > 1000 {
		t.Errorf("the quiet tenant's first attempts started after %.0f ms at worst, want within 1 s", worst)
	}
}

func runTenantFairness(t testing.TB, share string, flood, probes int) map[string]float64 {
	const kf, kq = "flooder-key", "quiet-key"
	var busy inFlight
	slow := func() string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer busy.enter()()
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	slows := []string{slow(), slow(), slow()}
	probe := newSink(t)
	probe.reset(true, false)

	env := []string{"ALLOW_PRIVATE_TARGETS=true", "API_KEYS=flooder:" + kf + ",quiet:" + kq, "MAX_UNFINISHED_PER_KEY=1000000"}
	// The workers hold no API keys: the tenant is stamped on each request.
	workerEnv := []string{"ALLOW_PRIVATE_TARGETS=true", "GOMAXPROCS=1", "FLOW_TENANT_SHARE=" + share}
	s := startStackFull(t, redistest.StartServer(t, redistest.Options{}), 2, env, workerEnv)
	hc := tunedClient()
	post := func(key, body string) (string, error) {
		req, _ := http.NewRequest("POST", s.api+"/requests", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return "", fmt.Errorf("submit: %d", resp.StatusCode)
		}
		var out struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&out)
		return out.ID, err
	}
	// The quiet tenant has used retryd before the flood, as tenants do.
	warm, err := post(kq, fmt.Sprintf(`{"url":%q,"method":"POST"}`, probe.URL+"/quiet"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the quiet tenant's first request", func() bool { _, ok := probe.arrival(warm, 0); return ok })
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(flood); i = next.Add(1) {
				body := fmt.Sprintf(`{"url":%q,"method":"POST","timeoutMs":30000}`, slows[i%3]+"/flood")
				if _, err := post(kf, body); err != nil {
					t.Errorf("flood: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, time.Minute, "the flood to fill the slots it may", func() bool { return busy.now.Load() >= 15 })
	var lat []float64
	for i := 0; i < probes; i++ {
		time.Sleep(500 * time.Millisecond)
		at := time.Now()
		id, err := post(kq, fmt.Sprintf(`{"url":%q,"method":"POST"}`, probe.URL+"/quiet"))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			if hit, ok := probe.arrival(id, 0); ok {
				lat = append(lat, float64(hit.Sub(at).Microseconds())/1000)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the quiet tenant's request %s did not start within 3 minutes", id)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	if os.Getenv("BENCH_TENANT_VERBOSE") == "1" {
		fmt.Printf("TENANTS share=%s quiet first attempts (ms): %v\n", share, lat)
	}
	return map[string]float64{
		"quiet_first_attempt_p50_ms": pct(0.5),
		"quiet_first_attempt_p99_ms": pct(0.99),
		"quiet_first_attempt_max_ms": lat[len(lat)-1],
		"flooder_slots_max_share":    float64(busy.peak.Load()) / backlogSlots,
	}
}
