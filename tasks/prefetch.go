package tasks

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/retryd/retryd/internal/doorbell"
	"github.com/retryd/retryd/internal/record"
)

// deliverMsgPrefix is how every delivery task's message starts: asynq
// encodes the type, field 1, first.
var deliverMsgPrefix = string(protowire.AppendString(protowire.AppendTag(nil, fieldType, protowire.BytesType), TypeDeliver))

// Prefetch makes the worker's fetch also start the attempt: a go-redis hook
// on the client of the worker's asynq server replaces asynq's dequeue script
// with one that dequeues the same way and, for a delivery, runs Begin of its
// request in the same round trip. The Handler takes that Begin instead of
// asking Redis again.
type Prefetch struct {
	Store *record.Store
	Now   func() time.Time

	begins claims[*record.Begin] // request id → its attempt's start
}

// take returns the prefetched start of request id's attempt, once.
func (p *Prefetch) take(id string) *record.Begin {
	if p == nil {
		return nil
	}
	b, _ := p.begins.take(id)
	return b
}

// DialHook is part of redis.Hook.
func (p *Prefetch) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook is part of redis.Hook; asynq's dequeue is not pipelined.
func (p *Prefetch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook answers asynq's dequeue of the queue (recognised by its keys:
// pending, paused, active, lease) with DequeueBegin's task.
func (p *Prefetch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c, ok := cmd.(*redis.Cmd)
		if !ok {
			return next(ctx, cmd)
		}
		leaseExpiry, ok := asynqDequeueLease(c.Args())
		if !ok {
			return next(ctx, cmd)
		}
		d, err := p.Store.DequeueBegin(ctx, dequeueKeys, leaseExpiry, p.Now())
		switch {
		case err != nil:
			c.SetErr(err)
			return err
		case d.Msg == "":
			c.SetErr(redis.Nil)
			return redis.Nil
		}
		if d.Begin != nil {
			p.begins.put(d.ID, d.Begin, p.Now())
		}
		c.SetErr(nil)
		c.SetVal(d.Msg)
		return nil
	}
}

var dequeueKeys = record.DequeueKeys{
	Pending: asynqPrefix + "pending", Paused: asynqPrefix + "paused", Active: asynqPrefix + "active",
	Lease: asynqPrefix + "lease", TaskPrefix: asynqPrefix + "t:", DeliverPrefix: deliverMsgPrefix,
}

// asynqDequeueLease recognises asynq's dequeue script call for the queue
// (keys pending, paused, active, lease; first argument the lease expiry)
// and returns the lease expiry.
func asynqDequeueLease(args []any) (int64, bool) {
	keys, rest := asynqScriptCall(args, 4)
	if keys == nil || len(rest) < 2 || keys[0] != dequeueKeys.Pending || keys[1] != dequeueKeys.Paused ||
		keys[2] != dequeueKeys.Active || keys[3] != dequeueKeys.Lease || rest[1] != dequeueKeys.TaskPrefix {
		return 0, false
	}
	exp, ok := rest[0].(int64)
	return exp, ok
}

// asynqScriptCall returns the keys and remaining arguments of a script
// call that names exactly n keys (nil keys for anything else).
func asynqScriptCall(args []any, n int) (keys []string, rest []any) {
	keys, rest = doorbell.ScriptKeys(args)
	if len(keys) != n {
		return nil, nil
	}
	return keys, rest
}
