package asynqx

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/redistest"
)

// A task PendingTask writes is the task asynq's client writes: the same
// message bytes, the same hash fields, the same place in the pending list,
// and asynq's Inspector reads it back as enqueued with those options.
func TestPendingTaskIsWhatAsynqsClientWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	for _, m := range []Message{
		{Type: "deliver", Payload: []byte("01JABCDEF"), ID: "01JABCDEF", Queue: "retryd", Retry: 7, Timeout: 41 * time.Second},
		{Type: "deliver", Payload: []byte("x"), ID: "x", Queue: "p3", Retry: 0, Timeout: 3 * time.Second},
		{Type: "deliver", Payload: []byte("y"), ID: "y", Queue: "p3", Retry: 200000, Timeout: 7200 * time.Second},
	} {
		if _, err := client.Enqueue(asynq.NewTask(m.Type, m.Payload), asynq.TaskID(m.ID), asynq.Queue(m.Queue),
			asynq.MaxRetry(m.Retry), asynq.Timeout(m.Timeout)); err != nil {
			t.Fatal(err)
		}
		k := QueueKeys(m.Queue)
		theirs, err := rdb.HGetAll(ctx, k.Task(m.ID)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal([]byte(theirs["msg"]), m.encode()) {
			t.Fatalf("%s: asynq's message %x, ours %x", m.ID, theirs["msg"], m.encode())
		}
		if err := inspector.DeleteTask(m.Queue, m.ID); err != nil {
			t.Fatal(err)
		}

		p := PendingTask(m, time.Now())
		pipe := rdb.TxPipeline()
		pipe.HSet(ctx, p.Task, p.Fields...)
		pipe.LPush(ctx, p.Pending, p.ID)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		ours, err := rdb.HGetAll(ctx, p.Task).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(ours) != len(theirs) || ours["msg"] != theirs["msg"] || ours["state"] != theirs["state"] || ours["pending_since"] == "" {
			t.Fatalf("%s: asynq's task hash %q, ours %q", m.ID, theirs, ours)
		}
		info, err := inspector.GetTaskInfo(m.Queue, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != asynq.TaskStatePending || info.Type != m.Type || string(info.Payload) != string(m.Payload) ||
			info.MaxRetry != m.Retry || info.Timeout != m.Timeout || !info.Deadline.IsZero() {
			t.Fatalf("%s: asynq reads %+v", m.ID, info)
		}
		if ids, err := rdb.LRange(ctx, k.Pending(), 0, -1).Result(); err != nil || len(ids) != 1 || ids[0] != m.ID {
			t.Fatalf("%s: pending list %v, %v", m.ID, ids, err)
		}
		if err := inspector.DeleteTask(m.Queue, m.ID); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPublisherAddsAQueueOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	var p Publisher
	for range 2 {
		if err := p.Publish(ctx, rdb, "p1"); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := asynq.NewInspectorFromRedisClient(rdb).Queues()
	if err != nil || len(qs) != 1 || qs[0] != "p1" {
		t.Fatalf("asynq's queues %v, %v; want [p1]", qs, err)
	}
	rdb.SRem(ctx, allQueues, "p1")
	if err := p.Publish(ctx, rdb, "p1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.SCard(ctx, allQueues).Result(); n != 0 {
		t.Fatalf("a second Publish of p1 wrote again: %d queues", n)
	}
}
