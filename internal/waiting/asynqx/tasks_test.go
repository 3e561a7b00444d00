package asynqx

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// strand makes task id of queue look like a run whose worker died: active,
// with its lease at leaseExpiry (zero: no lease entry, asynq #1051).
func strand(t *testing.T, srv *redistest.Server, queue, id string, leaseExpiry time.Time) {
	t.Helper()
	ctx := context.Background()
	rdb := srv.Client()
	k := QueueKeys(queue)
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Pending(), 0, id)
	pipe.LPush(ctx, k.Active(), id)
	pipe.HSet(ctx, k.Task(id), "state", "active")
	if !leaseExpiry.IsZero() {
		pipe.ZAdd(ctx, k.Lease(), redisZ(float64(leaseExpiry.Unix()), id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTaskStatesAndRequeueStranded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	now := time.Now()
	for _, id := range []string{"expired", "nolease", "silent", "live"} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	strand(t, srv, "q", "expired", now.Add(-time.Minute))
	strand(t, srv, "q", "nolease", time.Time{})
	// Not extended for Silent: its worker missed three heartbeats.
	strand(t, srv, "q", "silent", now.Add(LeaseDuration-Silent-time.Second))
	// A live worker's lease, just before its next extension.
	strand(t, srv, "q", "live", now.Add(LeaseDuration-HeartbeatEvery-time.Second))

	stranded, err := Stranded(ctx, rdb, "q", now)
	slices.Sort(stranded)
	if want := []string{"expired", "nolease", "silent"}; err != nil || !slices.Equal(stranded, want) {
		t.Errorf("Stranded = %v, %v; want %v", stranded, err, want)
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("later"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("now")); err != nil {
		t.Fatal(err)
	}
	states, err := TaskStates(ctx, rdb, "q", []string{"expired", "nolease", "silent", "live", "missing", "later", "now"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range states {
		got = append(got, s.State)
	}
	if want := []string{"active", "active", "active", "active", "", "scheduled", "pending"}; !slices.Equal(got, want) {
		t.Errorf("states %q, want %q", got, want)
	}
	// State reads one task's the same way.
	for i, id := range []string{"expired", "missing", "later", "now"} {
		want := []string{"active", "", "scheduled", "pending"}[i]
		if state, err := State(ctx, rdb, "q", id); err != nil || state != want {
			t.Errorf("State(%s) = %q, %v; want %q", id, state, err, want)
		}
	}
	for id, want := range map[string]bool{"expired": true, "nolease": true, "silent": true, "live": false} {
		moved, err := RequeueStranded(ctx, rdb, "q", id, now)
		if err != nil || moved != want {
			t.Errorf("RequeueStranded(%s) = %v, %v; want %v", id, moved, err, want)
		}
		info, err := inspector.GetTaskInfo("q", id)
		if err != nil {
			t.Fatal(err)
		}
		wantState := asynq.TaskStateActive
		if want {
			wantState = asynq.TaskStatePending
		}
		if info.State != wantState {
			t.Errorf("%s is %v after the repair, want %v", id, info.State, wantState)
		}
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
