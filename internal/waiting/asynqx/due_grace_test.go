package asynqx

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// An entry whose task is still active is kept for the whole grace after
// MoveDue first sees it active, however old the task's woken mark (a wake
// that found it running, still in force): the task is moved as it lands
// within the grace, and only dropped past it. A wait after that, a fresh
// entry, gets a grace of its own.
func TestAStaleWokenMarkDoesNotShortenTheActiveGrace(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	k := QueueKeys("q")
	timer, mover, bell := "{q}:timer", "{q}:timer:mover", "{q}:bell"
	now := time.Now()
	// Woken well before, still in force: the mark is older than the grace.
	stale := now.Add(-(graces.Active + graces.Woken) / 2)
	if now.Sub(stale) <= graces.Active || now.Sub(stale) >= graces.Woken {
		t.Fatalf("the mark is %v old: want it older than the grace %v and within its life %v", now.Sub(stale), graces.Active, graces.Woken)
	}
	for _, id := range []string{"lands", "runs"} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
		strand(t, srv, "q", id, time.Time{})
		pipe := rdb.TxPipeline()
		pipe.HSet(ctx, k.Task(id), WokenField, stale.UnixMilli())
		pipe.ZAdd(ctx, timer, redis.Z{Score: float64(now.Add(-time.Millisecond).UnixMilli()), Member: id})
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	look := func(at time.Time, wantMoved int) {
		t.Helper()
		if d, err := MoveDue(ctx, rdb, "q", timer, mover, bell, "w1", at, 100, graces); err != nil || d.Moved != wantMoved {
			t.Fatalf("MoveDue at +%v = %+v, %v; want %d moved", at.Sub(now), d, err, wantMoved)
		}
	}
	inTimer := func(id string) bool {
		t.Helper()
		_, err := rdb.ZScore(ctx, timer, id).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return err == nil
	}
	// dueOf is when the entry of id is due: a look then sees it.
	dueOf := func(id string) time.Time {
		t.Helper()
		ms, err := rdb.ZScore(ctx, timer, id).Result()
		if err != nil {
			t.Fatalf("entry of %s: %v", id, err)
		}
		return time.UnixMilli(int64(ms))
	}
	// lastLooks are the looks of an entry first seen active at from, up to
	// the last within its grace.
	lastLooks := func(from time.Time) []time.Time {
		return []time.Time{from, from.Add(graces.Active / 2), from.Add(graces.Active - graces.ActiveRetry - time.Millisecond),
			from.Add(graces.Active - time.Millisecond)}
	}
	seenNote := func(id string) bool {
		t.Helper()
		n, err := rdb.HExists(ctx, k.Task(id), dueSeenField).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Both still active through the grace: kept, looked at again soon.
	looks := lastLooks(now)
	for _, at := range looks[:len(looks)-1] {
		look(at, 0)
		for _, id := range []string{"lands", "runs"} {
			if !inTimer(id) {
				t.Fatalf("%s dropped at +%v, within the grace %v after it was first seen active", id, at.Sub(now), graces.Active)
			}
		}
	}
	if mark, err := rdb.HGet(ctx, k.Task("runs"), WokenField).Int64(); err != nil || mark != stale.UnixMilli() {
		t.Errorf("woken mark %d (%v), want the first wake's %d kept", mark, err, stale.UnixMilli())
	}
	// One lands within the grace (asynq's side of a retry): moved at once.
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Active(), 0, "lands")
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(now.Add(time.Hour).Unix()), Member: "lands"})
	pipe.HSet(ctx, k.Task("lands"), "state", "retry")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	look(looks[len(looks)-1], 1)
	if got := state(t, inspector, "q", "lands"); got != asynq.TaskStatePending {
		t.Errorf("lands: %v, want pending", got)
	}
	if !inTimer("runs") {
		t.Fatalf("runs dropped %v after it was first seen active, within the grace", graces.Active-time.Millisecond)
	}
	// The other, still active past the grace, runs: dropped.
	look(dueOf("runs"), 0)
	for _, id := range []string{"lands", "runs"} {
		if inTimer(id) || seenNote(id) {
			t.Errorf("%s: in the timer %v, first-seen note left %v; want neither once it left the timer", id, inTimer(id), seenNote(id))
		}
	}

	// A new wait of the moved task: it runs again and its next entry comes
	// due while it is on its way back. Its grace starts at this look.
	later := now.Add(time.Minute)
	strand(t, srv, "q", "lands", time.Time{})
	if err := rdb.ZAdd(ctx, timer, redis.Z{Score: float64(later.UnixMilli()), Member: "lands"}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, at := range lastLooks(later) {
		look(at, 0)
		if !inTimer("lands") {
			t.Fatalf("the new entry was dropped %v after its first look, within its own grace", at.Sub(later))
		}
	}
	look(dueOf("lands"), 0)
	if inTimer("lands") {
		t.Errorf("the new entry is kept past its grace")
	}

	// An entry set again while MoveDue looks at the old one (the task ran
	// and a new wait began) is a new wait too: the first look's time does
	// not carry over.
	first := later.Add(time.Minute)
	if err := rdb.ZAdd(ctx, timer, redis.Z{Score: float64(first.UnixMilli()), Member: "runs"}).Err(); err != nil {
		t.Fatal(err)
	}
	look(first, 0)
	again := first.Add(graces.Active / 2)
	if err := rdb.ZAdd(ctx, timer, redis.Z{Score: float64(again.UnixMilli()), Member: "runs"}).Err(); err != nil {
		t.Fatal(err)
	}
	look(again, 0)
	look(again.Add(graces.Active-time.Millisecond), 0)
	if !inTimer("runs") {
		t.Errorf("an entry set again was dropped %v after its first look, within its grace %v", graces.Active-time.Millisecond, graces.Active)
	}
}
