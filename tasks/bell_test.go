package tasks

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// The worker in these tests waits on the doorbell for bellWait after an
// empty fetch and then polls every slowPoll or so: a task that runs within
// wakeBudget (well under both) was fetched because the doorbell rang.
const (
	bellWait   = time.Minute
	slowPoll   = 4 * time.Second
	wakeBudget = 10 * time.Second
)

// bellServer starts an asynq server on the queue that waits on the
// doorbell (bellWait) and polls slowly, and returns the ids it ran.
func bellServer(t *testing.T, srv *redistest.Server) (ran chan string, bell interface{ Stop() }) {
	t.Helper()
	rdb := srv.Client()
	b := NewBell(rdb, bellWait)
	rdb.AddHook(b)
	ran = recordingServer(t, rdb, asynq.Config{TaskCheckInterval: slowPoll, DelayedTaskCheckInterval: 100 * time.Millisecond})
	// Cleanups run last-in first-out: the bell stops before the server
	// shuts down, so the shutdown does not wait out a doorbell wait.
	t.Cleanup(b.Stop)
	// Wait until the worker found the queue empty and waits on the bell.
	waitUntil(t, "the worker to wait on the doorbell", func() bool { return blockedClients(t, rdb) == 1 })
	return ran, b
}

// recordingServer starts an asynq server on the queue whose delivery
// handler only reports the ids it ran; it stops when the test ends.
func recordingServer(t *testing.T, rdb *redis.Client, cfg asynq.Config) chan string {
	t.Helper()
	ran := make(chan string, 16)
	cfg.Queues, cfg.LogLevel = map[string]int{Queue: 1}, asynq.FatalLevel
	server := asynq.NewServerFromRedisClient(rdb, cfg)
	mux := asynq.NewServeMux()
	mux.HandleFunc(TypeDeliver, func(_ context.Context, task *asynq.Task) error {
		ran <- string(task.Payload())
		return nil
	})
	if err := server.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Shutdown)
	return ran
}

func blockedClients(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatalf("no blocked_clients in INFO clients: %q", info)
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func expectRun(t *testing.T, ran chan string, id, how string) {
	t.Helper()
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("%s: ran %q, want %q", how, got, id)
		}
	case <-time.After(wakeBudget):
		t.Fatalf("%s: the idle worker was not woken (unwoken, it would wait %v)", how, bellWait)
	}
}

// A submission stores its record and enqueues through asynq's client on
// the API's ringing Redis client.
func TestSubmissionWakesTheIdleWorker(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ran, _ := bellServer(t, srv)
	api := srv.Client()
	api.AddHook(NewBell(api, 0))
	q := &Enqueuer{Client: asynq.NewClientFromRedisClient(api), Inspector: asynq.NewInspectorFromRedisClient(api)}
	id := "01m8mhyychtfy2pdj6g7"
	if err := q.Enqueue(context.Background(), id, time.Now(), time.Second, 0); err != nil {
		t.Fatal(err)
	}
	expectRun(t, ran, id, "submission")
}

func TestAsynqEnqueueAndForwardWakeTheIdleWorker(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ran, _ := bellServer(t, srv)
	// Another process's client, ringing only.
	other := srv.Client()
	other.AddHook(NewBell(other, 0))
	client := asynq.NewClientFromRedisClient(other)

	if _, err := client.Enqueue(NewDeliver("enqueued"), asynq.Queue(Queue), asynq.TaskID("enqueued")); err != nil {
		t.Fatal(err)
	}
	expectRun(t, ran, "enqueued", "asynq enqueue")
	waitUntil(t, "the worker to wait again", func() bool { return blockedClients(t, srv.Client()) == 1 })

	// A scheduled task is moved to pending by the worker's own forwarder.
	if _, err := client.Enqueue(NewDeliver("forwarded"), asynq.Queue(Queue), asynq.TaskID("forwarded"),
		asynq.ProcessIn(time.Second)); err != nil {
		t.Fatal(err)
	}
	expectRun(t, ran, "forwarded", "forwarder")
}

func TestBellHoldsOneToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	b := NewBell(rdb, 0)
	for i := 0; i < 5; i++ {
		if err := b.Ring(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := rdb.LLen(context.Background(), BellKey(Queue)).Val(); n != 1 {
		t.Fatalf("doorbell holds %d tokens, want 1", n)
	}
}

func TestStoppedBellLetsTheWorkerShutDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	b := NewBell(rdb, time.Hour)
	rdb.AddHook(b)
	server := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{Queue: 1},
		TaskCheckInterval: time.Millisecond, LogLevel: asynq.FatalLevel})
	if err := server.Start(asynq.NewServeMux()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the worker to wait on the doorbell", func() bool { return blockedClients(t, rdb) == 1 })
	b.Stop()
	// Stop ends the wait in progress, and an empty dequeue no longer waits.
	var done atomic.Bool
	go func() { server.Shutdown(); done.Store(true) }()
	waitUntil(t, "the server to shut down", done.Load)
	if n := blockedClients(t, rdb); n != 0 {
		t.Fatalf("%d clients still wait on the doorbell after shutdown", n)
	}
}
