package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// A request waiting for flow control is no retry: asynq (and so the
// dashboard) holds it among the scheduled tasks, with its retry count
// untouched, and it starts once the slot frees.
func TestParkedRequestIsScheduledNotARetry(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	url, g := gaugedServer(t, 3*time.Second)
	first := s.submit(t, fmt.Sprintf(`{"url":%q,"flowControl":{"key":"one-at-a-time","parallelism":1}}`, url+"/a"))
	waitFor(t, 10*time.Second, "the first request to hold the slot", func() bool { return g.now.Load() == 1 })
	second := s.submit(t, fmt.Sprintf(`{"url":%q,"flowControl":{"key":"one-at-a-time","parallelism":1}}`, url+"/b"))
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr})
	defer rdb.Close()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	waitFor(t, 10*time.Second, "the waiting request among asynq's scheduled tasks", func() bool {
		info, err := insp.GetTaskInfo("retryd", second)
		return err == nil && info.State == asynq.TaskStateScheduled
	})
	info, err := insp.GetTaskInfo("retryd", second)
	if err != nil {
		t.Fatal(err)
	}
	if info.Retried != 0 {
		t.Errorf("retry count %d while waiting, want 0 (no attempt failed)", info.Retried)
	}
	if retries, err := insp.ListRetryTasks("retryd"); err != nil || len(retries) != 0 {
		t.Errorf("%d tasks among the retries (%v), want none", len(retries), err)
	}
	if doc := s.get(t, second); doc["waitingFor"] != "parallelism" || doc["nextRetryAt"] != nil {
		t.Errorf("waitingFor %v, nextRetryAt %v, want parallelism and null (a free slot starts it)", doc["waitingFor"], doc["nextRetryAt"])
	}
	for _, id := range []string{first, second} {
		waitFor(t, 20*time.Second, "both requests to complete", func() bool { return s.get(t, id)["status"] == "completed" })
	}
}
