package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkTiming measures retryd's timing contract on real processes (one
// API, two workers, a local destination), from the outside:
//   - submit answer latency (client side),
//   - submit → first attempt at the destination,
//   - delayed first attempt (delayMs 1500): arrival − due,
//   - retry punctuality (backoffMs 1000, failing once): arrival − nextRetryAt,
//     and how many arrived early.
//
// It prints RESULT lines and reports the figures as benchmark metrics. It
// asserts nothing about time: figures go in docs and notes, not in tests.
func BenchmarkTiming(b *testing.B) {
	const n = 200
	s := startStack(b, 2)

	var mu sync.Mutex
	arrivals := map[string][]time.Time{}
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		id := r.Header.Get("Retryd-Request-Id")
		mu.Lock()
		arrivals[id] = append(arrivals[id], now)
		first := len(arrivals[id]) == 1
		mu.Unlock()
		if r.URL.Path == "/fail-once" && first {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	}))
	defer dest.Close()
	arrival := func(id string, k int) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(arrivals[id]) <= k {
			return time.Time{}, false
		}
		return arrivals[id][k], true
	}

	for i := 0; i < b.N; i++ {
		// Immediate submissions, one at a time on an otherwise idle system.
		var submitLat, firstLat []float64
		for j := 0; j < n; j++ {
			t0 := time.Now()
			id := s.submit(b, fmt.Sprintf(`{"url":%q}`, dest.URL+"/ok"))
			submitLat = append(submitLat, ms(time.Since(t0)))
			waitFor(b, 10*time.Second, "first attempt", func() bool { _, ok := arrival(id, 0); return ok })
			at, _ := arrival(id, 0)
			firstLat = append(firstLat, ms(at.Sub(t0)))
			time.Sleep(5 * time.Millisecond)
		}

		// Delayed first attempts, submitted in a burst.
		type delayed struct {
			id  string
			due time.Time
		}
		var ds []delayed
		for j := 0; j < n/4; j++ {
			t0 := time.Now()
			id := s.submit(b, fmt.Sprintf(`{"url":%q,"delayMs":1500}`, dest.URL+"/ok"))
			ds = append(ds, delayed{id, t0.Add(1500 * time.Millisecond)})
			time.Sleep(20 * time.Millisecond)
		}
		var delayedLate []float64
		delayedEarly := 0
		for _, d := range ds {
			waitFor(b, 10*time.Second, "delayed attempt", func() bool { _, ok := arrival(d.id, 0); return ok })
			at, _ := arrival(d.id, 0)
			// t0 was taken before the POST, so the true due time is a bit
			// later than d.due: "early" here is conservative.
			late := ms(at.Sub(d.due))
			delayedLate = append(delayedLate, late)
			if late < 0 {
				delayedEarly++
			}
		}

		// Retries: each request fails once, then its 1 s (±20 %) retry is
		// compared with the exact nextRetryAt retryd recorded.
		var retryLate []float64
		early := 0
		for j := 0; j < n/4; j++ {
			id := s.submit(b, fmt.Sprintf(`{"url":%q,"backoffMs":1000,"maxRetries":3}`, dest.URL+"/fail-once"))
			var due time.Time
			waitFor(b, 10*time.Second, "retrying with nextRetryAt", func() bool {
				doc := s.get(b, id)
				next, _ := doc["nextRetryAt"].(string)
				if doc["status"] != "retrying" || next == "" {
					return false
				}
				due, _ = time.Parse(time.RFC3339Nano, next)
				return true
			})
			waitFor(b, 10*time.Second, "retry", func() bool { _, ok := arrival(id, 1); return ok })
			at, _ := arrival(id, 1)
			// nextRetryAt is truncated to the millisecond, so the true due
			// time is at or after it: arriving before it is truly early.
			late := ms(at.Sub(due))
			retryLate = append(retryLate, late)
			if late < 0 {
				early++
			}
		}

		report(b, "submit_answer_p50", pct(submitLat, 50), "ms")
		report(b, "submit_answer_p99", pct(submitLat, 99), "ms")
		report(b, "submit_to_first_attempt_p50", pct(firstLat, 50), "ms")
		report(b, "submit_to_first_attempt_p99", pct(firstLat, 99), "ms")
		report(b, "delayed_first_attempt_late_p50", pct(delayedLate, 50), "ms")
		report(b, "delayed_first_attempt_late_p99", pct(delayedLate, 99), "ms")
		report(b, "delayed_first_attempt_early", float64(delayedEarly), "count")
		report(b, "retry_late_p50", pct(retryLate, 50), "ms")
		report(b, "retry_late_p99", pct(retryLate, 99), "ms")
		report(b, "retry_late_max", pct(retryLate, 100), "ms")
		report(b, "retry_early", float64(early), "count")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

func report(b *testing.B, name string, v float64, unit string) {
	fmt.Printf("RESULT %s %.2f %s\n", name, v, unit)
	b.ReportMetric(v, name+"_"+unit)
}
