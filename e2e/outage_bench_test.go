package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// The outage figures (`make bench-outage`): a destination that goes down
// with a backlog waiting on it, then comes back. While it is down its
// endpoint is open, and the stack should cost about what it costs idle;
// once it is back every request is delivered, in arrival order per key.

// outageKeys is how many flow-control keys (parallelism 1 each) the
// backlog is spread over, so that "in arrival order per key" means one
// attempt after the other.
const outageKeys = 10

// BenchmarkOutage prints the outage figures: BENCH_OUTAGE_N requests
// (default 10000) waiting through BENCH_OUTAGE seconds (default 60) of a
// destination answering 503, then the idle stack for as long.
func BenchmarkOutage(b *testing.B) {
	n, outage := envInt("BENCH_OUTAGE_N", 10000), time.Duration(envInt("BENCH_OUTAGE", 60))*time.Second
	for i := 0; i < b.N; i++ {
		res := runOutage(b, n, outage)
		keys := make([]string, 0, len(res))
		for k := range res {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("OUTAGE n=%d outage_s=%.0f %s %.2f\n", n, outage.Seconds(), k, res[k])
		}
	}
}

// TestOutageSmoke keeps the outage benchmark working: a small run that
// asserts what holds at any load (nothing lost, the waiters resume in
// their keys' order), and that each figure is produced.
func TestOutageSmoke(t *testing.T) {
	t.Parallel()
	res := runOutage(t, 100, 3*time.Second)
	for _, k := range []string{"attempts_during_outage", "redis_commands_per_s_outage", "redis_commands_per_s_idle",
		"cpu_ms_per_s_outage", "cpu_ms_per_s_idle", "drain_s", "lost", "out_of_order", "called_before_waiting"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no figure %s", k)
		}
	}
	if n := res["out_of_order"]; n != 0 {
		t.Errorf("%v waiters started ahead of a waiter of their key accepted before them", n)
	}
}

// outageDestination answers 503 while down, 200 otherwise, and keeps the
// order in which each request's calls came.
type outageDestination struct {
	*httptest.Server
	down      atomic.Bool
	attempts  atomic.Int64
	mu        sync.Mutex
	first     []string        // request ids in the order of their first call
	delivered map[string]bool // answered 200
}

func newOutageDestination(t testing.TB) *outageDestination {
	d := &outageDestination{delivered: map[string]bool{}}
	seen := map[string]bool{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.attempts.Add(1)
		id := r.Header.Get("Retryd-Request-Id")
		down := d.down.Load()
		d.mu.Lock()
		if !seen[id] {
			seen[id] = true
			d.first = append(d.first, id)
		}
		if !down {
			d.delivered[id] = true
		}
		d.mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

// runOutage: the destination goes down and its endpoint opens; n requests
// are submitted (outageKeys keys, each in its own order) and wait; outage
// is measured from when all of them wait; the destination comes back, and
// the time until every request is delivered is measured; then the same
// stack idle, for as long as the outage.
func runOutage(t testing.TB, n int, outage time.Duration) map[string]float64 {
	dest := newOutageDestination(t)
	r := redistest.StartServer(t, redistest.Options{})
	env := []string{"ALLOW_PRIVATE_TARGETS=true"}
	s := startStackFull(t, r, 2, append(env, "MAX_UNFINISHED_PER_KEY=1000000"), append(env, "GOMAXPROCS=1"))
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr})
	defer rdb.Close()

	// Down: a few failing requests open the endpoint (the breaker's
	// minimum attempts in its window, each failing at once).
	dest.down.Store(true)
	trip := fmt.Sprintf(`{"url":%q,"method":"POST","maxRetries":0}`, dest.URL+"/trip")
	for range 25 {
		s.submit(t, trip)
	}
	waitFor(t, time.Minute, "the endpoint opens", func() bool { return endpointWaiting(t, s) >= 0 })

	// The backlog: each key's requests submitted one after another, so
	// their order is the order they were accepted in.
	ids := make([][]string, outageKeys)
	var wg sync.WaitGroup
	hc := tunedClient()
	for k := range outageKeys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"url":%q,"method":"POST","maxRetries":25,"backoffMs":1000,"maxBackoffMs":60000,"flowControl":{"key":"outage-%d","parallelism":1}}`,
				dest.URL+"/backlog", k)
			for i := k; i < n; i += outageKeys {
				id, err := submitOne(hc, s.api, body)
				if err != nil {
					t.Error(err)
					return
				}
				ids[k] = append(ids[k], id)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, 10*time.Minute, "the backlog waits for the open endpoint", func() bool { return endpointWaiting(t, s) >= n-outageKeys })

	backlog := map[string]bool{}
	for _, k := range ids {
		for _, id := range k {
			backlog[id] = true
		}
	}
	attemptsOf := func() int64 { return dest.attempts.Load() }
	// Called already: admitted, in the second after the endpoint opened,
	// by a worker that had not read it yet. They are not its waiters.
	dest.mu.Lock()
	calledBefore := map[string]bool{}
	for _, id := range dest.first {
		if backlog[id] {
			calledBefore[id] = true
		}
	}
	dest.mu.Unlock()
	cmd0, cpu0, att0, start := commandCalls(t, rdb), stackCPU(s), attemptsOf(), time.Now()
	time.Sleep(outage) // measured: the outage
	el := time.Since(start)
	cmd1, cpu1, att1 := commandCalls(t, rdb), stackCPU(s), attemptsOf()

	dest.down.Store(false)
	back := time.Now()
	waitFor(t, 30*time.Minute, "every request of the backlog is delivered", func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		for id := range backlog {
			if !dest.delivered[id] {
				return false
			}
		}
		return true
	})
	drain := time.Since(back)

	// Idle: the same stack with nothing to do, once the records of the
	// drain are written.
	waitFor(t, time.Minute, "the endpoint closes", func() bool { return endpointWaiting(t, s) < 0 })
	time.Sleep(2 * time.Second) // measured: the last records written
	icmd0, icpu0, istart := commandCalls(t, rdb), stackCPU(s), time.Now()
	time.Sleep(outage) // measured: idle
	iel := time.Since(istart)
	icmd1, icpu1 := commandCalls(t, rdb), stackCPU(s)

	cpuMs := func(a, b map[string]float64, d time.Duration) float64 {
		return ((b["redis"] - a["redis"]) + (b["workers"] - a["workers"]) + (b["api"] - a["api"])) * 1000 / d.Seconds()
	}
	// In order per key: a key's requests' first calls came in the order
	// they were accepted.
	dest.mu.Lock()
	pos := make(map[string]int, len(dest.first))
	for i, id := range dest.first {
		pos[id] = i
	}
	lost := 0
	for id := range backlog {
		if !dest.delivered[id] {
			lost++
		}
	}
	dest.mu.Unlock()
	// A waiter started out of its key's order: its first call came before
	// that of a waiter of its key accepted before it.
	outOfOrder := 0
	for _, k := range ids {
		latest := -1 // the latest first call of the key's waiters accepted before
		for _, id := range k {
			if calledBefore[id] {
				continue
			}
			if pos[id] < latest {
				outOfOrder++
			}
			latest = max(latest, pos[id])
		}
	}
	if lost != 0 {
		t.Errorf("%d of %d requests lost", lost, n)
	}
	return map[string]float64{
		"attempts_during_outage":      float64(att1 - att0),
		"redis_commands_per_s_outage": float64(cmd1-cmd0) / el.Seconds(),
		"redis_commands_per_s_idle":   float64(icmd1-icmd0) / iel.Seconds(),
		"cpu_ms_per_s_outage":         cpuMs(cpu0, cpu1, el),
		"cpu_ms_per_s_idle":           cpuMs(icpu0, icpu1, iel),
		"drain_s":                     drain.Seconds(),
		"lost":                        float64(lost),
		"out_of_order":                float64(outOfOrder),
		"called_before_waiting":       float64(len(calledBefore)),
	}
}

// endpointWaiting is how many requests wait for an open or half-open
// endpoint of the stack's (the first such one), -1 when none is open.
func endpointWaiting(t testing.TB, s *stack) int {
	a := call(t, "GET", s.api+"/endpoints", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /endpoints: %d %s", a.status, a.raw)
	}
	list, _ := a.body["data"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		if m["state"] != "closed" {
			w, _ := m["waiting"].(float64)
			return int(w)
		}
	}
	return -1
}

// submitOne submits body and answers the new request's id.
func submitOne(hc *http.Client, api, body string) (string, error) {
	resp, err := hc.Post(api+"/requests", "application/json", strings.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("submit: %w", err)
	}
	defer resp.Body.Close()
	var a struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("submit answered %d (%v)", resp.StatusCode, err)
	}
	return a.ID, nil
}
