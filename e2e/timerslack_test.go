package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/timerslack"
)

// With TIMER_SLACK the programs run every thread, the Go runtime's own
// included, with that slack; unset (or 0) they keep the system's.
func TestProgramsRunWithTheirTimerSlack(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1, "TIMER_SLACK=1ms")
	plain := s.startWorker(t, "TIMER_SLACK=")
	for _, w := range s.workers {
		waitFor(t, 20*time.Second, w.name+" running", func() bool {
			b, _ := os.ReadFile(w.log)
			return strings.Contains(string(b), "retryd worker running")
		})
	}
	system, err := timerslack.Current()
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[*proc]time.Duration{s.apiProc: time.Millisecond, s.workers[0]: time.Millisecond, plain: system} {
		slacks, err := timerslack.Threads(p.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		for i, slack := range slacks {
			if slack != want {
				t.Errorf("%s thread %d: timer slack %v, want %v (TIMER_SLACK=1ms; the system's with TIMER_SLACK unset)", p.name, i, slack, want)
			}
		}
	}
}
