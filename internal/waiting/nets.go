package waiting

// The safety nets the sweeper runs: finding the tasks of a worker that
// died and putting them back to pending, and reading tasks' states to
// find requests that lost theirs.

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/waiting/asynqx"
)

// TaskState is a task's state as the sweeper needs it.
type TaskState = asynqx.TaskState

// TaskStates reads the states of tasks ids of queue (State "" for a
// task that does not exist).
func TaskStates(ctx context.Context, rdb redis.UniversalClient, queue string, ids []string) ([]TaskState, error) {
	return asynqx.TaskStates(ctx, rdb, queue, ids)
}

// Stranded returns the active tasks of queue whose worker is gone (see
// asynqx.Stranded).
func Stranded(ctx context.Context, rdb redis.UniversalClient, queue string, now time.Time) ([]string, error) {
	return asynqx.Stranded(ctx, rdb, queue, now)
}

// RequeueStranded puts stranded task id of queue back to pending, and
// says whether it was still stranded.
func RequeueStranded(ctx context.Context, rdb redis.UniversalClient, queue, id string, now time.Time) (bool, error) {
	return asynqx.RequeueStranded(ctx, rdb, queue, id, now)
}
