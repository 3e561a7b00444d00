// Package clock is the time retryd's timers read and wait on: Real in the
// programs, a Fake that tests move by hand. A component that compares
// times from Now and waits on timers takes both from one Clock, so a test
// that moves the time also fires the waits, and a program's waits follow
// the wall clock.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and makes timers that fire on it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock. Reset rearms it, fired or not,
// and a value not received before Reset or Stop is dropped.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Real is the wall clock.
var Real Clock = wall{}

type wall struct{}

func (wall) Now() time.Time                 { return time.Now() }
func (wall) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

// wallTimer relies on Go 1.23's timers: Reset and Stop drop a value not
// received.
type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time   { return w.t.C }
func (w wallTimer) Reset(d time.Duration) { w.t.Reset(d) }
func (w wallTimer) Stop()                 { w.t.Stop() }

// Sleep waits d on c; it returns ctx's error if ctx ends first.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Every calls fn every d on c until ctx ends, as a time.Ticker would: a
// call that takes longer than d is followed by the next at once.
func Every(ctx context.Context, c Clock, d time.Duration, fn func()) {
	t := c.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Reset(d)
			fn()
		}
	}
}

// Fake is a clock that moves only when told (Add); its timers fire when it
// passes their deadlines.
type Fake struct {
	mu     sync.Mutex
	t      time.Time
	timers map[*fakeTimer]bool // armed
}

// NewFake returns a Fake at t.
func NewFake(t time.Time) *Fake { return &Fake{t: t, timers: map[*fakeTimer]bool{}} }

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// Add moves the time on by d and fires the timers it passes.
func (f *Fake) Add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
	for t := range f.timers {
		if !t.at.After(f.t) {
			f.fire(t)
		}
	}
}

// Set moves the time to t (on or back) and fires the timers it passes.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	d := t.Sub(f.t)
	f.mu.Unlock()
	f.Add(d)
}

// NewTimer returns a timer that fires once Add passed d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// fire sends the time on t's channel and disarms it; f.mu is held.
func (f *Fake) fire(t *fakeTimer) {
	delete(f.timers, t)
	select {
	case t.c <- f.t:
	default:
	}
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time
	at time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	t.at = t.f.t.Add(d)
	if d <= 0 {
		t.f.fire(t)
		return
	}
	t.f.timers[t] = true
}

func (t *fakeTimer) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	delete(t.f.timers, t)
	t.drain()
}

func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}
