package flow

// Queues (QStash's): a queue's requests start in their order (creation,
// which their ids sort by), at most its parallelism at once, and wait
// while it is paused. A request holds its place from its creation until
// it finishes (completed, failed or canceled): a retry keeps the queue
// behind it, as an ordered queue must. The line, the parked waiters and
// the settings live in one Redis slot.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/record"
)

var (
	queueAdmitScript = script("queue_admit")
	queueNextScript  = script("queue_next")
	queueJoinScript  = script("queue_join")
)

// queueGate is the queue gate: a queue's order lives in Redis alone, so it
// holds nothing of its own here.
type queueGate struct{ *core }

// queueNames are the Redis keys of queue name (tenant-qualified).
func queueNames(name string) []string {
	line, parked, meta, _ := record.FlowQueueKeys(name)
	return []string{line, parked, meta}
}

// place is where a request made at created joins a line at the latest.
func place(created time.Time) int64 { return created.UnixMilli() * 1000 }

// QueueSettings are a queue's.
type QueueSettings struct {
	Parallelism int
	Paused      bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Lag is how many of its requests have not finished.
	Lag int64
}

// SetQueue upserts queue name's settings (parallelism at least 1). A
// resumed or widened queue wakes the waiters whose turn it now is.
func SetQueue(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string, parallelism int, paused bool, now time.Time) error {
	keys := queueNames(name)
	pausedFlag := "0"
	if paused {
		pausedFlag = "1"
	}
	pipe := rdb.TxPipeline()
	pipe.HSet(ctx, keys[2], "parallelism", max(parallelism, 1), "paused", pausedFlag, "updatedAt", now.UnixMilli())
	pipe.HSetNX(ctx, keys[2], "createdAt", now.UnixMilli())
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	return QueueNext(ctx, rdb, mover, log, name, "")
}

var ensureQueueScript = script("queue_ensure")

// EnsureQueue makes queue name, with parallelism 1, if it does not exist
// (as enqueueing to an unknown queue does in QStash), in one round trip;
// made says it did.
func EnsureQueue(ctx context.Context, rdb redis.UniversalClient, name string, now time.Time) (made bool, err error) {
	n, err := ensureQueueScript.Run(ctx, rdb, queueNames(name)[2:], now.UnixMilli()).Int()
	return n == 1, err
}

// SetQueuePaused pauses or resumes queue name, keeping its parallelism.
func SetQueuePaused(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string, paused bool, now time.Time) error {
	s, err := ReadQueue(ctx, rdb, name)
	if err != nil {
		return err
	}
	return SetQueue(ctx, rdb, mover, log, name, s.Parallelism, paused, now)
}

// ErrNoQueue: the queue has no settings (never upserted, or deleted).
var ErrNoQueue = errors.New("no such queue")

// ReadQueue reads queue name's settings, or ErrNoQueue.
func ReadQueue(ctx context.Context, rdb redis.UniversalClient, name string) (QueueSettings, error) {
	keys := queueNames(name)
	pipe := rdb.Pipeline()
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

// DeleteQueue drops queue name's settings; its requests keep their places
// and go on with the defaults (parallelism 1), as QStash's do.
func DeleteQueue(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string) error {
	if err := rdb.Del(ctx, queueNames(name)[2]).Err(); err != nil {
		return err
	}
	return QueueNext(ctx, rdb, mover, log, name, "")
}

// JoinQueue puts request id, made at created, in queue name's line after
// every request that joined before it. The API calls it as it accepts the
// request, so the order is the order of acceptance; an admission of a
// request whose join was lost puts it at its creation time.
func JoinQueue(ctx context.Context, rdb redis.UniversalClient, name, id string, created time.Time) error {
	line, _, _, seq := record.FlowQueueKeys(name)
	return queueJoinScript.Run(ctx, rdb, []string{line, seq},
		id, place(created), DefaultTuning.KeyTTL.Milliseconds()).Err() // the API has no controller
}

// QueueNext takes finished request id ("" for none) out of queue name's
// line and wakes the waiters whose turn it now is. A woken one that is
// gone (canceled meanwhile) is taken out too, and the next woken.
func QueueNext(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name, id string) error {
	for range 100 {
		ids, err := queueNextScript.Run(ctx, rdb, queueNames(name), id).StringSlice()
		if err != nil {
			return err
		}
		moves := make([]Move, len(ids))
		for i, w := range ids {
			moves[i] = Now(w)
		}
		id = ""
		if gone := move(ctx, mover, log, moves...).gone; len(gone) > 0 {
			id = gone[0] // not waiting any more: out of line, and look again
		}
		if id == "" {
			return nil
		}
	}
	return nil
}

// admit admits req in its queue's order: ok, or parked (its turn
// comes when one ahead of it finishes; the safety net is ParkFallback).
// The requests ahead of it that are finished or gone (a worker died
// between recording and leaving the line) are taken out here.
func (q *queueGate) admit(ctx context.Context, req Request, isDone func(context.Context, string) bool) (bool, error) {
	res, err := queueAdmitScript.Run(ctx, q.rdb, queueNames(req.Queue), req.ID, q.tune.KeyTTL.Milliseconds(), place(req.Created)).StringSlice()
	if err != nil {
		return false, err
	}
	if len(res) < 1 || (res[0] != "0" && res[0] != "1") {
		return false, fmt.Errorf("queue_admit script: unexpected reply %v", res)
	}
	if res[0] == "1" {
		return true, nil
	}
	for _, ahead := range res[1:] {
		if ahead != req.ID && isDone != nil && isDone(ctx, ahead) {
			if err := QueueNext(ctx, q.rdb, q.mover, q.log, req.Queue, ahead); err != nil {
				q.log.Warn("could not take a finished request out of its queue", "queue", req.Queue, "requestId", ahead, "err", err)
			}
		}
	}
	return false, nil
}

// enter runs the queue gate: it passes a request (of a queue, or
// not) whose turn it is, and holds one until the ones ahead of it finish.
// Its place is kept until it finishes (QueueDone), not given back when
// an attempt ends.
func (q *queueGate) enter(ctx context.Context, t *Ticket) error {
	if t.req.Queue == "" {
		return nil
	}
	ok, err := q.admit(ctx, t.req, q.cfg.Finished)
	if err != nil || ok {
		return err
	}
	return &Parked{Until: t.start.Add(q.tune.ParkFallback), Reason: record.WaitingQueue}
}

// done takes req, finished, out of its queue's line and wakes the
// next.
func (q *queueGate) done(ctx context.Context, req Request) {
	if req.Queue == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := QueueNext(ctx, q.rdb, q.mover, q.log, req.Queue, req.ID); err != nil {
		q.log.Warn("could not take a finished request out of its queue; the next admission does", "queue", req.Queue, "requestId", req.ID, "err", err)
	}
}
