package flow

// Queues (QStash's): a queue's requests start in their order (creation,
// which their ids sort by), at most its parallelism at once, and wait
// while it is paused. A request holds its place from its creation until
// it finishes (completed, failed or canceled): a retry keeps the queue
// behind it, as an ordered queue must. The line, the parked waiters and
// the settings live in one Redis slot.

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/keys"
)

// queueGate is the queue gate: a queue's order lives in Redis alone, so it
// holds nothing of its own here.
type queueGate struct{ *core }

// place is where a request made at created joins a line at the latest.
func place(created time.Time) int64 { return created.UnixMilli() * 1000 }

// QueueSettings are a queue's.
type QueueSettings = flowdb.QueueSettings

// SetQueue upserts queue name's settings (parallelism at least 1). A
// resumed or widened queue wakes the waiters whose turn it now is.
func SetQueue(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string, parallelism int, paused bool, now time.Time) error {
	db := flowdb.New(rdb)
	if err := db.Queue.Set(ctx, name, parallelism, paused, now); err != nil {
		return err
	}
	return queueNext(ctx, db, mover, log, name, "")
}

// EnsureQueue makes queue name, with parallelism 1, if it does not exist
// (as enqueueing to an unknown queue does in QStash), in one round trip;
// made says it did.
func EnsureQueue(ctx context.Context, rdb redis.UniversalClient, name string, now time.Time) (made bool, err error) {
	return flowdb.New(rdb).Queue.Ensure(ctx, name, now)
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
var ErrNoQueue = flowdb.ErrNoQueue

// ReadQueue reads queue name's settings, or ErrNoQueue.
func ReadQueue(ctx context.Context, rdb redis.UniversalClient, name string) (QueueSettings, error) {
	s, err := flowdb.New(rdb).Queue.Read(ctx, name)
	return s, err
}

// DeleteQueue drops queue name's settings; its requests keep their places
// and go on with the defaults (parallelism 1), as QStash's do.
func DeleteQueue(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string) error {
	db := flowdb.New(rdb)
	if err := db.Queue.Delete(ctx, name); err != nil {
		return err
	}
	return queueNext(ctx, db, mover, log, name, "")
}

// JoinQueue puts request id, made at created, in queue name's line after
// every request that joined before it. The API calls it as it accepts the
// request, so the order is the order of acceptance; an admission of a
// request whose join was lost puts it at its creation time.
func JoinQueue(ctx context.Context, rdb redis.UniversalClient, name, id string, created time.Time) error {
	return flowdb.New(rdb).Queue.Join(ctx, name, id, place(created), DefaultTuning.KeyTTL) // the API has no controller
}

// QueueNext takes finished request id ("" for none) out of queue name's
// line and wakes the waiters whose turn it now is. A woken one that is
// gone (canceled meanwhile) is taken out too, and the next woken.
func QueueNext(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name, id string) error {
	return queueNext(ctx, flowdb.New(rdb), mover, log, name, id)
}

// queueNext is QueueNext on db.
func queueNext(ctx context.Context, db *flowdb.DB, mover Mover, log *slog.Logger, name, id string) error {
	for range 100 {
		ids, err := db.Queue.Next(ctx, name, id)
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
	admitted, aheadOf, err := q.db.Queue.Admit(ctx, req.Queue, req.ID, q.tune.KeyTTL, place(req.Created))
	if err != nil || admitted {
		return admitted, err
	}
	for _, ahead := range aheadOf {
		if ahead != req.ID && isDone != nil && isDone(ctx, ahead) {
			if err := queueNext(ctx, q.db, q.mover, q.log, req.Queue, ahead); err != nil {
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
	return &Parked{Until: t.start.Add(q.tune.ParkFallback), Reason: keys.WaitingQueue}
}

// done takes req, finished, out of its queue's line and wakes the
// next.
func (q *queueGate) done(ctx context.Context, req Request) {
	if req.Queue == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := queueNext(ctx, q.db, q.mover, q.log, req.Queue, req.ID); err != nil {
		q.log.Warn("could not take a finished request out of its queue; the next admission does", "queue", req.Queue, "requestId", req.ID, "err", err)
	}
}
