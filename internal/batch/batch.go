// Package batch sends the Redis commands of concurrent callers as one
// pipeline: a round trip, one write and one read, for however many calls
// came in while the previous batch was on its way. A call alone goes out at
// once, so batching adds no wait at low load; at high load it saves system
// calls in the caller and in Redis. Every call of a batcher must name keys
// of one cluster slot: a batch may be one transaction.
package batch

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timeout bounds one batch's round trip: a batch carries the calls of
// several callers, so no single caller's context may end it.
const Timeout = 10 * time.Second

// Max caps the calls in one batch.
const Max = 128

// Batcher batches the calls made through it. Use New.
type Batcher struct {
	rdb redis.Cmdable

	mu    sync.Mutex
	queue []*call
	busy  bool // a caller is sending a batch
}

// New returns a Batcher sending pipelines through rdb.
func New(rdb redis.Cmdable) *Batcher { return &Batcher{rdb: rdb} }

type call struct {
	tx    bool
	queue func(ctx context.Context, pipe redis.Pipeliner)
	done  chan struct{}
	lead  chan struct{} // closed when this call's caller must send the next batch
}

// Do has queue add the call's commands to the next batch, and returns once
// the batch is sent: the commands queue made hold their replies. With tx,
// the batch is one MULTI/EXEC transaction, so the call's commands run
// together, with nothing of another client's between them. The caller's
// ctx is not the batch's: a call in a batch is sent even if ctx ends
// meanwhile, as a command already written would be.
func (b *Batcher) Do(ctx context.Context, tx bool, queue func(ctx context.Context, pipe redis.Pipeliner)) {
	c := &call{tx: tx, queue: queue, done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	leader := !b.busy
	b.busy = true
	b.mu.Unlock()
	if !leader {
		select {
		case <-c.done:
			return
		case <-c.lead:
		}
	}
	// The leader sends what is queued (its own call first), then hands
	// the lead to the first call queued meanwhile: no caller sends more
	// than one batch.
	b.mu.Lock()
	n := min(len(b.queue), Max)
	calls := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.mu.Unlock()
	defer func() {
		// Deferred, so that a panic cannot leave the batcher busy.
		b.mu.Lock()
		if len(b.queue) > 0 {
			close(b.queue[0].lead)
		} else {
			b.busy = false
		}
		b.mu.Unlock()
	}()
	b.send(context.WithoutCancel(ctx), calls)
}

func (b *Batcher) send(ctx context.Context, calls []*call) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	pipe := b.rdb.Pipeline()
	for _, c := range calls {
		if c.tx {
			pipe = b.rdb.TxPipeline()
			break
		}
	}
	for _, c := range calls {
		c.queue(ctx, pipe)
	}
	// Each command holds its own reply or error.
	_, _ = pipe.Exec(ctx)
	for _, c := range calls {
		close(c.done)
	}
}

// Run runs script with keys and args in the next batch of b (it needs no
// transaction: a script is atomic by itself) and returns its reply as
// Script.Run would, loading the script when Redis lacks it.
func Run(ctx context.Context, b *Batcher, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	b.Do(ctx, false, func(ctx context.Context, pipe redis.Pipeliner) { cmd = script.EvalSha(ctx, pipe, keys, args...) })
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		ctx, cancel := context.WithTimeout(ctx, Timeout)
		defer cancel()
		return script.Eval(ctx, b.rdb, keys, args...)
	}
	return cmd
}
