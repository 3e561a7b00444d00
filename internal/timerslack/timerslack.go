// Package timerslack gives a program's threads a timer slack: how late
// Linux may fire a thread's timers so that nearby wake-ups merge.
//
// Why: the Go runtime's monitor thread (sysmon) is woken by every burst of
// work that follows an idle moment and then sleeps 20 µs at a time until
// the process is idle again. A worker waiting on Redis and destinations is
// made of such bursts (one per round trip), and with Linux's default 50 µs
// slack each of those sleeps is a context switch: about half a worker's
// context switches per attempt in the backlog figures (docs/benchmarks.md).
// With 1 ms of slack they merge. Go's own timers have millisecond
// resolution on Linux (epoll's timeout), so 1 ms makes a timer at most
// about 1 ms later than it already may be.
//
// A thread takes its slack from the thread that created it, and the runtime
// starts sysmon before any Go code runs, so Ensure sets the slack of the
// calling thread and executes the program again: the new image's first
// thread keeps the slack (execve preserves it) and every thread the runtime
// then starts inherits it.
package timerslack

import (
	"errors"
	"time"
)

// Default is the slack retryd's programs run with when TIMER_SLACK is
// unset: 0, the system's own, and no second execution. A slack is a
// deployment's choice, asked for with TIMER_SLACK.
const Default = 0 * time.Millisecond

// Max bounds the slack a configuration may ask for: timers later than
// this would show in the timing figures (retries' lateness).
const Max = 20 * time.Millisecond

// marker is set in the environment of the program executed again, so a
// slack that did not survive execve cannot turn into an endless loop.
const marker = "RETRYD_TIMER_SLACK_EXECUTED"

// ErrUnsupported is returned where the slack cannot be set (not Linux).
var ErrUnsupported = errors.New("timer slack: not supported on this system")
