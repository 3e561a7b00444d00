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

// dueScript moves the tasks whose timer entries are due: scripts/due.lua.
var dueScript = script("due", "move_waiting")

// dueSeenField is the field of a task's hash where MoveDue notes when it
// first saw the task of its timer entry active, so that the entry's grace
// runs from then, not from a woken mark left by an earlier wake
// (retryd's, not asynq's; the script names it too).
const dueSeenField = "retryd_due_seen"

// Graces are how the moving scripts treat the entry of a task that is
// still active (its handler is returning it to asynq), and how long they
// note who moved; the timer's Tuning sets them.
type Graces struct {
	// Active is how long after MoveDue first saw its task active a timer
	// entry whose task is still active is kept (however old the task's
	// woken mark); ActiveRetry how soon it is looked at again.
	Active, ActiveRetry time.Duration
	// Park is how long a parked task may still be active before its entry
	// is dropped; ParkRetry how soon it is looked at again.
	Park, ParkRetry time.Duration
	// MoverNote is how long the last mover of a timer is remembered.
	MoverNote time.Duration
	// Woken is how long a task's woken mark lasts: a wake that found the
	// task active (on its way to waiting) is read as the task lands
	// within it.
	Woken time.Duration
}

// Due is what MoveDue did.
type Due struct {
	// Moved is how many tasks it moved; First the earliest entry left
	// (zero: none).
	Moved int
	First time.Time
	// Mover is who moved tasks of this timer last, within its note's life (""
	// when nobody did): this caller when Moved > 0.
	Mover string
}

// MoveDue moves the tasks of queue whose entries in timer are due at now
// (at most limit) to pending. When it moved any, it notes me as the
// timer's mover in moverKey, and rings the doorbell at bell unless bell is
// "" (the doorbell is not in the queue's cluster slot: the caller rings).
// A task still active gets its woken mark (see Run), and its entry is kept
// for g.Active after MoveDue first saw it active (noted in dueSeenField
// until the entry leaves the timer).
func MoveDue(ctx context.Context, rdb redis.UniversalClient, queue, timer, moverKey, bell, me string, now time.Time, limit int, g Graces) (Due, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, timer)
	res, err := dueScript.Run(ctx, rdb, []string{timer, k.Pending(), moverKey, bell, k.Retry(), k.Scheduled()}, now.UnixMilli(), limit,
		k.taskPrefix(), now.UnixNano(), g.Active.Milliseconds(), g.ActiveRetry.Milliseconds(), me, g.MoverNote.Milliseconds(), ring,
		g.Woken.Milliseconds()).Slice()
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

// runScript moves one waiting task to pending now: scripts/run.lua.
var runScript = script("run", "move_waiting")

// RunState is what Run found.
type RunState int

// Run's answers.
const (
	Moved   RunState = iota // it waited and is pending now
	Pending                 // runnable already
	Active                  // running, or on its way to waiting: marked woken
	Gone                    // missing, archived or completed: nothing to run
)

// Run makes task id of queue pending now if it waits (retry or scheduled),
// unlike asynq's Inspector.RunTask, which also runs an archived task. A
// move rings the doorbell at bell, unless bell is "" (the caller rings).
// An active task gets its woken mark, in force for woken: a field of its
// hash (WokenField) holding when it was first seen active, which the
// script that sees its park land reads (HoldParked) and clears. asynq's
// own scripts never touch a field they do not know, and the hash goes
// with the task.
func Run(ctx context.Context, rdb redis.UniversalClient, queue, bell, id string, now time.Time, woken time.Duration) (RunState, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, k.Pending())
	state, err := runScript.Run(ctx, rdb, []string{k.Pending(), bell, k.Task(id), k.Retry(), k.Scheduled()},
		id, now.UnixNano(), ring, now.UnixMilli(), woken.Milliseconds()).Text()
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

// runParkedScript moves one parked task to pending now:
// scripts/run_parked.lua.
var runParkedScript = script("run_parked", "move_waiting")

// RunParked makes task id of queue pending now if it sleeps in asynq's
// scheduled set, and says whether it did. Unlike Run, it leaves a retry
// waiting out its backoff alone. A move rings the doorbell at bell, unless
// bell is "" (the caller rings).
func RunParked(ctx context.Context, rdb redis.UniversalClient, queue, bell, id string, now time.Time) (bool, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, k.Pending())
	n, err := runParkedScript.Run(ctx, rdb, []string{k.Pending(), bell, k.Task(id), k.Scheduled()}, id, now.UnixNano(), ring).Int()
	if err != nil {
		return false, fmt.Errorf("run parked task %s of %s: %w", id, queue, err)
	}
	return n == 1, nil
}

// holdScript moves parked tasks from asynq's retry set to its scheduled
// set, or to pending when woken: scripts/hold.lua.
var holdScript = script("hold", "move_waiting")

// ParkMember is the entry of task id parked at (see scripts/hold.lua).
func ParkMember(id string, at time.Time) string {
	return id + "|" + strconv.FormatInt(at.UnixMilli(), 10)
}

// HoldParked moves the parked tasks of queue whose entries in parked are
// due at now (at most limit) from asynq's retry set to its scheduled set,
// or to pending when they were woken on their way (their woken mark in
// force, see Run), and returns when the earliest entry left is due (zero:
// none) and how many it woke. A wake rings the doorbell at bell, unless
// bell is "" (the caller rings).
func HoldParked(ctx context.Context, rdb redis.UniversalClient, queue, parked, bell string, now time.Time, limit int, g Graces) (time.Time, int, error) {
	k := QueueKeys(queue)
	bell, ring := bellArgs(bell, parked)
	res, err := holdScript.Run(ctx, rdb, []string{parked, k.Retry(), k.Scheduled(), k.Pending(), bell}, now.UnixMilli(), limit,
		k.taskPrefix(), g.Park.Milliseconds(), g.ParkRetry.Milliseconds(), g.Woken.Milliseconds(), now.UnixNano(), ring).Slice()
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("hold parked tasks of %s: %w", queue, err)
	}
	first, okFirst := replyInt(res, 0)
	woke, okWoke := replyInt(res, 1)
	if len(res) != 2 || !okFirst || !okWoke || first < -1 || woke < 0 {
		return time.Time{}, 0, fmt.Errorf("hold parked tasks of %s: unexpected reply %v", queue, res)
	}
	if first == -1 {
		return time.Time{}, int(woke), nil
	}
	return time.UnixMilli(first), int(woke), nil
}
