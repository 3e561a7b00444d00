package tasks

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

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

	mu     sync.Mutex
	begins map[string]prefetched // request id → its attempt's start
}

type prefetched struct {
	begin *record.Begin
	at    time.Time
}

// prefetchForgetAfter bounds how long a prefetched start waits for its
// handler; asynq does not run a task whose deadline passed while it was
// being fetched (the next run then finds the attempt in flight and records
// it interrupted).
const prefetchForgetAfter = 5 * time.Minute

func (p *Prefetch) put(id string, b *record.Begin, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.begins == nil {
		p.begins = map[string]prefetched{}
	}
	if len(p.begins) >= 1024 {
		for k, v := range p.begins {
			if now.Sub(v.at) > prefetchForgetAfter {
				delete(p.begins, k)
			}
		}
	}
	p.begins[id] = prefetched{b, now}
}

// take returns the prefetched start of request id's attempt, once.
func (p *Prefetch) take(id string) *record.Begin {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.begins[id]
	if !ok {
		return nil
	}
	delete(p.begins, id)
	return v.begin
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
			p.put(d.ID, d.Begin, p.Now())
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

// asynqScriptCall splits an EVALSHA/EVAL call with n string keys into its
// keys and the remaining arguments (nil keys when it is not one).
func asynqScriptCall(args []any, n int) (keys []string, rest []any) {
	if len(args) < 3+n {
		return nil, nil
	}
	if name, _ := args[0].(string); name != "evalsha" && name != "eval" {
		return nil, nil
	}
	if got, _ := args[2].(int); got != n {
		return nil, nil
	}
	keys = make([]string, n)
	for i := range keys {
		k, ok := args[3+i].(string)
		if !ok {
			return nil, nil
		}
		keys[i] = k
	}
	return keys, args[3+n:]
}
