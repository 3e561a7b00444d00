package asynqx

// The doorbell wakes an idle worker as soon as a task becomes pending,
// instead of at asynq's next poll.
//
// asynq's processor fetches by polling: when its dequeue script finds the
// queue empty it sleeps TaskCheckInterval and tries again. Polling often
// makes new requests start sooner but costs CPU on every idle worker;
// polling rarely makes them wait. The doorbell turns the poll into a long
// poll. A go-redis hook on the worker's client recognises asynq's dequeue
// script; when it comes back empty, the hook blocks on BLPOP of the
// doorbell list (for at most Wait) and runs the dequeue again when a token
// arrives. asynq sees one slow, successful dequeue.
//
// Whoever makes a task pending rings: the hook rings after asynq's own
// scripts that fill the pending list succeed (enqueue, forwarding due
// retries and scheduled tasks, "run now" from the dashboard, the
// sweeper's requeue). The list holds at most one token: a burst wakes one worker,
// which keeps dequeuing without waiting until the queue is empty (asynq
// fetches again at once after it got a task), and a second token is pushed
// only once the first was taken. A token nobody needed costs one empty
// dequeue.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bell is a go-redis hook (add it with AddHook) for one asynq queue.
type Bell struct {
	// Key is the doorbell list; it must share the queue's cluster slot.
	Key string
	// PendingKeys are asynq's pending lists of the queues the bell serves.
	PendingKeys map[string]bool
	// Wait is the longest an empty dequeue blocks. 0 disables waiting
	// (processes that only enqueue ring but never wait).
	Wait time.Duration
	// ErrorPause is how long a failed dequeue is held before asynq sees the
	// error, so an outage does not turn asynq's fetch loop (which retries a
	// failed dequeue at once) into a busy loop.
	ErrorPause time.Duration
	// LatePause is how far apart a woken worker that found the queue empty
	// looks again (lateTaskTries times): long enough to cover the
	// submission's own enqueue (one round trip after its ring), short
	// enough to cost little for a token nobody needed.
	LatePause time.Duration
	// Client runs BLPOP and the ring; normally the client the hook is on.
	Client redis.UniversalClient

	// empties counts dequeues in a row that found their queue empty; the
	// bell waits once every queue was found empty.
	empties atomic.Int64

	stopOnce sync.Once
	stopped  chan struct{}
	stopKey  string
	initOnce sync.Once
}

// ringScript rings the doorbell: scripts/ring.lua.
var ringScript = script("ring")

func (b *Bell) init() {
	b.initOnce.Do(func() {
		b.stopped = make(chan struct{})
		// The stop key shares Key's hash tag, so one BLPOP can wait on both.
		b.stopKey = b.Key + ":stop:" + strconv.FormatUint(rand.Uint64(), 36)
	})
}

// Stop ends waiting, the wait in progress included: an empty dequeue
// returns at once from now on, so the fetch loop can stop.
func (b *Bell) Stop() {
	b.init()
	b.stopOnce.Do(func() {
		close(b.stopped)
		// Wake the wait in progress through this bell's own stop key.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pipe := b.Client.Pipeline()
		pipe.RPush(ctx, b.stopKey, "1")
		pipe.PExpire(ctx, b.stopKey, 10*time.Second)
		_, _ = pipe.Exec(ctx)
	})
}

// Ring pushes a token unless one is waiting already.
func (b *Bell) Ring(ctx context.Context) error {
	return ringScript.Run(ctx, b.Client, []string{b.Key}).Err()
}

// DialHook is part of redis.Hook; the doorbell does not change dialing.
func (b *Bell) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook is part of redis.Hook; asynq's dequeue and enqueue
// scripts are not pipelined.
func (b *Bell) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type noRingKey struct{}

// WithoutRing marks ctx so that the asynq call made with it does not ring:
// the caller rang already (retryd's submission rings in the script that
// stores the request, one round trip earlier).
func WithoutRing(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRingKey{}, true)
}

// ProcessHook catches asynq's dequeue (to wait) and the asynq scripts that
// make tasks pending (to ring).
func (b *Bell) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	b.init()
	return func(ctx context.Context, cmd redis.Cmder) error {
		kind := b.classify(cmd)
		if kind == fills && ctx.Value(noRingKey{}) != nil {
			kind = other
		}
		err := next(ctx, cmd)
		if kind == dequeue && !errors.Is(err, redis.Nil) {
			b.empties.Store(0)
		}
		switch {
		case kind == dequeue && errors.Is(err, redis.Nil) && b.Wait > 0:
			// asynq dequeues from its queues one after another; wait only
			// once the last of them came back empty too.
			if n := b.empties.Add(1); n < int64(len(b.PendingKeys)) {
				return err
			}
			b.empties.Store(0)
			return b.longPoll(ctx, next, cmd)
		case kind == dequeue && err != nil && !errors.Is(err, redis.Nil):
			b.pause(b.ErrorPause)
		case kind == fills && err == nil && movedAny(cmd):
			// A failed ring only delays the task to the next poll.
			_ = b.Ring(ctx)
		}
		return err
	}
}

// longPoll waits for a token and dequeues again, until a task comes, Wait
// passes or the bell is stopped; it returns the outcome of the last dequeue.
func (b *Bell) longPoll(ctx context.Context, next redis.ProcessHook, cmd redis.Cmder) error {
	deadline := time.Now().Add(b.Wait)
	for {
		left := time.Until(deadline)
		if left < time.Millisecond || b.isStopped() {
			return redis.Nil
		}
		// A token left over from before the empty dequeue wakes at once and
		// costs one more dequeue; that is the price of not losing one.
		// BLPop's own timeout is whole seconds; Redis takes fractions.
		timeout := strconv.FormatFloat(left.Seconds(), 'f', 3, 64)
		if err := b.Client.Do(ctx, "BLPOP", b.Key, b.stopKey, timeout).Err(); err != nil {
			if !errors.Is(err, redis.Nil) {
				b.pause(min(b.ErrorPause, left))
			}
			return redis.Nil
		}
		if len(b.PendingKeys) > 1 {
			// The task may be in another queue: let asynq look in all.
			return redis.Nil
		}
		// A submission rings just before it enqueues: the task may land a
		// moment after the token. Look again a few times before waiting.
		for i := 0; i < lateTaskTries; i++ {
			if err := next(ctx, cmd); !errors.Is(err, redis.Nil) {
				return err
			}
			b.pause(b.LatePause)
		}
	}
}

// lateTaskTries is how many times a woken worker that finds the queue
// empty looks again (LatePause apart).
const lateTaskTries = 4

// movedAny: asynq's scripts answer how many tasks they moved (0 for none)
// or a status; only a 0 means nothing became pending.
func movedAny(cmd redis.Cmder) bool {
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return true
	}
	n, isInt := c.Val().(int64)
	return !isInt || n != 0
}

func (b *Bell) isStopped() bool {
	select {
	case <-b.stopped:
		return true
	default:
		return false
	}
}

func (b *Bell) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.stopped:
	}
}

type kind int

const (
	other kind = iota
	dequeue
	fills
)

// Scripts are asynq's scripts the doorbell recognises, by the SHA-1 of
// their text (what EVALSHA names), as in asynq Version. TestFingerprints
// reads them from asynq's source in the module cache and fails when one
// changes.
var Scripts = map[string]string{
	"dequeueCmd":           "a8153319360adc71cdc370107f8ab9786f204765",
	"enqueueCmd":           "98d28b42650870a743450ffda9791e9e19c6991b",
	"enqueueUniqueCmd":     "297b3f9abfd963a3316434ef9d88fc5bf8a7ddc3",
	"requeueCmd":           "f34cbfd11d1fc8019af55b50c447fc68eb8b29e5",
	"forwardCmd":           "522b1a6ae66fe79ea2f24a9af58798ab71879035",
	"runTaskCmd":           "2fb646810e3433bbe85fba1a6b407eb3eced7b63",
	"runAllCmd":            "1d0a1f59e02d7de4c1ffdc680ba4f5984b1a590c",
	"runAllAggregatingCmd": "95d6ff8ea96c4e9441a0d202a7babf13c5421285",
}

// kinds maps a script's SHA-1 to what it does to the pending list: the
// dequeue takes from it; the others (enqueue, shutdown's requeue, the
// forwarder of due retries and scheduled tasks, the dashboard's runs) may
// fill it.
var kinds = func() map[string]kind {
	m := make(map[string]kind, len(Scripts))
	for _, sha := range Scripts {
		m[sha] = fills
	}
	m[Scripts["dequeueCmd"]] = dequeue
	return m
}()

// classify recognises asynq's scripts by their fingerprint, and only on
// this bell's queues (a pending list among the keys they name).
func (b *Bell) classify(cmd redis.Cmder) kind {
	args := cmd.Args()
	keys, _ := scriptKeys(args)
	if !slices.ContainsFunc(keys, func(k string) bool { return b.PendingKeys[k] }) {
		return other
	}
	sha, _ := args[1].(string)
	if name, _ := args[0].(string); name == "eval" {
		sum := sha1.Sum([]byte(sha))
		sha = hex.EncodeToString(sum[:])
	}
	return kinds[sha]
}

// scriptKeys splits the arguments of an EVALSHA or EVAL call into the keys
// it names and the remaining arguments; keys is nil for any other command.
func scriptKeys(args []any) (keys []string, rest []any) {
	if len(args) < 3 {
		return nil, nil
	}
	if name, _ := args[0].(string); name != "evalsha" && name != "eval" {
		return nil, nil
	}
	n, ok := args[2].(int)
	if !ok || n < 1 || len(args) < 3+n {
		return nil, nil
	}
	keys = make([]string, n)
	for i := range keys {
		if keys[i], ok = args[3+i].(string); !ok {
			return nil, nil
		}
	}
	return keys, args[3+n:]
}
