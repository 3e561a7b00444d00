// Package keys is the names of retryd's own Redis keys that more than one
// package writes or reads: the timer's, the doorbell's, the parked tasks'
// and flow control's. It is a leaf (it imports nothing of retryd but
// internal/partition), so that the packages that talk to Redis (record,
// flow, waiting) share these names without depending on one another. A
// request's own keys stay in internal/record, their only user.
package keys

import "github.com/retryd/retryd/internal/partition"

// Partition is the prefix of every key of the partition (and asynq queue)
// named tag: "{tag}:". The hash tag puts all of them, and the asynq task
// of each request, in one cluster slot, so every script runs within it.
// With one partition the tag is "retryd", the layout before partitions
// existed.
func Partition(tag string) string { return "{" + tag + "}:" }

// Timer is the timer of the partition named tag: the tasks waiting for a
// time, by due time in ms (see internal/waiting/timer).
func Timer(tag string) string { return Partition(tag) + "timer" }

// TimerMover names the worker that moved the partition's due tasks last
// (see internal/waiting/asynqx.MoveDue): the others look less often meanwhile.
func TimerMover(tag string) string { return Partition(tag) + "timer:mover" }

// TimerChannel is where a timer entry earlier than any before is announced.
const TimerChannel = "retryd:timer"

// Parked lists the tasks of the partition named tag just parked for flow
// control, by when (ms), until the timer moves them from asynq's retry set
// to its scheduled set (see internal/waiting/asynqx.HoldParked).
func Parked(tag string) string { return Partition(tag) + "parked" }

// Bell is the workers' doorbell list of the partition (and asynq queue)
// named tag, in its slot (see waiting.Bell).
func Bell(tag string) string { return Partition(tag) + "bell" }

// RingableBell is the workers' doorbell of parts (the first partition's,
// see tasks.NewPartitionedBell) when a script of the partition named tag
// can ring it, being in its cluster slot; else "".
func RingableBell(parts partition.Set, tag string) string {
	if tag != parts.Tag(0) {
		return ""
	}
	return Bell(tag)
}

// Tenants is the set of tenants that ever stored a record, besides
// tenant.Default: the sweeper and an admin's lists go over their indexes.
const Tenants = "{retryd}:tenants"
