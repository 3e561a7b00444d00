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
	stalled            // could not be woken now: tried again, or its fallback deadline wakes it
)

// wake makes id's task runnable; one still on its way to being parked is
// started by the owner as it lands (Waker.Wake). One Redis could not
// move stalls here: the slot it was given goes on, and it is tried again,
// or its deadline wakes it.
func (c *core) wake(ctx context.Context, id string) wakeResult {
	err := c.waker.Wake(ctx, id)
	switch {
	case err == nil:
		return woken
	case errors.Is(err, ErrGone):
		return gone
	}
	c.log.Warn("could not wake a parked request now; it is tried again, or its deadline wakes it", "requestId", id, "err", err)
	return stalled
}

// wakeAt has id woken at a timed park's end, to the millisecond, by
// retryd's timer (Waker.WakeAt): asynq keeps due times in whole seconds, so
// its own deadline is only the safety net. Nothing holds a worker slot,
// and a worker that dies meanwhile loses no wake-up.
func (c *core) wakeAt(ctx context.Context, id string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.waker.WakeAt(ctx, id, at); err != nil {
		c.log.Warn("could not set a parked request's timer; its deadline will wake it", "requestId", id, "err", err)
	}
}
