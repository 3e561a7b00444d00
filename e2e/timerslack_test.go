package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// threadSlacks is the timer slack (ns, as /proc prints it) of each thread
// of process pid.
func threadSlacks(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var out []string
	for _, task := range tasks {
		// Only a thread group leader lists the file; /proc/<tid> serves
		// any thread's.
		b, err := os.ReadFile(filepath.Join("/proc", filepath.Base(task), "timerslack_ns"))
		if err != nil {
			t.Fatalf("timer slack of thread %s of %d: %v", filepath.Base(task), pid, err)
		}
		out = append(out, strings.TrimSpace(string(b)))
	}
	return out
}

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
	for name, pid := range map[string]int{"api": s.apiProc.cmd.Process.Pid, "worker": s.workers[0].cmd.Process.Pid} {
		for i, slack := range threadSlacks(t, pid) {
			if slack != "1000000" {
				t.Errorf("%s thread %d: timer slack %s ns, want 1000000 (TIMER_SLACK's default)", name, i, slack)
			}
		}
	}
	system, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	for i, slack := range threadSlacks(t, plain.cmd.Process.Pid) {
		if slack != strings.TrimSpace(string(system)) {
			t.Errorf("TIMER_SLACK=0 worker thread %d: timer slack %s ns, want the system's %s", i, slack, system)
		}
	}
}
