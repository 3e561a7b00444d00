package asynqx

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// graces are the scripts' graces in these tests: distinct values, so a
// script that reads the wrong ARGV shows.
var graces = Graces{Active: 2 * time.Second, ActiveRetry: 5 * time.Millisecond, Park: 250 * time.Millisecond,
	ParkRetry: 25 * time.Millisecond, MoverNote: 3 * time.Second, Woken: 7 * time.Second}

func state(t *testing.T, inspector *asynq.Inspector, queue, id string) asynq.TaskState {
	t.Helper()
	info, err := inspector.GetTaskInfo(queue, id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return info.State
}

// MoveDue moves exactly the waiting tasks whose entries are due: a
// scheduled and a retry task; an archived task (running it would be a
// redrive) and an entry of a missing task are dropped; an active task's
// entry is kept a little while (its handler is returning it to asynq), and
// an entry not due yet stays. The mover is noted when it moved any.
func TestMoveDueMovesOnlyWaitingTasksThatAreDue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	now := time.Now()
	later := now.Add(time.Hour)
	for _, id := range []string{"scheduled", "retry", "archived", "active", "notdue"} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID(id), asynq.ProcessAt(later)); err != nil {
			t.Fatal(err)
		}
	}
	k := QueueKeys("q")
	// retry and archived: moved by hand the way asynq's Retry and Archive do.
	pipe := rdb.TxPipeline()
	pipe.ZRem(ctx, k.prefix()+"scheduled", "retry", "archived", "active")
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(later.Unix()), Member: "retry"})
	pipe.HSet(ctx, k.Task("retry"), "state", "retry")
	pipe.ZAdd(ctx, k.prefix()+"archived", redis.Z{Score: float64(now.Unix()), Member: "archived"})
	pipe.HSet(ctx, k.Task("archived"), "state", "archived")
	pipe.LPush(ctx, k.Active(), "active")
	pipe.HSet(ctx, k.Task("active"), "state", "active")
	timer := "{q}:timer"
	for _, id := range []string{"scheduled", "retry", "archived", "active", "missing"} {
		pipe.ZAdd(ctx, timer, redis.Z{Score: float64(now.Add(-time.Millisecond).UnixMilli()), Member: id})
	}
	pipe.ZAdd(ctx, timer, redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "notdue"})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	mover := "{q}:timer:mover"
	bell := "{q}:bell"
	d, err := MoveDue(ctx, rdb, "q", timer, mover, bell, "w1", now, 100, graces)
	if err != nil || d.Moved != 2 || d.Mover != "w1" {
		t.Fatalf("MoveDue = %+v, %v; want 2 moved by w1", d, err)
	}
	if tokens, err := rdb.LLen(ctx, bell).Result(); err != nil || tokens != 1 {
		t.Errorf("doorbell holds %d tokens (%v) after the move, want 1", tokens, err)
	}
	next := d.First
	for id, want := range map[string]asynq.TaskState{"scheduled": asynq.TaskStatePending, "retry": asynq.TaskStatePending,
		"archived": asynq.TaskStateArchived, "active": asynq.TaskStateActive, "notdue": asynq.TaskStateScheduled} {
		if got := state(t, inspector, "q", id); got != want {
			t.Errorf("%s: state %v, want %v", id, got, want)
		}
	}
	left, err := rdb.ZRangeWithScores(ctx, timer, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Member != "active" || left[1].Member != "notdue" {
		t.Fatalf("entries left %v, want active (looked at again soon) and notdue", left)
	}
	if want := now.Add(graces.ActiveRetry).UnixMilli(); int64(left[0].Score) != want || next.UnixMilli() != want {
		t.Errorf("active entry at %v, next %v; want both %d", left[0].Score, next.UnixMilli(), want)
	}
	// The active task is marked woken, as first seen active then; looks
	// within the grace keep that time.
	if first, err := rdb.HGet(ctx, k.Task("active"), WokenField).Int64(); err != nil || first != now.UnixMilli() {
		t.Errorf("woken mark of the active task = %d, %v; want %d", first, err, now.UnixMilli())
	}
	if _, err := MoveDue(ctx, rdb, "q", timer, mover, bell, "w1", now.Add(graces.Active/2), 100, graces); err != nil {
		t.Fatal(err)
	}
	if first, err := rdb.HGet(ctx, k.Task("active"), WokenField).Int64(); err != nil || first != now.UnixMilli() {
		t.Errorf("woken mark after a second look = %d, %v; want still %d", first, err, now.UnixMilli())
	}
	// Past the grace, an entry whose task is still active is dropped.
	// Another worker that moves nothing learns who moves; the note lives
	// graces.MoverNote.
	d, err = MoveDue(ctx, rdb, "q", timer, mover, bell, "w2", now.Add(graces.Active+time.Second), 100, graces)
	if err != nil || d.Moved != 0 || d.Mover != "w1" {
		t.Fatalf("MoveDue by w2 = %+v, %v; want nothing moved, mover w1", d, err)
	}
	if ttl, err := rdb.PTTL(ctx, mover).Result(); err != nil || ttl <= 0 || ttl > graces.MoverNote {
		t.Errorf("mover note lives %v (%v), want at most %v", ttl, err, graces.MoverNote)
	}
	if left, _ := rdb.ZRange(ctx, timer, 0, -1).Result(); len(left) != 1 || left[0] != "notdue" {
		t.Errorf("entries left %v, want notdue only", left)
	}
	rdb.ZRem(ctx, timer, "notdue")
	if tokens, err := rdb.LLen(ctx, bell).Result(); err != nil || tokens != 1 {
		t.Errorf("doorbell holds %d tokens (%v) after moves of nothing, want still 1", tokens, err)
	}
	rdb.Del(ctx, mover)
	if d, err := MoveDue(ctx, rdb, "q", timer, mover, "", "w1", now, 100, graces); err != nil || d.Moved != 0 || !d.First.IsZero() || d.Mover != "" {
		t.Errorf("empty timer: MoveDue = %+v, %v", d, err)
	}
}

// Run moves a waiting task and reports every other state; it never runs
// an archived task (asynq's RunTask does). Only a move rings the doorbell.
func TestRunMovesOnlyWaitingTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("later"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("now")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("dead"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := inspector.ArchiveTask("q", "dead"); err != nil {
		t.Fatal(err)
	}
	bell := "{q}:bell"
	for _, c := range []struct {
		id    string
		want  RunState
		rings int64
	}{{"now", Pending, 0}, {"dead", Gone, 0}, {"missing", Gone, 0}, {"later", Moved, 1}} {
		if got, err := Run(ctx, rdb, "q", bell, c.id, time.Now(), graces.Woken); err != nil || got != c.want {
			t.Errorf("Run(%s) = %v, %v; want %v", c.id, got, err, c.want)
		}
		if tokens, err := rdb.LLen(ctx, bell).Result(); err != nil || tokens != c.rings {
			t.Errorf("after Run(%s): %d tokens on the doorbell (%v), want %d", c.id, tokens, err, c.rings)
		}
	}
	if got := state(t, inspector, "q", "later"); got != asynq.TaskStatePending {
		t.Errorf("later: %v, want pending", got)
	}
	if got := state(t, inspector, "q", "dead"); got != asynq.TaskStateArchived {
		t.Errorf("dead: %v, want archived (not run)", got)
	}
	for _, id := range []string{"now", "dead", "missing", "later"} {
		if n, err := rdb.HExists(ctx, QueueKeys("q").Task(id), WokenField).Result(); err != nil || n {
			t.Errorf("a woken mark (%v) on %s, not active; want none", err, id)
		}
	}
}

// A wake that finds its task active (its park on its way to asynq) is not
// lost: Run leaves the task's woken mark, and HoldParked, seeing the park
// land, starts the task at once (pending, the doorbell rung) instead of
// holding it; it keeps looking past the park's grace while the mark lasts.
func TestWakeOfAParkInTransitStartsItAsItLands(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("w")); err != nil {
		t.Fatal(err)
	}
	k := QueueKeys("q")
	now := time.Now()
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Pending(), 0, "w")
	pipe.LPush(ctx, k.Active(), "w")
	pipe.HSet(ctx, k.Task("w"), "state", "active")
	pipe.ZAdd(ctx, "{q}:parked", redis.Z{Score: float64(now.UnixMilli()), Member: ParkMember("w", now)})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	bell := "{q}:bell"
	if got, err := Run(ctx, rdb, "q", bell, "w", now, graces.Woken); err != nil || got != Active {
		t.Fatalf("Run of a task in transit = %v, %v; want Active", got, err)
	}
	if at, err := rdb.HGet(ctx, k.Task("w"), WokenField).Int64(); err != nil || at != now.UnixMilli() {
		t.Fatalf("woken mark %d (%v), want %d", at, err, now.UnixMilli())
	}
	// Past the park's grace, still on its way: looked at again, not dropped.
	late := now.Add(graces.Park + time.Second)
	next, woke, err := HoldParked(ctx, rdb, "q", "{q}:parked", bell, late, 100, graces)
	if err != nil || woke != 0 || next.UnixMilli() != late.Add(graces.ParkRetry).UnixMilli() {
		t.Fatalf("HoldParked in transit = %v, %d, %v; want looked at again at %v", next, woke, err, late.Add(graces.ParkRetry))
	}
	// asynq's side of the park: the run ends, the task is a retry.
	pipe = rdb.TxPipeline()
	pipe.LRem(ctx, k.Active(), 0, "w")
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(now.Add(5 * time.Minute).Unix()), Member: "w"})
	pipe.HSet(ctx, k.Task("w"), "state", "retry")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	next, woke, err = HoldParked(ctx, rdb, "q", "{q}:parked", bell, late.Add(graces.ParkRetry), 100, graces)
	if err != nil || woke != 1 || !next.IsZero() {
		t.Fatalf("HoldParked as it landed = %v, %d, %v; want it woken, no entry left", next, woke, err)
	}
	if got := state(t, inspector, "q", "w"); got != asynq.TaskStatePending {
		t.Errorf("the woken task: %v, want pending", got)
	}
	if tokens, err := rdb.LLen(ctx, bell).Result(); err != nil || tokens != 1 {
		t.Errorf("%d tokens on the doorbell (%v), want 1", tokens, err)
	}
	if n, err := rdb.HExists(ctx, k.Task("w"), WokenField).Result(); err != nil || n {
		t.Errorf("woken mark left after it was read (%v)", err)
	}
}

// RunParked wakes a task sleeping in the scheduled set (a park) and
// leaves a retry waiting out its backoff, a pending task and a missing one.
func TestRunParkedLeavesRetriesAlone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	for _, id := range []string{"parked", "backoff"} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID(id), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID("now")); err != nil {
		t.Fatal(err)
	}
	k := QueueKeys("q")
	pipe := rdb.TxPipeline()
	pipe.ZRem(ctx, k.Scheduled(), "backoff")
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(time.Now().Add(time.Hour).Unix()), Member: "backoff"})
	pipe.HSet(ctx, k.Task("backoff"), "state", "retry")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"parked": true, "backoff": false, "now": false, "missing": false} {
		if got, err := RunParked(ctx, rdb, "q", "{q}:bell", id, time.Now()); err != nil || got != want {
			t.Errorf("RunParked(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	if tokens, err := rdb.LLen(ctx, "{q}:bell").Result(); err != nil || tokens != 1 {
		t.Errorf("%d tokens on the doorbell (%v) after one move, want 1", tokens, err)
	}
	if got := state(t, inspector, "q", "parked"); got != asynq.TaskStatePending {
		t.Errorf("parked: %v, want pending", got)
	}
	if got := state(t, inspector, "q", "backoff"); got != asynq.TaskStateRetry {
		t.Errorf("backoff: %v, want still a retry", got)
	}
}

// HoldParked moves a parked task from the retry set to the scheduled set
// at the same due time, looks again soon at one still active (on its way)
// and drops the others; an entry not due yet waits.
func TestHoldParkedMovesParkedTasksOutOfTheRetries(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	now := time.Now()
	due := now.Add(5 * time.Minute).Unix()
	for _, id := range []string{"parked", "onitsway", "pending"} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("q"), asynq.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	k := QueueKeys("q")
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, k.Pending(), 0, "parked")
	pipe.LRem(ctx, k.Pending(), 0, "onitsway")
	pipe.ZAdd(ctx, k.Retry(), redis.Z{Score: float64(due), Member: "parked"})
	pipe.HSet(ctx, k.Task("parked"), "state", "retry")
	pipe.LPush(ctx, k.Active(), "onitsway")
	pipe.HSet(ctx, k.Task("onitsway"), "state", "active")
	for _, id := range []string{"parked", "onitsway", "pending", "missing"} {
		pipe.ZAdd(ctx, "{q}:parked", redis.Z{Score: float64(now.UnixMilli()), Member: ParkMember(id, now)})
	}
	pipe.ZAdd(ctx, "{q}:parked", redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: ParkMember("later", now)})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := TaskStates(ctx, rdb, "q", []string{"parked", "onitsway"}); err != nil || st[0].State != "retry" || st[1].State != "active" {
		t.Errorf("TaskStates = %+v, %v; want retry, active", st, err)
	}
	next, _, err := HoldParked(ctx, rdb, "q", "{q}:parked", "{q}:bell", now, 100, graces)
	if err != nil || next.UnixMilli() != now.Add(graces.ParkRetry).UnixMilli() {
		t.Fatalf("HoldParked = %v, %v; want the active one's next look, %v", next, err, now.Add(graces.ParkRetry))
	}
	info, err := inspector.GetTaskInfo("q", "parked")
	if err != nil || info.State != asynq.TaskStateScheduled || info.NextProcessAt.Unix() != due {
		t.Errorf("parked: %+v, %v; want scheduled, due at %d", info, err, due)
	}
	if retries, _ := inspector.ListRetryTasks("q"); len(retries) != 0 {
		t.Errorf("%d tasks among the retries, want none", len(retries))
	}
	if got := state(t, inspector, "q", "pending"); got != asynq.TaskStatePending {
		t.Errorf("pending: %v", got)
	}
	// Past the grace, a task still active was woken and runs: dropped.
	next, _, err = HoldParked(ctx, rdb, "q", "{q}:parked", "{q}:bell", now.Add(graces.Park), 100, graces)
	if err != nil || next.UnixMilli() != now.Add(time.Hour).UnixMilli() {
		t.Errorf("after the grace: HoldParked = %v, %v; want only the later entry left", next, err)
	}
}
