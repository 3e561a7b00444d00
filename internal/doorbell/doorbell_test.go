package doorbell

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
	b := &Bell{Key: "{q}:bell", PendingKey: pending, ActiveKey: active}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cmd  redis.Cmder
		want kind
	}{
		{"asynq dequeue", redis.NewCmd(ctx, "evalsha", "sha", 4, pending, "asynq:{q}:paused", active, "asynq:{q}:lease", 1, "p"), dequeue},
		{"asynq dequeue, script sent in full", redis.NewCmd(ctx, "eval", "return 1", 4, pending, "asynq:{q}:paused", active, "asynq:{q}:lease", 1, "p"), dequeue},
		{"asynq enqueue", redis.NewCmd(ctx, "evalsha", "sha", 2, "asynq:{q}:t:id", pending, "msg"), fills},
		{"asynq forward", redis.NewCmd(ctx, "evalsha", "sha", 2, "asynq:{q}:retry", pending, 1), fills},
		{"asynq schedule", redis.NewCmd(ctx, "evalsha", "sha", 2, "asynq:{q}:t:id", "asynq:{q}:scheduled"), other},
		{"retryd's own script rings itself", redis.NewCmd(ctx, "evalsha", "sha", 3, "{retryd}:req:x", "a", pending), other},
		{"another script taking from the pending list", redis.NewCmd(ctx, "evalsha", "sha", 5, pending, "p", active, "l", "s", 1), other},
		{"another queue", redis.NewCmd(ctx, "evalsha", "sha", 4, "asynq:{z}:pending", "p", "asynq:{z}:active", "l"), other},
		{"a one-key script on the pending list", redis.NewCmd(ctx, "evalsha", "sha", 1, pending, 1), other},
		{"plain command", redis.NewCmd(ctx, "lpush", pending, "x"), other},
		{"malformed", redis.NewCmd(ctx, "evalsha", "sha", 9, pending), other},
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
	b := &Bell{Key: "{q}:bell", PendingKey: pending, ActiveKey: active, Wait: time.Minute, ErrorPause: 200 * time.Millisecond, Client: rdb}
	rdb.AddHook(b)
	start := time.Now()
	err := rdb.Process(context.Background(), redis.NewCmd(context.Background(), "evalsha", "sha", 4, pending, "p", active, "l", 1, "x"))
	if err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("dequeue against no Redis: %v", err)
	}
	if d := time.Since(start); d < b.ErrorPause {
		t.Fatalf("failed dequeue returned after %v, before the %v pause", d, b.ErrorPause)
	}
}
