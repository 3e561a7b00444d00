package flow

// The flowControl parallelism: slots in Redis with leases, handed
// straight to the longest waiter on release.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryd/retryd/internal/record"
)

const (
	// LeaseMargin is added to an attempt's timeout for its slot's lease;
	// HandOverLease is the lease of a slot handed to a woken request.
	LeaseMargin   = 5 * time.Second
	HandOverLease = 15 * time.Second
)

// keyNames are the Redis keys of a flow-control key's parallelism.
func keyNames(k string) (slots, wait string) {
	return record.FlowKey(k, "slots"), record.FlowKey(k, "wait")
}

// acquire takes one of req's parallelism slots: ok, or until when its
// task sleeps unless woken (a release hands it the slot) first.
func (c *Controller) acquire(ctx context.Context, req Request, now time.Time) (until time.Time, ok bool, err error) {
	slots, wait := keyNames(req.Key)
	res, err := acquireScript.Run(ctx, c.rdb, []string{slots, wait}, req.ID, req.Parallelism, now.UnixMilli(),
		now.Add(req.Timeout+LeaseMargin).UnixMilli(), KeyTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return time.Time{}, false, err
	}
	if len(res) < 1 || len(res) > 2 || res[0] < 0 || res[0] > 1 {
		return time.Time{}, false, fmt.Errorf("acquire script: unexpected reply %v", res)
	}
	if res[0] == 1 {
		return time.Time{}, true, nil
	}
	until = now.Add(ParkFallback)
	if len(res) > 1 {
		// A lease that ends frees its slot without a release: a worker
		// died holding it. Look again then.
		if end := time.UnixMilli(res[1]).Add(10 * time.Millisecond); end.Before(until) {
			until = end
		}
	}
	return until, false, nil
}

// release gives back id's parallelism slot and wakes the request it is
// handed to (and the next, when that one is gone).
func (c *Controller) release(ctx context.Context, req Request, id string) {
	slots, wait := keyNames(req.Key)
	for range 100 {
		next, err := c.handOver(ctx, slots, wait, req, id)
		if errors.Is(err, redis.Nil) {
			return
		}
		if err != nil {
			// The lease ends the slot anyway; waiters look again then.
			c.log.Warn("could not give back a flow-control slot; its lease will", "key", req.Key, "requestId", id, "err", err)
			return
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		res := c.wake(wctx, next)
		cancel()
		switch res {
		case woken:
			return
		case stalled:
			// Redis or asynq trouble: the handed-over slot's lease
			// (HandOverLease) gives it back.
			return
		}
		id = next // gone: give its handed-over slot on
	}
}

// wakeLocal wakes the request parked for a fairness slot of hostPort (or
// the next one in line, when it is gone), in the background.

// handOver gives back id's slot and returns the waiter it was handed to
// (redis.Nil: nobody waits).
func (c *Controller) handOver(ctx context.Context, slots, wait string, req Request, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := c.now()
	return releaseScript.Run(ctx, c.rdb, []string{slots, wait}, id, req.Parallelism, now.UnixMilli(),
		now.Add(HandOverLease).UnixMilli()).Text()
}
