//go:build linux

package timerslack

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary a program that calls Ensure with the
// slack it names, then prints the slack of each of its threads.
const helperEnv = "TIMERSLACK_TEST_HELPER"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(helperEnv); ok {
		ns, _ := strconv.ParseInt(v, 10, 64)
		if err := Ensure(time.Duration(ns)); err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		_, marked := os.LookupEnv(marker)
		fmt.Println("marker:", marked)
		slacks, err := Threads(os.Getpid())
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		for _, d := range slacks {
			fmt.Println("thread:", d.Nanoseconds())
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper runs the test binary as a program that ensures slack d, and
// returns its threads' slacks and whether the marker was left behind.
func helper(t *testing.T, d time.Duration) (slacks []string, marked bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+strconv.FormatInt(d.Nanoseconds(), 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.HasPrefix(line, "thread: "):
			slacks = append(slacks, strings.TrimPrefix(line, "thread: "))
		case line == "marker: true":
			marked = true
		}
	}
	return slacks, marked
}

func TestEnsureGivesEveryThreadTheSlack(t *testing.T) {
	t.Parallel()
	const d = 1500 * time.Microsecond
	slacks, marked := helper(t, d)
	if len(slacks) < 2 {
		t.Fatalf("the helper reported %d threads, want the runtime's several: %v", len(slacks), slacks)
	}
	for i, s := range slacks {
		if s != strconv.FormatInt(d.Nanoseconds(), 10) {
			t.Errorf("thread %d has slack %s ns, want %d (sysmon among them: started before any Go code)", i, s, d.Nanoseconds())
		}
	}
	if marked {
		t.Error("the marker of the second execution is left in the program's environment")
	}
}

func TestEnsureZeroKeepsTheSystemSlack(t *testing.T) {
	t.Parallel()
	before, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := Ensure(0); err != nil {
		t.Fatalf("Ensure(0) = %v, want nil and nothing done", err)
	}
	if after, _ := Current(); after != before {
		t.Errorf("Ensure(0) changed the slack from %v to %v", before, after)
	}
	slacks, _ := helper(t, 0)
	for i, s := range slacks {
		if s != strconv.FormatInt(before.Nanoseconds(), 10) {
			t.Errorf("thread %d has slack %s ns with Ensure(0), want the system's %d", i, s, before.Nanoseconds())
		}
	}
}
