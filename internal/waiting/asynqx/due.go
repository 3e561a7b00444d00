package asynqx

// Moving waiting tasks to pending at retryd's own times. asynq keeps a
// retry's or a scheduled task's due time in whole seconds and forwards due
// tasks on a poll; retryd's timer (internal/waiting/timer) knows the exact
// millisecond and moves the task itself. Only a task that waits (asynq's
// retry or scheduled state) is moved: an archived task run again would be
// the dashboard's redrive, and an active or pending one is on its way
// already.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// moveWaiting is the part the moving scripts share: move moves task id
// (its hash at task, asynq's zsets under prefix) from retry or scheduled to
// pending and answers its state before the move; ring rings the doorbell
// at bell when on is "1" (see bellArgs).
const moveWaiting = `
local function ring(bell, on)
  if on == "1" and redis.call("LLEN", bell) == 0 then
    redis.call("RPUSH", bell, "1")
  end
end
local function move(prefix, pending, id, nowNs)
  local task = prefix .. "t:" .. id
  local state = redis.call("HGET", task, "state")
  if state == "retry" or state == "scheduled" then
    redis.call("ZREM", prefix .. state, id)
    redis.call("LPUSH", pending, id)
    redis.call("HSET", task, "state", "pending", "pending_since", nowNs)
  end
  return state
end
`

// dueScript moves the tasks whose timer entries are due.
//
// KEYS[1] the timer (member: task id, score: due ms), KEYS[2] asynq's
// pending list, KEYS[3] the timer's mover note (a string), KEYS[4] the
// doorbell, rung when it moved any if ARGV[9] is "1". ARGV[1] now
// (ms), ARGV[2] at most this many entries, ARGV[3] asynq's key prefix of
// the queue, ARGV[4] now (ns, asynq's pending_since), ARGV[5] how long past
// its due time an entry whose task is still active is looked at again
// (ms), ARGV[6] how soon (ms), ARGV[7] who moves (noted in KEYS[3] when it
// moved any, for ARGV[8] ms).
// An active task is one whose handler has just returned and that asynq is
// about to put in its retry set: its entry is kept a little longer.
// Returns {moved, the earliest entry left (ms) or -1, the last mover
// within its note's life or ""}.
var dueScript = redis.NewScript(moveWaiting + `
local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "WITHSCORES", "LIMIT", 0, tonumber(ARGV[2]))
local moved = 0
for i = 1, #due, 2 do
  local id, at = due[i], tonumber(due[i + 1])
  local state = move(ARGV[3], KEYS[2], id, ARGV[4])
  if state == "retry" or state == "scheduled" then
    moved = moved + 1
    redis.call("ZREM", KEYS[1], id)
  elseif state == "active" and now - at < tonumber(ARGV[5]) then
    redis.call("ZADD", KEYS[1], now + tonumber(ARGV[6]), id)
  else
    redis.call("ZREM", KEYS[1], id)
  end
end
if moved > 0 then
  redis.call("SET", KEYS[3], ARGV[7], "PX", ARGV[8])
  ring(KEYS[4], ARGV[9])
end
local mover = redis.call("GET", KEYS[3]) or ""
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if #first == 0 then return {moved, -1, mover} end
return {moved, tonumber(first[2]), mover}
`)

// Due tuning.
const (
	// ActiveGrace is how long past its due time an entry whose task is
	// still active is kept; ActiveRetry how soon it is looked at again.
	ActiveGrace = 2 * time.Second
	ActiveRetry = 5 * time.Millisecond
	// ParkGrace is how long a parked task may still be active before its
	// entry is dropped: its handler has returned, asynq moves it within
	// milliseconds, and a task still active later was woken and runs.
	ParkGrace = 250 * time.Millisecond
	// ParkDelay is how long after a park its entry is first looked at
	// (asynq moves the task within it, mostly); ParkRetry how soon an
	// entry whose task is still active is looked at again.
	ParkDelay = 3 * time.Millisecond
	ParkRetry = 25 * time.Millisecond
)

// Due is what MoveDue did.
type Due struct {
	// Moved is how many tasks it moved; First the earliest entry left
	// (zero: none).
	Moved int
	First time.Time
	// Mover is who moved tasks of this timer last, within MoverNote (""
	// when nobody did): this caller when Moved > 0.
	Mover string
}

// MoverNote is how long the last mover of a timer is remembered.
const MoverNote = 2 * time.Second

// MoveDue moves the tasks of queue whose entries in timer are due at now
// (at most limit) to pending. When it moved any, it notes me as the
// timer's mover in moverKey, and rings the doorbell at bell unless bell is
// "" (the doorbell is not in the queue's cluster slot: the caller rings).
func MoveDue(ctx context.Context, rdb redis.UniversalClient, queue, timer, moverKey, bell, me string, now time.Time, limit int) (Due, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, timer)
	res, err := dueScript.Run(ctx, rdb, []string{timer, k.Pending(), moverKey, bell}, now.UnixMilli(), limit, k.prefix(), now.UnixNano(),
		ActiveGrace.Milliseconds(), ActiveRetry.Milliseconds(), me, MoverNote.Milliseconds(), ring).Slice()
	if err != nil {
		return Due{}, fmt.Errorf("move due tasks of %s: %w", queue, err)
	}
	moved, okMoved := replyInt(res, 0)
	first, okFirst := replyInt(res, 1)
	var mover string
	okMover := len(res) == 3
	if okMover {
		mover, okMover = res[2].(string)
	}
	if !okMoved || !okFirst || !okMover || moved < 0 || first < -1 {
		return Due{}, fmt.Errorf("move due tasks of %s: unexpected reply %v", queue, res)
	}
	d := Due{Moved: int(moved), Mover: mover}
	if first >= 0 {
		d.First = time.UnixMilli(first)
	}
	return d, nil
}

// bellArgs are the key and flag that make a script ring the doorbell at
// bell, or not when bell is "" (the doorbell is in another cluster slot):
// then the key is other, a key of the script's slot, never written.
func bellArgs(bell, other string) (key, on string) {
	if bell == "" {
		return other, "0"
	}
	return bell, "1"
}

// replyInt is element i of a script's reply, if it is an integer.
func replyInt(res []any, i int) (int64, bool) {
	if i >= len(res) {
		return 0, false
	}
	n, ok := res[i].(int64)
	return n, ok
}

// runScript moves one waiting task to pending now.
//
// KEYS[1] asynq's pending list, KEYS[2] the doorbell. ARGV[1] task id,
// ARGV[2] asynq's key prefix of the queue, ARGV[3] now (ns), ARGV[4] "1"
// to ring the doorbell after a move. Returns the task's state before: ""
// when it does not exist.
var runScript = redis.NewScript(moveWaiting + `
local state = move(ARGV[2], KEYS[1], ARGV[1], ARGV[3])
if state == "retry" or state == "scheduled" then ring(KEYS[2], ARGV[4]) end
return state or ""
`)

// RunState is what Run found.
type RunState int

// Run's answers.
const (
	Moved   RunState = iota // it waited and is pending now
	Pending                 // runnable already
	Active                  // running, or on its way to waiting
	Gone                    // missing, archived or completed: nothing to run
)

// Run makes task id of queue pending now if it waits (retry or scheduled),
// unlike asynq's Inspector.RunTask, which also runs an archived task. A
// move rings the doorbell at bell, unless bell is "" (the caller rings).
func Run(ctx context.Context, rdb redis.UniversalClient, queue, bell, id string, now time.Time) (RunState, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, k.Pending())
	state, err := runScript.Run(ctx, rdb, []string{k.Pending(), bell}, id, k.prefix(), now.UnixNano(), ring).Text()
	if err != nil {
		return 0, fmt.Errorf("run task %s of %s: %w", id, queue, err)
	}
	switch state {
	case "retry", "scheduled":
		return Moved, nil
	case "pending":
		return Pending, nil
	case "active":
		return Active, nil
	case "", "archived", "completed":
		return Gone, nil
	}
	return 0, fmt.Errorf("run task %s of %s: unexpected state %q", id, queue, state)
}

// runParkedScript moves one task to pending now if it sleeps in asynq's
// scheduled set: where a parked request sleeps (HoldParked), and never a
// retry's backoff.
//
// KEYS[1] asynq's pending list, KEYS[2] the doorbell. ARGV[1] task id,
// ARGV[2] asynq's key prefix of the queue, ARGV[3] now (ns), ARGV[4] "1"
// to ring the doorbell after a move. Returns 1 if it moved the task.
var runParkedScript = redis.NewScript(moveWaiting + `
if redis.call("HGET", ARGV[2] .. "t:" .. ARGV[1], "state") ~= "scheduled" then return 0 end
move(ARGV[2], KEYS[1], ARGV[1], ARGV[3])
ring(KEYS[2], ARGV[4])
return 1
`)

// RunParked makes task id of queue pending now if it sleeps in asynq's
// scheduled set, and says whether it did. Unlike Run, it leaves a retry
// waiting out its backoff alone. A move rings the doorbell at bell, unless
// bell is "" (the caller rings).
func RunParked(ctx context.Context, rdb redis.UniversalClient, queue, bell, id string, now time.Time) (bool, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, k.Pending())
	n, err := runParkedScript.Run(ctx, rdb, []string{k.Pending(), bell}, id, k.prefix(), now.UnixNano(), ring).Int()
	if err != nil {
		return false, fmt.Errorf("run parked task %s of %s: %w", id, queue, err)
	}
	return n == 1, nil
}

// holdScript moves parked tasks from asynq's retry set to its scheduled
// set, at the same due time: a request waiting for flow control is not a
// retry (no attempt failed), and the dashboard must not show it as one.
//
// KEYS[1] the parked tasks (member: "<task id>|<when parked, ms>", score:
// when to look, ms). ARGV[1] now (ms), ARGV[2] at most this many, ARGV[3]
// asynq's key prefix of the queue, ARGV[4] how long a parked task may still
// be active (its handler is returning it to asynq) before its entry is
// dropped (ms), ARGV[5] how soon such an entry is looked at again (ms).
// Returns the earliest entry left (ms), or -1.
var holdScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
  local sep = string.find(member, "|", 1, true)
  local id, at = member, now
  if sep then
    id, at = string.sub(member, 1, sep - 1), tonumber(string.sub(member, sep + 1)) or now
  end
  local task = ARGV[3] .. "t:" .. id
  local state = redis.call("HGET", task, "state")
  if state == "retry" then
    local score = redis.call("ZSCORE", ARGV[3] .. "retry", id)
    redis.call("ZREM", ARGV[3] .. "retry", id)
    redis.call("ZADD", ARGV[3] .. "scheduled", score, id)
    redis.call("HSET", task, "state", "scheduled")
    redis.call("ZREM", KEYS[1], member)
  elseif state == "active" and now - at < tonumber(ARGV[4]) then
    redis.call("ZADD", KEYS[1], now + tonumber(ARGV[5]), member)
  else
    redis.call("ZREM", KEYS[1], member)
  end
end
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if #first == 0 then return -1 end
return tonumber(first[2])
`)

// ParkMember is the entry of task id parked at (see holdScript).
func ParkMember(id string, at time.Time) string {
	return id + "|" + strconv.FormatInt(at.UnixMilli(), 10)
}

// HoldParked moves the parked tasks of queue whose entries in parked are
// due at now (at most limit) from asynq's retry set to its scheduled set,
// and returns when the earliest entry left is due (zero: none).
func HoldParked(ctx context.Context, rdb redis.UniversalClient, queue, parked string, now time.Time, limit int) (time.Time, error) {
	k := QueueKeys(queue)
	first, err := holdScript.Run(ctx, rdb, []string{parked}, now.UnixMilli(), limit, k.prefix(), ParkGrace.Milliseconds(),
		ParkRetry.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("hold parked tasks of %s: %w", queue, err)
	}
	if first < -1 {
		return time.Time{}, fmt.Errorf("hold parked tasks of %s: unexpected reply %d", queue, first)
	}
	if first == -1 {
		return time.Time{}, nil
	}
	return time.UnixMilli(first), nil
}
