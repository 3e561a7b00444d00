package flowdb

// A queue's line, its parked waiters and its settings, in one Redis slot.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var (
	queueAdmitScript  = script("queue_admit")
	queueNextScript   = script("queue_next")
	queueJoinScript   = script("queue_join")
	ensureQueueScript = script("queue_ensure")
)

// QueueIO reads and writes the queues.
type QueueIO struct{ rdb redis.UniversalClient }

// queueNames are the Redis keys of queue name (tenant-qualified).
func queueNames(name string) []string {
	line, parked, meta, _ := keys.FlowQueue(name)
	return []string{line, parked, meta}
}

// QueueSettings are a queue's, as stored.
type QueueSettings struct {
	Parallelism int
	Paused      bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Lag is how many of its requests have not finished.
	Lag int64
}

// ErrNoQueue: the queue has no settings (never upserted, or deleted).
var ErrNoQueue = errors.New("no such queue")

// Set writes queue name's settings in one transaction, keeping when it
// was made.
func (q QueueIO) Set(ctx context.Context, name string, parallelism int, paused bool, now time.Time) error {
	meta := queueNames(name)[2]
	pausedFlag := "0"
	if paused {
		pausedFlag = "1"
	}
	pipe := q.rdb.TxPipeline()
	pipe.HSet(ctx, meta, "parallelism", max(parallelism, 1), "paused", pausedFlag, "updatedAt", now.UnixMilli())
	pipe.HSetNX(ctx, meta, "createdAt", now.UnixMilli())
	_, err := pipe.Exec(ctx)
	return err
}

// Ensure makes queue name with parallelism 1 if it has no settings, in
// one round trip; made says it did.
func (q QueueIO) Ensure(ctx context.Context, name string, now time.Time) (made bool, err error) {
	n, err := ensureQueueScript.Run(ctx, q.rdb, queueNames(name)[2:], now.UnixMilli()).Int()
	return n == 1, err
}

// Read reads queue name's settings and lag in one round trip, or
// ErrNoQueue.
func (q QueueIO) Read(ctx context.Context, name string) (QueueSettings, error) {
	keys := queueNames(name)
	pipe := q.rdb.Pipeline()
	h := pipe.HGetAll(ctx, keys[2])
	lag := pipe.ZCard(ctx, keys[0])
	if _, err := pipe.Exec(ctx); err != nil {
		return QueueSettings{}, err
	}
	if len(h.Val()) == 0 {
		return QueueSettings{}, ErrNoQueue
	}
	v := h.Val()
	var p int
	fmt.Sscan(v["parallelism"], &p)
	ms := func(f string) time.Time {
		var n int64
		fmt.Sscan(v[f], &n)
		return time.UnixMilli(n)
	}
	return QueueSettings{Parallelism: max(p, 1), Paused: v["paused"] == "1", CreatedAt: ms("createdAt"), UpdatedAt: ms("updatedAt"), Lag: lag.Val()}, nil
}

// Delete drops queue name's settings (its line stays).
func (q QueueIO) Delete(ctx context.Context, name string) error {
	return q.rdb.Del(ctx, queueNames(name)[2]).Err()
}

// Join puts request id in queue name's line at place at the latest,
// after every request that joined before it.
func (q QueueIO) Join(ctx context.Context, name, id string, place int64, ttl time.Duration) error {
	line, _, _, seq := keys.FlowQueue(name)
	return queueJoinScript.Run(ctx, q.rdb, []string{line, seq}, id, place, ttl.Milliseconds()).Err()
}

// Next takes finished request id ("" for none) out of queue name's line
// and answers the waiters whose turn it now is.
func (q QueueIO) Next(ctx context.Context, name, id string) ([]string, error) {
	return queueNextScript.Run(ctx, q.rdb, queueNames(name), id).StringSlice()
}

// Admit admits request id (at place at the latest) in queue name's
// order: admitted, or not with the requests ahead of it.
func (q QueueIO) Admit(ctx context.Context, name, id string, ttl time.Duration, place int64) (admitted bool, ahead []string, err error) {
	res, err := queueAdmitScript.Run(ctx, q.rdb, queueNames(name), id, ttl.Milliseconds(), place).StringSlice()
	if err != nil {
		return false, nil, err
	}
	if len(res) < 1 || (res[0] != "0" && res[0] != "1") {
		return false, nil, fmt.Errorf("queue_admit script: unexpected reply %v", res)
	}
	if res[0] == "1" {
		return true, nil, nil
	}
	return false, res[1:], nil
}
