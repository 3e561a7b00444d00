package asynqx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	pending = "asynq:{q}:pending"
	active  = "asynq:{q}:active"
)

func TestClassify(t *testing.T) {
	b := &Bell{Key: "{q}:bell", PendingKeys: map[string]bool{pending: true}}
	ctx := context.Background()
	deq, enq, fwd := Scripts["dequeueCmd"], Scripts["enqueueCmd"], Scripts["forwardCmd"]
	// The dequeue's text as go-redis sends it when Redis lost its script
	// cache (EVAL instead of EVALSHA) is only known by its hash, so the
	// EVAL case uses a script that is not asynq's.
	for _, c := range []struct {
		name string
		cmd  redis.Cmder
		want kind
	}{
		{"asynq dequeue", redis.NewCmd(ctx, "evalsha", deq, 4, pending, "asynq:{q}:paused", active, "asynq:{q}:lease", 1, "p"), dequeue},
		{"asynq enqueue", redis.NewCmd(ctx, "evalsha", enq, 2, "asynq:{q}:t:id", pending, "msg"), fills},
		{"asynq forward", redis.NewCmd(ctx, "evalsha", fwd, 2, "asynq:{q}:retry", pending, 1), fills},
		{"asynq dequeue of another queue", redis.NewCmd(ctx, "evalsha", deq, 4, "asynq:{z}:pending", "p", "asynq:{z}:active", "l"), other},
		{"an unknown script on the pending list", redis.NewCmd(ctx, "evalsha", "0123", 4, pending, "p", active, "l"), other},
		{"an unknown script sent in full", redis.NewCmd(ctx, "eval", "return 1", 4, pending, "p", active, "l"), other},
		{"plain command", redis.NewCmd(ctx, "lpush", pending, "x"), other},
		{"malformed", redis.NewCmd(ctx, "evalsha", deq, 9, pending), other},
	} {
		if got := b.classify(c.cmd); got != c.want {
			t.Errorf("%s: classified %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFailedDequeuePauses(t *testing.T) {
	// Nothing listens on the address: every dequeue fails at once, and
	// asynq would fetch again at once; the hook holds each failure.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	b := &Bell{Key: "{q}:bell", PendingKeys: map[string]bool{pending: true}, Wait: time.Minute, ErrorPause: 200 * time.Millisecond, Client: rdb}
	rdb.AddHook(b)
	start := time.Now()
	err := rdb.Process(context.Background(), redis.NewCmd(context.Background(), "evalsha", Scripts["dequeueCmd"], 4, pending, "p", active, "l", 1, "x"))
	if err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("dequeue against no Redis: %v", err)
	}
	if d := time.Since(start); d < b.ErrorPause {
		t.Fatalf("failed dequeue returned after %v, before the %v pause", d, b.ErrorPause)
	}
}
