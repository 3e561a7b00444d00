//go:build !linux

package timerslack

import "time"

// Current is the calling thread's timer slack; only Linux has one.
func Current() (time.Duration, error) { return 0, ErrUnsupported }

// Ensure does nothing: only Linux has a timer slack to set.
func Ensure(time.Duration) error { return nil }

// Threads is the timer slack of each thread of process pid; only Linux
// has one.
func Threads(int) ([]time.Duration, error) { return nil, ErrUnsupported }
