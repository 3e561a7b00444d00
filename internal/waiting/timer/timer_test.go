package timer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

type countingBell struct{ rings atomic.Int64 }

func (b *countingBell) Ring(context.Context) error { b.rings.Add(1); return nil }

var names = Names{Timer: func(q string) string { return "{" + q + "}:timer" }, Parked: func(q string) string { return "{" + q + "}:parked" },
	Mover:   func(q string) string { return "{" + q + "}:timer:mover" },
	Channel: "test:timer"}

// A task whose entry another process adds (earlier than anything the
// running timer sleeps towards) becomes pending at its due time, never
// more than Early before, long before asynq's own due time, and the doorbell is rung.
func TestTimerStartsTasksAtTheirEntryNotAsynqsTime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	queues := []string{"p0", "p1"}

	bell := &countingBell{}
	running := New(rdb, queues, names, bell, log, Tuning{})
	done := make(chan struct{})
	go func() { defer close(done); running.Run(ctx) }()
	defer func() { cancel(); <-done }()
	adder := New(rdb, queues, names, nil, log, Tuning{})

	// Something far away first, so the running timer sleeps long.
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("p0"), asynq.TaskID("far"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := adder.At(ctx, "p0", "far", time.Now().Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("p1"), asynq.TaskID("soon"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(300 * time.Millisecond)
	if err := adder.At(ctx, "p1", "soon", due); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := inspector.GetTaskInfo("p1", "soon")
		if err != nil {
			t.Fatal(err)
		}
		if info.State == asynq.TaskStatePending {
			break
		}
		if time.Now().Before(due.Add(-DefaultTuning.Early)) && info.State != asynq.TaskStateScheduled {
			t.Fatalf("state %v before its due time", info.State)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task is still %v 10 s after its due time", info.State)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if now := time.Now(); now.Before(due.Add(-DefaultTuning.Early)) {
		t.Errorf("pending %v before its due time, more than Early", due.Sub(now))
	}
	// The ring follows the move (once every queue was looked at).
	for bell.rings.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the doorbell was never rung")
		}
		time.Sleep(time.Millisecond)
	}
	info, err := inspector.GetTaskInfo("p0", "far")
	if err != nil || info.State != asynq.TaskStateScheduled {
		t.Errorf("far: %v, %v; want still scheduled", info, err)
	}
}

// countingHook counts the scripts a client runs.
type countingHook struct{ scripts atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.scripts.Add(1)
		}
		return next(ctx, cmd)
	}
}

// Of two workers' timers on one partition, one follows its entries and
// the other looks about once per MaxSleep; when the follower stops, the
// other moves what comes due within MaxSleep.
func TestOneTimerFollowsAPartition(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	queues := []string{"p0"}
	adder := New(rdb, queues, names, nil, log, Tuning{})
	add := func(id string, due time.Time) {
		t.Helper()
		if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("p0"), asynq.TaskID(id), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := adder.At(ctx, "p0", id, due); err != nil {
			t.Fatal(err)
		}
	}
	waitPending := func(id string, by time.Time) {
		t.Helper()
		for {
			info, err := inspector.GetTaskInfo("p0", id)
			if err != nil {
				t.Fatal(err)
			}
			if info.State == asynq.TaskStatePending {
				return
			}
			if time.Now().After(by) {
				t.Fatalf("%s is still %v at %v", id, info.State, by)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Far enough apart that a worker late by a look under load does not
	// take the next entry too.
	const entries, gap = 20, 150 * time.Millisecond
	start := time.Now().Add(300 * time.Millisecond)
	for i := range entries {
		add(fmt.Sprintf("e%d", i), start.Add(time.Duration(i)*gap))
	}

	type worker struct {
		hook   *countingHook
		cancel context.CancelFunc
		done   chan struct{}
	}
	workers := make([]*worker, 2)
	for i := range workers {
		c := srv.Client()
		w := &worker{hook: &countingHook{}, done: make(chan struct{})}
		c.AddHook(w.hook)
		var wctx context.Context
		wctx, w.cancel = context.WithCancel(ctx)
		tm := New(c, queues, names, nil, log, Tuning{})
		go func() { defer close(w.done); tm.Run(wctx) }()
		workers[i] = w
	}
	defer func() {
		for _, w := range workers {
			w.cancel()
			<-w.done
		}
	}()
	last := start.Add(entries * gap)
	waitPending(fmt.Sprintf("e%d", entries-1), last.Add(5*time.Second))
	a, b := workers[0].hook.scripts.Load(), workers[1].hook.scripts.Load()
	follower, other := workers[0], workers[1]
	if b > a {
		follower, other, a, b = workers[1], workers[0], b, a
	}
	// The follower looks at least once per entry (a move and a hold per
	// second); the other at most once per entry, FollowGrace after it,
	// plus its holds and the first looks before it learnt who follows.
	t.Logf("follower %d scripts, other %d", a, b)
	if a < entries {
		t.Errorf("the follower ran %d scripts for %d entries", a, entries)
	}
	if b > entries+12 {
		t.Errorf("the other timer ran %d scripts over %v (the follower %d); want at most one per entry and 2 per MaxSleep", b, last.Sub(start), a)
	}

	// With the follower gone, the other moves the next entry within
	// FollowGrace of its due time, not after its MaxSleep or the mover
	// note's life. The bound is wide for a loaded machine, and still
	// catches a wait for either.
	follower.cancel()
	<-follower.done
	due := time.Now().Add(100 * time.Millisecond)
	add("after", due)
	waitPending("after", due.Add(DefaultTuning.FollowGrace+400*time.Millisecond))
	if other.hook.scripts.Load() == b {
		t.Error("the other timer ran no script after the follower stopped")
	}
}

// An idle timer looks at its entries and its parked tasks together, once
// per MaxSleep: one wake-up and two scripts each time, not two wake-ups.
func TestIdleTimerLooksOncePerMaxSleep(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client()
	hook := &countingHook{}
	c.AddHook(hook)
	ctx, cancel := context.WithCancel(context.Background())
	tune := Tuning{MaxSleep: 250 * time.Millisecond}
	tm := New(c, []string{"p0"}, names, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), tune)
	done := make(chan struct{})
	go func() { defer close(done); tm.Run(ctx) }()
	const looks = 4
	time.Sleep(looks*tune.MaxSleep - tune.MaxSleep/2) // counting what an idle stretch costs: nothing to poll for
	cancel()
	<-done
	// The first look (each script's first call is an EVALSHA that finds
	// no script, then an EVAL), then one per MaxSleep.
	if got, want := hook.scripts.Load(), int64(2*looks+2); got > want {
		t.Errorf("an idle timer ran %d scripts in %v, want at most %d", got, looks*tune.MaxSleep-tune.MaxSleep/2, want)
	}
}

// An announcement made while a timer's channel was down is lost; the timer
// looks at every queue when it subscribes again, so an entry announced
// then starts at its time, not a MaxSleep later.
func TestAResubscribedTimerLooksAtEveryQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	hook := &countingHook{}
	rdb.AddHook(hook)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	tm := New(rdb, []string{"p0"}, names, nil, log, Tuning{MaxSleep: time.Hour})
	done := make(chan struct{})
	go func() { defer close(done); tm.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Its first look done (an entry and a hold script), it sleeps an hour.
	deadline := time.Now().Add(10 * time.Second)
	for hook.scripts.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the timer never looked")
		}
		time.Sleep(time.Millisecond)
	}
	// An entry whose announcement the timer never gets (as one published
	// while its channel is down), then the channel goes down.
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("p0"), asynq.TaskID("lost"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, names.Timer("p0"), redis.Z{Score: float64(time.Now().UnixMilli()), Member: "lost"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		info, err := inspector.GetTaskInfo("p0", "lost")
		if err != nil {
			t.Fatal(err)
		}
		if info.State == asynq.TaskStatePending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task is still %v a minute after the channel came back (MaxSleep an hour)", info.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
