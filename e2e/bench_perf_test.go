package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// perfRecord samples the call stacks of the stack's processes with `perf
// record` while run (2) goes on, when BENCH_PERF names a directory: one
// perf.data file per process group (api, workers, redis, loadgen). `make
// profile` reads them with `perf report`. It returns the function that ends
// the recording; a nop when BENCH_PERF is unset.
func perfRecord(t testing.TB, s *stack) (stop func()) {
	dir := os.Getenv("BENCH_PERF")
	if dir == "" {
		return func() {}
	}
	if _, err := exec.LookPath("perf"); err != nil {
		t.Fatalf("BENCH_PERF needs perf: apt-get install -y linux-perf")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	groups := map[string][]int{"api": {s.apiProc.cmd.Process.Pid}, "redis": {s.redis.Pid()}, "loadgen": {os.Getpid()}}
	for _, w := range s.workers {
		groups["workers"] = append(groups["workers"], w.cmd.Process.Pid)
	}
	var cmds []*exec.Cmd
	for name, pids := range groups {
		ps := make([]string, len(pids))
		for i, p := range pids {
			ps[i] = strconv.Itoa(p)
		}
		// cpu-clock: hardware counters are not there on every VM.
		cmd := exec.Command("perf", "record", "-e", "cpu-clock", "-F", "1999", "-g", "-q",
			"-o", filepath.Join(dir, name+".data"), "-p", strings.Join(ps, ","))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("perf record: %v", err)
		}
		cmds = append(cmds, cmd)
	}
	// perf attaches asynchronously; samples before it does are lost, not wrong.
	time.Sleep(200 * time.Millisecond)
	return func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGINT)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
		// The programs are built into a temporary directory that goes
		// with the test; perf report finds them again by build id.
		for _, b := range []string{bin.api, bin.worker} {
			if out, err := exec.Command("perf", "buildid-cache", "-a", b).CombinedOutput(); err != nil {
				t.Logf("perf buildid-cache %s: %v %s", b, err, out)
			}
		}
		fmt.Printf("PERF recorded in %s: %s\n", dir, "api.data workers.data redis.data loadgen.data")
	}
}
