// Package batch sends the Redis commands of concurrent callers as one
// pipeline: a round trip, one write and one read, for however many calls
// came in while the batches before were on their way. A call goes out at
// once while fewer than InFlight batches are on their way, so batching
// adds no wait at low load; at high load it saves system calls in the
// caller and in Redis. Every call of a batcher must name keys of one
// cluster slot: a batch may be one transaction.
package batch

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// InFlight is how many batches may be on their way at once: a batch stuck
// on a dead connection holds up its own calls, not every caller.
const InFlight = 4

// Max caps the calls in one batch.
const Max = 128

// Batcher batches the calls made through it. Use New.
type Batcher struct {
	rdb redis.Cmdable

	max int // InFlight; tests lower it

	mu       sync.Mutex
	queue    []*call
	inFlight int // batches being sent
}

// New returns a Batcher sending pipelines through rdb.
func New(rdb redis.Cmdable) *Batcher { return &Batcher{rdb: rdb, max: InFlight} }

type call struct {
	tx    bool
	queue func(ctx context.Context, pipe redis.Pipeliner)
	done  chan struct{}
	lead  chan struct{} // closed when this call's caller must send the next batch
	led   bool          // the call holds a place in flight (under Batcher.mu)
}

// Do has queue add the call's commands to the next batch, and returns once
// the batch is sent: the commands queue made hold their replies. With tx,
// the batch is one MULTI/EXEC transaction, so the call's commands run
// together, with nothing of another client's between them. A call still
// waiting for a batch when ctx ends is dropped, and Do returns ctx's
// error; once in a batch it is sent, as a command already written would
// be, and its round trip is bounded by the client's own timeouts.
func (b *Batcher) Do(ctx context.Context, tx bool, queue func(ctx context.Context, pipe redis.Pipeliner)) error {
	c := &call{tx: tx, queue: queue, done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	leader := b.inFlight < b.max
	if leader {
		b.inFlight++
		c.led = true // holds a place already: not one to hand a place to
	}
	b.mu.Unlock()
	if !leader {
		select {
		case <-c.done:
		case <-c.lead:
		case <-ctx.Done():
			b.mu.Lock()
			if i := slices.Index(b.queue, c); i >= 0 && !c.led {
				b.queue = slices.Delete(b.queue, i, i+1)
				b.mu.Unlock()
				return ctx.Err()
			}
			b.mu.Unlock()
		}
		// A call made a leader holds a place in flight, even when
		// another leader has sent it meanwhile: it passes the place on.
		b.mu.Lock()
		leader = c.led
		b.mu.Unlock()
	}
	if leader {
		b.lead(ctx)
	}
	<-c.done // sent by this caller's batch, or by another leader's
	return nil
}

// lead sends what is queued, then hands its place to a call queued
// meanwhile, or gives it up: no caller sends more than one batch.
func (b *Batcher) lead(ctx context.Context) {
	b.mu.Lock()
	n := min(len(b.queue), Max)
	calls := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.mu.Unlock()
	defer func() {
		// Deferred, so that a panic cannot leave the place taken.
		b.mu.Lock()
		// The first queued call not made a leader already (by another
		// leader that finished meanwhile) takes this place.
		if i := slices.IndexFunc(b.queue, func(c *call) bool { return !c.led }); i >= 0 {
			b.queue[i].led = true
			close(b.queue[i].lead)
		} else {
			b.inFlight--
		}
		b.mu.Unlock()
	}()
	if n > 0 { // a caller that became leader alongside another may find its call taken
		b.send(context.WithoutCancel(ctx), calls)
	}
}

func (b *Batcher) send(ctx context.Context, calls []*call) {
	defer func() {
		for _, c := range calls {
			close(c.done)
		}
	}()
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
}

// Run runs script with keys and args in the next batch of b (it needs no
// transaction: a script is atomic by itself) and returns its reply as
// Script.Run would, loading the script when Redis lacks it.
func Run(ctx context.Context, b *Batcher, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	err := b.Do(ctx, false, func(ctx context.Context, pipe redis.Pipeliner) { cmd = script.EvalSha(ctx, pipe, keys, args...) })
	if err != nil {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return script.Eval(context.WithoutCancel(ctx), b.rdb, keys, args...)
	}
	return cmd
}
