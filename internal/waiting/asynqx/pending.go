package asynqx

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// A task pending at once, written by retryd's own submission script in
// the same call that stores its request, instead of by asynq's client one
// round trip later. What the script writes is what asynq's enqueue
// script writes (rdb.go, enqueueCmd): the task's hash with its message,
// state and pending time, and its id pushed on the queue's pending list.

// NewTask is one task to write: HSET Task Fields, then LPUSH Pending ID.
type NewTask struct {
	Task, Pending, ID string
	// Fields are the task hash's field/value pairs.
	Fields []any
}

// Message is what asynq's client stores of a task enqueued with TaskID,
// Queue, MaxRetry and Timeout, and no deadline, unique key, group,
// retention or headers.
type Message struct {
	Type    string
	Payload []byte
	ID      string
	Queue   string
	Retry   int
	Timeout time.Duration // stored in whole seconds
}

// encode is asynq's base.EncodeMessage of m: its TaskMessage protobuf
// (internal/proto/asynq.proto), whose zero fields are left out.
func (m Message) encode() []byte {
	var b []byte
	str := func(num protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	varint := func(num protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(1, m.Type)
	if len(m.Payload) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Payload)
	}
	str(3, m.ID)
	str(4, m.Queue)
	varint(5, int64(int32(m.Retry)))
	varint(8, int64(m.Timeout/time.Second))
	return b
}

// PendingTask is m as a task pending since now.
func PendingTask(m Message, now time.Time) NewTask {
	k := QueueKeys(m.Queue)
	return NewTask{Task: k.Task(m.ID), Pending: k.Pending(), ID: m.ID,
		Fields: []any{"msg", m.encode(), "state", "pending", "pending_since", now.UnixNano()}}
}

// Publisher adds a queue to asynq's set of queues, as asynq's client does
// before its first enqueue to it (the dashboard and the Inspector list
// queues from that set), once per queue and process.
type Publisher struct{ done sync.Map }

// Publish adds queue to asynq's set of queues unless this Publisher did.
func (p *Publisher) Publish(ctx context.Context, rdb redis.UniversalClient, queue string) error {
	if _, ok := p.done.Load(queue); ok {
		return nil
	}
	if err := rdb.SAdd(ctx, allQueues, queue).Err(); err != nil {
		return fmt.Errorf("publish queue %s: %w", queue, err)
	}
	p.done.Store(queue, true)
	return nil
}

// allQueues is asynq's set of queue names (base.AllQueues).
const allQueues = namespace + "queues"
