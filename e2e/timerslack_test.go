package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/timerslack"
)

// The programs run every thread, the Go runtime's own included, with
// TIMER_SLACK (default 1ms); TIMER_SLACK=0 keeps the system's.
func TestProgramsRunWithTheirTimerSlack(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	plain := s.startWorker(t, "TIMER_SLACK=0")
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
				t.Errorf("%s thread %d: timer slack %v, want %v (TIMER_SLACK's default 1ms; the system's with TIMER_SLACK=0)", p.name, i, slack, want)
			}
		}
	}
}
