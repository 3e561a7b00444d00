package record

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A callback's attempt is recorded on its request; on a request deleted
// meanwhile (past its retention) it writes nothing and says the request is
// gone, and takes it off the callbacks due.
func TestCallbackAttemptOnAGoneRequestWritesNothing(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	k := s.k(tid)
	if err := rdb.HSet(ctx, k.req(tid), "status", "completed", fCbStatus, "pending").Err(); err != nil {
		t.Fatal(err)
	}
	n, err := s.CallbackAttempt(ctx, tid, "pending", 503, "callback answered 503", t0)
	if err != nil || n != 1 {
		t.Fatalf("CallbackAttempt on a stored request: %d, %v", n, err)
	}
	if got := rdb.HGet(ctx, k.req(tid), fCbLastCode).Val(); got != "503" {
		t.Errorf("cbLastStatusCode = %q, want 503", got)
	}
	if err := rdb.Del(ctx, k.req(tid)).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.ZAdd(ctx, k.callbackDue(), redis.Z{Member: tid})
	_, err = s.CallbackAttempt(ctx, tid, "delivered", 200, "", t0.Add(time.Second))
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("CallbackAttempt on a deleted request: %v, want ErrNotFound", err)
	}
	if n := rdb.Exists(ctx, k.req(tid)).Val(); n != 0 {
		t.Errorf("the deleted request's hash was written again")
	}
	if n := rdb.ZCard(ctx, k.callbackDue()).Val(); n != 0 {
		t.Errorf("the deleted request is still among the callbacks due")
	}
}
