// Package asynqx holds everything retryd knows about asynq beyond its
// exported API: the key layout of a queue, the doorbell hook that
// recognises asynq's scripts to wake idle workers, and the reads and the
// repair the sweeper needs (a task's state and lease). Nothing else in
// retryd names an asynq key or script, and only internal/waiting, the
// owner of waiting, imports it. These facts are asynq's private
// implementation, so they are pinned to one asynq version: a test fails
// when the build uses another version, and another when a script the hook
// recognises changes.
package asynqx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Version is the asynq version whose private layout this package knows.
const Version = "v0.26.0"

// Keys are a queue's keys in asynq's layout (asynq internal/base).
type Keys struct{ queue string }

// QueueKeys returns the keys of queue.
func QueueKeys(queue string) Keys { return Keys{queue} }

// namespace begins every key asynq writes (base's "asynq:{qname}:..." and
// its global sets).
const namespace = "asynq:"

// IsKey says whether key is one of asynq's, whatever its queue or kind.
func IsKey(key string) bool { return strings.HasPrefix(key, namespace) }

func (k Keys) prefix() string { return namespace + "{" + k.queue + "}:" }

// taskPrefix is the prefix of the queue's task hashes (Task).
func (k Keys) taskPrefix() string { return k.prefix() + "t:" }

// Pending is the queue's list of pending task ids.
func (k Keys) Pending() string { return k.prefix() + "pending" }

// Active is the queue's list of running task ids.
func (k Keys) Active() string { return k.prefix() + "active" }

// Retry and Scheduled are the queue's sets of task ids waiting to be
// due (by due time, Unix s): a retry's, and an enqueue's with a later
// start.
func (k Keys) Retry() string     { return k.prefix() + "retry" }
func (k Keys) Scheduled() string { return k.prefix() + "scheduled" }

// Lease is the queue's set of running task ids by lease expiry (Unix s).
func (k Keys) Lease() string { return k.prefix() + "lease" }

// WokenField is the field of a task's hash that holds its woken mark
// (retryd's, not asynq's; see Run). The scripts name it too
// (scripts/move_waiting.lua).
const WokenField = "retryd_woken"

// Task is the hash of task id.
func (k Keys) Task(id string) string { return k.taskPrefix() + id }

// NewBell returns the doorbell of queues (the list key, retryd's own, in
// the first queue's slot), to add as a hook to the Redis
// client asynq uses. A worker's bell waits up to wait once every queue came
// back empty; wait 0 makes a bell that only rings (for processes that
// enqueue). With one queue the list is the queue's own bell, in its slot
// (retryd's submission script rings it). With several (partitions on
// Redis Cluster) one BLPOP cannot span their slots, so they share the bell
// of the first queue's name, rung after each enqueue.
func NewBell(rdb redis.UniversalClient, key string, queues []string, wait time.Duration) *Bell {
	b := &Bell{Key: key, Wait: wait, Client: rdb,
		PendingKeys: make(map[string]bool, len(queues))}
	for _, q := range queues {
		b.PendingKeys[QueueKeys(q).Pending()] = true
	}
	return b
}

// TaskState is a task's state as the sweeper needs it.
type TaskState struct {
	// State is asynq's state of the task ("pending", "active", "archived",
	// …), or "" when the task does not exist.
	State string
}

// State is asynq's state of task id of queue ("pending", "active", …), or
// "" when the task does not exist: one HGET, where asynq's Inspector makes
// two calls (the queue's existence, then the task) and takes no context.
func State(ctx context.Context, rdb redis.UniversalClient, queue, id string) (string, error) {
	state, err := rdb.HGet(ctx, QueueKeys(queue).Task(id), "state").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("state of task %s of %s: %w", id, queue, err)
	}
	return state, nil
}

// TaskStates reads the state of the tasks ids of queue (asynq's
// Inspector reads one task per call), as the sweeper's safety net must
// cost little per waiting request. A waiting request's task waits in the
// queue's retry or scheduled set, and asynq writes and deletes a task's
// hash and its place in a set in one script: two ZMSCORE (one command
// each, however many ids) tell those apart, and only the others cost a
// command each (an HGET of their state). Stranded tasks are Stranded's.
func TaskStates(ctx context.Context, rdb redis.UniversalClient, queue string, ids []string) ([]TaskState, error) {
	out := make([]TaskState, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	k := QueueKeys(queue)
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	pipe := rdb.Pipeline()
	sets := []struct {
		state string
		cmd   *redis.Cmd
	}{
		{"retry", pipe.Do(ctx, append([]any{"ZMSCORE", k.Retry()}, members...)...)},
		{"scheduled", pipe.Do(ctx, append([]any{"ZMSCORE", k.Scheduled()}, members...)...)},
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	for _, set := range sets {
		scores, ok := set.cmd.Val().([]any)
		if !ok || len(scores) != len(ids) {
			return nil, fmt.Errorf("ZMSCORE %s: unexpected reply %v", set.state, set.cmd.Val())
		}
		for i, score := range scores {
			if score != nil {
				out[i].State = set.state
			}
		}
	}
	var rest []int
	pipe = rdb.Pipeline()
	states := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		if out[i].State == "" {
			rest = append(rest, i)
			states[i] = pipe.HGet(ctx, k.Task(id), "state")
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for _, i := range rest {
		out[i].State = states[i].Val()
	}
	return out, nil
}

// asynq's leases (internal/rdb.LeaseDuration and the heartbeater's
// interval, pinned by a test): a run's lease is made LeaseDuration long and
// extended to LeaseDuration from now on every heartbeat of its worker.
const (
	LeaseDuration  = 30 * time.Second
	HeartbeatEvery = 5 * time.Second
)

// Silent is how long a lease may go unextended before its worker counts
// as dead: three missed heartbeats. A live worker's leases always end at
// least LeaseDuration - HeartbeatEvery ahead; waiting for the lease's end
// instead would leave a SIGKILLed worker's runs stranded for 30 s.
const Silent = 3 * HeartbeatEvery

// strandedBefore is the lease end below which a run's worker is silent.
func strandedBefore(now time.Time) time.Time { return now.Add(LeaseDuration - Silent) }

// Stranded returns the active tasks of queue whose lease is gone, or has
// not been extended for Silent (whole seconds, as asynq keeps leases):
// tasks of a worker that died. It reads asynq's active list and lease set
// only, so its cost follows the attempts in flight, not the backlog.
func Stranded(ctx context.Context, rdb redis.UniversalClient, queue string, now time.Time) ([]string, error) {
	k := QueueKeys(queue)
	active, err := rdb.LRange(ctx, k.Active(), 0, -1).Result()
	if err != nil || len(active) == 0 {
		return nil, err
	}
	pipe := rdb.Pipeline()
	leases := make([]*redis.FloatCmd, len(active))
	for i, id := range active {
		leases[i] = pipe.ZScore(ctx, k.Lease(), id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []string
	before := strandedBefore(now).Truncate(time.Second)
	for i, id := range active {
		if l := leases[i].Val(); l == 0 || time.Unix(int64(l), 0).Before(before) {
			out = append(out, id)
		}
	}
	return out, nil
}

// requeueStrandedScript moves a stranded task back to pending:
// scripts/requeue_stranded.lua.
var requeueStrandedScript = script("requeue_stranded")

// RequeueStranded puts task id of queue back to pending if it is active
// without a live lease at now (gone, or silent), and reports whether it
// did.
func RequeueStranded(ctx context.Context, rdb redis.UniversalClient, queue, id string, now time.Time) (bool, error) {
	k := QueueKeys(queue)
	moved, err := requeueStrandedScript.Run(ctx, rdb, []string{k.Active(), k.Lease(), k.Pending(), k.Task(id)}, id,
		strandedBefore(now).Unix()).Int()
	return moved == 1, err
}
