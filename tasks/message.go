package tasks

import (
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/retryd/retryd/internal/doorbell"
	"github.com/retryd/retryd/internal/record"
)

// asynq's key layout and task encoding (asynq v0.26, internal/base and
// internal/proto). The submission writes its task in the same Redis script
// as its record — one round trip, and no record without a task — so it
// writes what asynq's own enqueue would. TestNewTaskIsAsynqs checks the
// result against asynq's Inspector and a real asynq server.
const (
	asynqPrefix = "asynq:{" + Queue + "}:"
	// AllQueuesKey is asynq's registry of queues (the dashboard lists it).
	AllQueuesKey = "asynq:queues"
	// BellKey is the queue's doorbell list (see NewBell); its hash tag puts
	// it in the queue's cluster slot.
	BellKey = "{" + Queue + "}:bell"
)

// NewBell returns the doorbell of the queue, to add as a hook to the Redis
// client asynq uses. A worker's bell waits up to wait on an empty dequeue;
// wait 0 makes a bell that only rings (for processes that enqueue).
func NewBell(rdb redis.UniversalClient, wait time.Duration) *doorbell.Bell {
	return &doorbell.Bell{Key: BellKey, PendingKey: asynqPrefix + "pending", ActiveKey: asynqPrefix + "active",
		Wait: wait, ErrorPause: 100 * time.Millisecond, Client: rdb}
}

// asynq's TaskMessage field numbers.
const (
	fieldType    = 1
	fieldPayload = 2
	fieldID      = 3
	fieldQueue   = 4
	fieldRetry   = 5
	fieldTimeout = 8
)

// NewTask describes request id's delivery task for record.Store.Create: due
// at due (handed over retry.Lead early, like Enqueue), with asynq's
// deadline for one run derived from the attempt timeout.
func NewTask(id string, due time.Time, attemptTimeout time.Duration) *record.NewTask {
	var msg []byte
	msg = protowire.AppendTag(msg, fieldType, protowire.BytesType)
	msg = protowire.AppendString(msg, TypeDeliver)
	msg = protowire.AppendTag(msg, fieldPayload, protowire.BytesType)
	msg = protowire.AppendString(msg, id)
	msg = protowire.AppendTag(msg, fieldID, protowire.BytesType)
	msg = protowire.AppendString(msg, id)
	msg = protowire.AppendTag(msg, fieldQueue, protowire.BytesType)
	msg = protowire.AppendString(msg, Queue)
	msg = protowire.AppendTag(msg, fieldRetry, protowire.VarintType)
	msg = protowire.AppendVarint(msg, maxAsynqRetry)
	msg = protowire.AppendTag(msg, fieldTimeout, protowire.VarintType)
	msg = protowire.AppendVarint(msg, uint64(TaskTimeout(attemptTimeout)/time.Second))
	t := &record.NewTask{
		ID:           id,
		Key:          asynqPrefix + "t:" + id,
		PendingKey:   asynqPrefix + "pending",
		ScheduledKey: asynqPrefix + "scheduled",
		BellKey:      BellKey,
		Msg:          msg,
		Queue:        Queue,
		RegistryKey:  AllQueuesKey,
	}
	t.ProcessAt = handOverAt(due)
	return t
}
