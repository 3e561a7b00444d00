package flow

// Moves: what flow decided about waiting tasks, as plain data, and the one
// place that hands them to the owner of waiting and sorts its answers.

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Move is one decision about a waiting request's task: start it now (At
// zero) or at At, to the millisecond (retryd's timer; asynq keeps due
// times in whole seconds, so its own is only the safety net).
type Move struct {
	ID string
	At time.Time
	// ParkedOnly starts the task only if it sleeps in a park, never one
	// waiting out a retry's backoff.
	ParkedOnly bool
}

// Now is the move that starts request id's task now.
func Now(id string) Move { return Move{ID: id} }

// At is the move that starts request id's task at at.
func At(id string, at time.Time) Move { return Move{ID: id, At: at} }

// Result is what came of a Move.
type Result struct {
	// Gone: the request has no waiting task any more (canceled,
	// finished), or, for a ParkedOnly move, none sleeping in a park.
	Gone bool
	// Err: the move could not be made now (Redis could not say); the
	// task's safety net still starts it.
	Err error
}

// Mover applies moves: internal/waiting's Owner. flow decides, the owner
// moves tasks, and flow imports nothing of it.
type Mover interface {
	// Apply makes moves, in order, and answers a Result for each. A
	// task still on its way to being parked is started as it lands: a
	// move is never lost to a park in transit.
	Apply(ctx context.Context, moves []Move) []Result
	// Pending says whether a woken request's task still waits to be
	// fetched (runnable, taken by no worker yet).
	Pending(ctx context.Context, id string) (bool, error)
}

// applied is what came of moves, each id in one of three lists, in the
// moves' order: started (or set in the timer), gone, or stalled (Redis
// could not say; err is the first stall's error).
type applied struct {
	moved, gone, stalled []string
	err                  error
}

// moveTimeout bounds each move: one slow move stalls itself, not the
// moves after it.
const moveTimeout = 5 * time.Second

// move hands moves to the owner (mover) and sorts what came of them. It
// is flow's only way to the owner: every gate, loop and operator's move
// passes here, and stalls are logged here (one line a call). Each move
// has its own moveTimeout; a timed one is made even when ctx ends (the
// attempt that decided it returns meanwhile), since it stands for a task
// that waits for it. What a gone or stalled waiter means for the slot it
// was handed is the gate's to settle, since the slot is its state.
func move(ctx context.Context, mover Mover, log *slog.Logger, moves ...Move) applied {
	var a applied
	for _, m := range moves {
		mctx := ctx
		if !m.At.IsZero() {
			mctx = context.WithoutCancel(ctx)
		}
		mctx, cancel := context.WithTimeout(mctx, moveTimeout)
		r := Result{Err: errShortAnswer}
		if res := mover.Apply(mctx, []Move{m}); len(res) == 1 {
			r = res[0]
		}
		cancel()
		switch {
		case r.Err != nil:
			a.stalled = append(a.stalled, m.ID)
			if a.err == nil {
				a.err = r.Err
			}
		case r.Gone:
			a.gone = append(a.gone, m.ID)
		default:
			a.moved = append(a.moved, m.ID)
		}
	}
	if len(a.stalled) > 0 {
		log.Warn("could not start waiting requests now (Redis could not say); each is tried again, or its deadline starts it",
			"requests", len(a.stalled), "first", a.stalled[0], "err", a.err)
	}
	return a
}

// move is move with the controller's owner and log.
func (c *core) move(ctx context.Context, moves ...Move) applied {
	return move(ctx, c.mover, c.log, moves...)
}

// pending asks the owner whether woken request id's task still waits to
// be fetched.
func (c *core) pending(ctx context.Context, id string) (bool, error) {
	return c.mover.Pending(ctx, id)
}

// errShortAnswer: the owner answered fewer results than moves.
var errShortAnswer = errors.New("the owner of waiting answered no result for a move")
