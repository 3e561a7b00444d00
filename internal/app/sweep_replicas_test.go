package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/tasks"
)

// Under REDIS_WAIT_REPLICAS the sweeper hands a record it found without a
// task to the workers only once the replicas hold it: while the replica
// is stopped the enqueue is refused and makes no task; once it is back,
// the task is made.
func TestSweeperEnqueuesOnlyWhatTheReplicasHold(t *testing.T) {
	t.Parallel()
	master := redistest.StartServer(t, redistest.Options{})
	replica := redistest.StartReplica(t, master)
	rdb := master.Client()
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	q := confirmingQueue{Enqueuer: &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: inspector, Parts: partition.One()},
		rdb: rdb, replicas: 1, wait: 200 * time.Millisecond}
	ctx := context.Background()
	// The replica first syncs with its primary.
	deadline := time.Now().Add(30 * time.Second)
	for record.Confirm(ctx, rdb, 1, 200*time.Millisecond) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not confirm a write within 30 s")
		}
	}

	resume := replica.Pause(t)
	const id = "01m8mhyychtfy2pdj6g1"
	err := q.Enqueue(ctx, id, time.Now(), time.Second, 3)
	if !errors.Is(err, record.ErrChangeNotReplicated) {
		t.Errorf("enqueue while no replica confirms: %v; want ErrChangeNotReplicated", err)
	}
	if info, err := inspector.GetTaskInfo(tasks.Queue, id); !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
		t.Errorf("a record no replica holds got a task: %+v %v", info, err)
	}

	resume()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err = q.Enqueue(ctx, id, time.Now(), time.Second, 3); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("enqueue once the replica is back: %v", err)
	}
	if _, err := inspector.GetTaskInfo(tasks.Queue, id); err != nil {
		t.Errorf("the confirmed record has no task: %v", err)
	}
}
