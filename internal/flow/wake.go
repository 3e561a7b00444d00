package flow

// Waking parked requests: when a slot frees (a line) or at a timed
// park's end.

import (
	"context"
	"errors"
	"time"
)

// wakeResult is what came of a wake-up.
type wakeResult int

const (
	woken   wakeResult = iota
	gone               // no parked task any more
	stalled            // could not be woken now; its fallback deadline will
)

// wake makes id's task runnable, waiting up to a second for a task still
// on its way to being parked.
func (c *Controller) wake(ctx context.Context, id string) wakeResult {
	for i := 0; ; i++ {
		err := c.waker.Wake(ctx, id)
		switch {
		case err == nil:
			return woken
		case errors.Is(err, ErrGone):
			return gone
		case i >= 50 || ctx.Err() != nil:
			c.log.Warn("could not wake a parked request; its deadline will", "requestId", id, "err", err)
			return stalled
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wakeAt wakes id at a timed park's end, to the millisecond: asynq keeps
// due times in whole seconds, so its own deadline is only the fallback.
// The timer holds no worker slot.
func (c *Controller) wakeAt(id string, at time.Time) {
	c.wakes.Add(1)
	time.AfterFunc(at.Sub(c.now()), func() {
		defer c.wakes.Done()
		if c.stop.Err() == nil {
			_ = c.wake(c.stop, id)
		}
	})
}
