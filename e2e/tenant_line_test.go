package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fairness between tenants inside one destination's line, on workers that
// hold no API keys (the tenant is stamped on each request): while one
// tenant floods a slow host:port, another tenant's requests to the same
// host:port start within a second. Before, the line was first-come across
// tenants and they waited behind the whole flood.
func TestTenantStartsSoonAtADestinationAnotherTenantFloods(t *testing.T) {
	t.Parallel()
	lat, floodMax := runTenantLine(t, 2*time.Second, 600, 10, false)
	if worst := lat[len(lat)-1]; worst > time.Second {
		t.Errorf("the quiet tenant's first attempts started after %v at worst (all: %v), want within 1s", worst, lat)
	}
	// Two workers of 20 slots: the destination's share is 10 on each, a
	// tenant's share of that 5.
	if floodMax > 10 {
		t.Errorf("the flood held %d of the destination's slots at once, want at most its share, 2 x 5", floodMax)
	}
}

// The same for a tenant whose first request ever comes while another
// floods the destination: no worker has seen it yet, and it starts within
// a second and a half all the same.
func TestFreshTenantStartsSoonAtADestinationAnotherTenantFloods(t *testing.T) {
	t.Parallel()
	lat, _ := runTenantLine(t, 5*time.Second, 600, 5, true)
	if worst := lat[len(lat)-1]; worst > 1500*time.Millisecond {
		t.Errorf("the fresh tenant's first attempts started after %v at worst (all: %v), want within 1.5 s", worst, lat)
	}
}

// BenchmarkTenantLine measures the same with BENCH_TENANT_LINE_DELAY_MS
// (how long the destination takes to answer, default 2000),
// BENCH_TENANT_LINE_FLOOD (600) and
// BENCH_TENANT_LINE_PROBES (20): the quiet tenant's first attempts' p50,
// p99 and worst.
func BenchmarkTenantLine(b *testing.B) {
	delay := time.Duration(envInt("BENCH_TENANT_LINE_DELAY_MS", 2000)) * time.Millisecond
	flood, probes := envInt("BENCH_TENANT_LINE_FLOOD", 600), envInt("BENCH_TENANT_LINE_PROBES", 20)
	for i := 0; i < b.N; i++ {
		lat, _ := runTenantLine(b, delay, flood, probes, false)
		pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		fmt.Printf("TENANT LINE delay=%v flood=%d quiet_first_attempt_p50_ms %.1f p99_ms %.1f max_ms %.1f\n", delay, flood,
			ms(pct(0.5)), ms(pct(0.99)), ms(lat[len(lat)-1]))
	}
}

// runTenantLine runs two workers with no API keys; tenant "flooder" sends
// flood requests to one destination that answers in delay, and once they
// fill its slots, tenant "quiet" sends probes to the same host:port, one
// every 200 ms. It returns how soon after it was sent each probe's first
// attempt reached the destination, sorted, and the most flood requests
// the destination had in hand at once. A fresh quiet tenant sends
// nothing before the flood: its first probe is its first request ever.
func runTenantLine(t testing.TB, delay time.Duration, flood, probes int, fresh bool) ([]time.Duration, int64) {
	const kf, kq = "flooder-key", "quiet-key"
	var busy inFlight
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	dest := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quiet" {
			mu.Lock()
			if _, ok := arrived[r.Header.Get("Retryd-Request-Id")]; !ok {
				arrived[r.Header.Get("Retryd-Request-Id")] = time.Now()
			}
			mu.Unlock()
			return
		}
		defer busy.enter()()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
	})
	apiEnv := []string{"ALLOW_PRIVATE_TARGETS=true", "API_KEYS=flooder:" + kf + ",quiet:" + kq, "MAX_UNFINISHED_PER_KEY=1000000"}
	s := startStackWith(t, 0, apiEnv, []string{"ALLOW_PRIVATE_TARGETS=true"}) // the workers' API_KEYS stay empty
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
	started := func(id string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := arrived[id]
		return at, ok
	}
	// The quiet tenant has used retryd before the flood, as tenants do, and
	// the workers start since: they know it is about from Redis. Unless
	// it is fresh.
	if !fresh {
		first, err := post(kq, fmt.Sprintf(`{"url":%q}`, dest+"/quiet"))
		if err != nil {
			t.Fatal(err)
		}
		s.startWorker(t)
		s.startWorker(t)
		waitFor(t, 20*time.Second, "the quiet tenant's first request", func() bool { _, ok := started(first); return ok })
	} else {
		s.startWorker(t)
		s.startWorker(t)
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(flood); i = next.Add(1) {
				if _, err := post(kf, fmt.Sprintf(`{"url":%q,"method":"POST","timeoutMs":30000}`, dest+"/flood")); err != nil {
					t.Errorf("flood: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Two workers of 20 slots: the destination's share is 10 on each, the
	// flooding tenant's share of that 5.
	waitFor(t, time.Minute, "the flood to fill its share of the destination", func() bool { return busy.now.Load() >= 8 })

	// The probes go at their pace whether or not the ones before have
	// started: each measures the line as the flood keeps it.
	sent := map[string]time.Time{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < probes; i++ {
		<-tick.C
		at := time.Now()
		id, err := post(kq, fmt.Sprintf(`{"url":%q}`, dest+"/quiet"))
		if err != nil {
			t.Fatal(err)
		}
		sent[id] = at
	}
	lat := make([]time.Duration, 0, probes)
	waitFor(t, 3*time.Minute, "the quiet tenant's requests to start", func() bool {
		lat = lat[:0]
		for id, at := range sent {
			hit, ok := started(id)
			if !ok {
				return false
			}
			lat = append(lat, hit.Sub(at))
		}
		return true
	})
	slices.Sort(lat)
	if os.Getenv("BENCH_TENANT_VERBOSE") == "1" {
		fmt.Printf("TENANT LINE delay=%v quiet first attempts: %v\n", delay, lat)
	}
	return lat, busy.peak.Load()
}
