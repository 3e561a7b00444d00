package clock

import (
	"context"
	"testing"
	"time"
)

// A fake timer fires when the fake time passes its deadline, not before;
// Reset rearms it and drops a value not received; Stop disarms it.
func TestFakeTimersFireWhenTheTimePasses(t *testing.T) {
	f := NewFake(time.UnixMilli(1_700_000_000_000))
	tm := f.NewTimer(time.Second)
	f.Add(999 * time.Millisecond)
	if fired(tm) {
		t.Fatal("fired 1 ms early")
	}
	f.Add(time.Millisecond)
	if !fired(tm) {
		t.Fatal("did not fire at its deadline")
	}
	tm.Reset(time.Second)
	f.Add(time.Second)
	tm.Reset(time.Second) // the value of the first deadline is dropped
	if fired(tm) {
		t.Fatal("a value from before Reset was kept")
	}
	tm.Stop()
	f.Add(time.Hour)
	if fired(tm) {
		t.Fatal("a stopped timer fired")
	}
	tm.Reset(0)
	if !fired(tm) {
		t.Fatal("Reset(0) did not fire at once")
	}
}

// Sleep on a fake clock ends when the time passes, or with its context.
func TestSleepOnAFakeClock(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.Add(time.Second)
		select {
		case err := <-done:
			if err != nil || f.Now().Before(time.Unix(60, 0)) {
				t.Fatalf("Sleep = %v at %v; want nil once a minute passed", err, f.Now())
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := Sleep(ctx, f, time.Hour); err == nil {
				t.Fatal("Sleep with an ended context returned nil")
			}
			return
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Sleep never ended")
		}
	}
}

func fired(tm Timer) bool {
	select {
	case <-tm.C():
		return true
	default:
		return false
	}
}
