package timerslack

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Current is the calling thread's timer slack.
func Current() (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return current()
}

// Threads is the timer slack of each thread of process pid.
func Threads(pid int) ([]time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		return nil, fmt.Errorf("timer slack: threads of %d: none listed (%v)", pid, err)
	}
	out := make([]time.Duration, 0, len(tasks))
	for _, task := range tasks {
		// Only a thread group leader lists the file; /proc/<tid> serves
		// any thread's.
		b, err := os.ReadFile(filepath.Join("/proc", filepath.Base(task), "timerslack_ns"))
		if err != nil {
			return nil, fmt.Errorf("timer slack: read: %w", err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("timer slack: read %q of thread %s: %w", b, filepath.Base(task), err)
		}
		out = append(out, time.Duration(ns))
	}
	return out, nil
}

func current() (time.Duration, error) {
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("timer slack: read: %w", err)
	}
	return time.Duration(ns), nil
}

// Ensure makes every thread of the program run with slack d: when the
// calling thread's slack is not d yet, it sets it and executes the program
// again with the same arguments and environment, and does not return. It
// returns nil when the slack is d already (or d is 0: the system's slack
// is kept), and an error when the slack cannot be set or the program not
// executed again; the program then runs on with the slack it has. Call it
// first thing in main, before any goroutine or file that execve would cut
// short.
func Ensure(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := current()
	if err != nil {
		return err
	}
	_, again := os.LookupEnv(marker)
	_ = os.Unsetenv(marker)
	switch {
	case cur == d:
		return nil
	case again:
		return fmt.Errorf("timer slack: still %v after executing the program again with %v", cur, d)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("timer slack: set %v: %w", d, err)
	}
	// /proc/self/exe is this program's file even if its path was replaced
	// (an upgrade in place) since it started.
	err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), marker+"=1"))
	// Still here: this thread keeps the slack, the others do not.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur.Nanoseconds()), 0, 0, 0)
	return fmt.Errorf("timer slack: execute the program again: %w", err)
}
