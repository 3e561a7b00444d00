package batch

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// gate holds every pipeline of the batcher at the hook until released,
// and records each one's command names. (go-redis sets a new connection up
// with a pipeline too: those pass.)
type gate struct {
	mu      sync.Mutex
	batches [][]string
	entered chan int // the pipeline's number, as it enters
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan int, 16), release: make(chan struct{}, 16)} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		setup := false
		for i, c := range cmds {
			names[i] = c.Name()
			setup = setup || names[i] == "hello" || names[i] == "client" || names[i] == "auth" || names[i] == "select"
		}
		if setup {
			return next(ctx, cmds)
		}
		g.mu.Lock()
		g.batches = append(g.batches, names)
		n := len(g.batches)
		g.mu.Unlock()
		g.entered <- n
		<-g.release
		return next(ctx, cmds)
	}
}

// gatedBatcher is a Batcher on a new Redis whose pipelines pass g.
func gatedBatcher(t *testing.T) (*Batcher, *gate) {
	rdb := redistest.Start(t).Client()
	g := newGate()
	rdb.AddHook(g)
	return New(rdb), g
}

func (g *gate) batch(i int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches[i]
}

// echo returns its argument, or fails for "fail".
var echo = redis.NewScript(`if ARGV[1] == "fail" then return redis.error_reply("ERR asked to fail") end return ARGV[1]`)

func queued(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// idle says whether b has no call queued and no batch on its way.
func idle(b *Batcher) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue) == 0 && !b.busy
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Calls made while a batch is on its way go out together in the next one,
// sent by one of them: the caller that sent the first batch returns
// without waiting for the second. Each call gets its own reply or error,
// and a script Redis lacks is loaded.
func TestCallsMadeDuringABatchGoOutAsTheNext(t *testing.T) {
	t.Parallel()
	b, g := gatedBatcher(t)
	ctx := context.Background()

	first := make(chan string, 1)
	go func() { first <- Run(ctx, b, echo, nil, "first").Val().(string) }()
	if n := <-g.entered; n != 1 {
		t.Fatalf("pipeline %d entered first", n)
	}
	const n = 10
	var wg sync.WaitGroup
	got := make([]*redis.Cmd, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			arg := strconv.Itoa(i)
			if i == 3 {
				arg = "fail"
			}
			got[i] = Run(ctx, b, echo, nil, arg)
		}()
	}
	waitFor(t, "the calls to queue", func() bool { return queued(b) == n })
	g.release <- struct{}{} // the first batch
	if v := <-first; v != "first" {
		t.Fatalf("first call got %q", v)
	}
	// The first batch's EVALSHA met a Redis without the script: its
	// caller loaded it with EVAL, outside the pipelines.
	if second := <-g.entered; second != 2 {
		t.Fatalf("pipeline %d entered second", second)
	}
	if names := g.batch(1); len(names) != n {
		t.Fatalf("the second batch holds %d commands %v, want %d", len(names), names, n)
	}
	g.release <- struct{}{}
	wg.Wait()
	for i, c := range got {
		if i == 3 {
			if c.Err() == nil || c.Err().Error() != "ERR asked to fail" {
				t.Errorf("call 3: %v, want its own error", c.Err())
			}
			continue
		}
		if v, err := c.Text(); err != nil || v != strconv.Itoa(i) {
			t.Errorf("call %d: %q, %v", i, v, err)
		}
	}
	waitFor(t, "the batcher to end idle", func() bool { return idle(b) })
}

// A batch holding a call that asks for a transaction is one MULTI/EXEC;
// one without is a plain pipeline.
func TestABatchIsATransactionWhenACallAsks(t *testing.T) {
	t.Parallel()
	b, g := gatedBatcher(t)
	ctx := context.Background()
	close(g.release)
	var set *redis.StatusCmd
	var get *redis.StringCmd
	b.Do(ctx, true, func(ctx context.Context, pipe redis.Pipeliner) {
		set = pipe.Set(ctx, "k", "v", 0)
		get = pipe.Get(ctx, "k")
	})
	if set.Err() != nil || get.Val() != "v" {
		t.Fatalf("set %v, get %q %v", set.Err(), get.Val(), get.Err())
	}
	if names := g.batch(0); len(names) != 4 || names[0] != "multi" || names[3] != "exec" {
		t.Errorf("the batch sent %v, want multi, set, get, exec", names)
	}
	b.Do(ctx, false, func(ctx context.Context, pipe redis.Pipeliner) { get = pipe.Get(ctx, "k") })
	if names := g.batch(1); len(names) != 1 || names[0] != "get" || get.Val() != "v" {
		t.Errorf("the batch sent %v (get %q), want get alone", names, get.Val())
	}
}

// Many callers at once: every call is sent once and gets its own reply,
// and the batcher ends idle.
func TestManyCallersAtOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	b := New(rdb)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				want := strconv.Itoa(g*1000 + i)
				if v, err := Run(ctx, b, echo, nil, want).Text(); err != nil || v != want {
					errs <- fmt.Errorf("call %s: %q, %v", want, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A leader gives its place up just after its batch's callers return.
	waitFor(t, "the batcher to end idle", func() bool { return idle(b) })
}

// A caller's context ending does not take its call out of a batch.
func TestACallersEndedContextDoesNotEndTheBatch(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	b := New(rdb)
	if err := echo.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v, err := Run(ctx, b, echo, nil, "x").Text(); err != nil || v != "x" {
		t.Fatalf("Run with an ended context: %q, %v", v, err)
	}
}
