package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
)

// Retry lateness under load (`make bench-lateness`): retryd promises that
// a retry is never early, and that it is late by little even while the
// same workers carry a flood to a slow destination. Two phases on one
// stack (one API, two workers at GOMAXPROCS=1 and 20 slots each, as the
// backlog benchmark runs them):
//   - idle: probe requests whose first attempt gets a 500, backoffMs 1000,
//     submitted at a steady rate; the retry's arrival minus the
//     nextRetryAt retryd recorded;
//   - flood: the same, once a flood to a destination answering in 2 s
//     (the backlog benchmark's `slow` scenario) holds every slot fairness
//     gives it.

// latenessConfig sizes one run.
type latenessConfig struct {
	probes int           // probe requests per phase
	every  time.Duration // between two probes' submissions
	flood  int           // requests to the slow destination
	within time.Duration // how long a probe's retry may take to arrive
}

// latenessPhase is one phase's figures.
type latenessPhase struct {
	name          string
	late          []float64 // ms; negative = early
	unseen        int       // retries that came before nextRetryAt was read
	flood         int       // requests of the flood, 0 when idle
	floodSlotsMax int64     // most flood calls under way at once
}

func (p latenessPhase) early() int {
	n := 0
	for _, l := range p.late {
		if l < 0 {
			n++
		}
	}
	return n
}

// line is the phase's LATENESS line.
func (p latenessPhase) line() string {
	s := fmt.Sprintf("LATENESS phase=%s n=%d early=%d unseen=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f",
		p.name, len(p.late), p.early(), p.unseen, pct(p.late, 50), pct(p.late, 99), pct(p.late, 100))
	if p.flood > 0 {
		s += fmt.Sprintf(" flood=%d flood_slots_max=%d", p.flood, p.floodSlotsMax)
	}
	return s
}

// BenchmarkLateness prints a LATENESS line per phase and reports the
// figures as metrics. Size it with BENCH_LATENESS_N (probes per phase,
// default 200), BENCH_LATENESS_RATE (probes submitted per second, default
// 20) and BENCH_LATENESS_FLOOD (default 3000); BENCH_WORKER_ENV adds to
// the workers' environment. It asserts nothing about time; it fails if a
// probe's retry does not arrive within a minute.
func BenchmarkLateness(b *testing.B) {
	cfg := latenessConfig{
		probes: envInt("BENCH_LATENESS_N", 200),
		every:  time.Second / time.Duration(envInt("BENCH_LATENESS_RATE", 20)),
		flood:  envInt("BENCH_LATENESS_FLOOD", 3000),
		within: time.Minute,
	}
	for i := 0; i < b.N; i++ {
		for _, p := range runLateness(b, cfg) {
			fmt.Println(p.line())
			b.ReportMetric(float64(len(p.late)), p.name+"_n")
			b.ReportMetric(float64(p.early()), p.name+"_early")
			b.ReportMetric(pct(p.late, 50), p.name+"_late_p50_ms")
			b.ReportMetric(pct(p.late, 99), p.name+"_late_p99_ms")
			b.ReportMetric(pct(p.late, 100), p.name+"_late_max_ms")
			if p.flood > 0 {
				b.ReportMetric(float64(p.floodSlotsMax), p.name+"_slots_max")
			}
		}
	}
}

// TestLatenessSmoke keeps the benchmark working: a tiny run, every probe's
// retry measured in both phases. It asserts no timing.
func TestLatenessSmoke(t *testing.T) {
	t.Parallel()
	cfg := latenessConfig{probes: 5, every: 50 * time.Millisecond, flood: 100, within: time.Minute}
	for _, p := range runLateness(t, cfg) {
		if len(p.late)+p.unseen != cfg.probes {
			t.Errorf("phase %s: %d retries measured and %d unseen, want %d in all", p.name, len(p.late), p.unseen, cfg.probes)
		}
	}
}

// runLateness runs the idle phase, then the flood phase, on one stack.
func runLateness(t testing.TB, cfg latenessConfig) []latenessPhase {
	i := slices.IndexFunc(backlogScenarios, func(sc backlogScenario) bool { return sc.name == "slow" })
	slow := backlogScenarios[i]
	var busy inFlight
	slowDest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer busy.enter()()
		slow.handler(w, r)
	}))
	t.Cleanup(slowDest.Close)
	probes := newSink(t)

	workerEnv := append([]string{"ALLOW_PRIVATE_TARGETS=true", "GOMAXPROCS=1"}, strings.Fields(os.Getenv("BENCH_WORKER_ENV"))...)
	s := startStackFull(t, redistest.StartServer(t, redistest.Options{}), 2,
		[]string{"ALLOW_PRIVATE_TARGETS=true", "MAX_UNFINISHED_PER_KEY=1000000"}, workerEnv)

	idle := latenessPhase{name: "idle"}
	idle.late, idle.unseen = benchRetries(t, s, probes, cfg.probes, 1000, cfg.every, cfg.within)

	submitAll(t, tunedClient(), s.api, slow.body(slowDest.URL+"/flood"), cfg.flood, 16)
	// The flood holds as many slots as fairness gives it once the most
	// calls under way at once stops growing for longer than a call takes.
	waitFor(t, time.Minute, "the flood's first call", func() bool { return busy.now.Load() > 0 })
	for deadline := time.Now().Add(2 * time.Minute); ; {
		peak := busy.peak.Load()
		time.Sleep(3 * time.Second)
		if busy.peak.Load() == peak {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood's calls under way still grow after 2 minutes (%d)", busy.peak.Load())
		}
	}
	flood := latenessPhase{name: "flood", flood: cfg.flood}
	flood.late, flood.unseen = benchRetries(t, s, probes, cfg.probes, 1000, cfg.every, cfg.within)
	flood.floodSlotsMax = busy.peak.Load()
	return []latenessPhase{idle, flood}
}
