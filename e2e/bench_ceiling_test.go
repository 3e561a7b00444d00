package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/redistest"
)

// ceilingFigures are one ceiling run's: throughput, and CPU per task by
// process ("process": this test process, which runs asynq's servers and
// the destination, and enqueues; "redis").
type ceilingFigures struct {
	perSecond float64
	cpu       map[string]float64
}

// benchCeiling: raw asynq, two servers in one process, a handler doing the
// same POST with a tuned client; N tasks enqueued first, then drained.
// Throughput and CPU are the drain's.
func benchCeiling(t testing.TB, dest *sink, n int) ceilingFigures {
	r := redistest.StartServer(t, redistest.Options{})
	opt := asynq.RedisClientOpt{Addr: r.Addr}
	client := asynq.NewClient(opt)
	defer client.Close()
	var statsBefore map[string][2]int64
	if os.Getenv("BENCH_COMMANDSTATS") == "1" {
		// What asynq alone costs Redis per task: the floor under retryd's.
		statsBefore = commandStats(t, r.Client())
		defer func() {
			fmt.Println("COMMANDSTATS asynq alone (enqueue, dequeue, done; the ceiling run):")
			printCommandStats(statsBefore, commandStats(t, r.Client()), n)
		}()
	}
	enqueueAll(t, client, n, 1)
	dest.reset(false, false)
	meter := startMeter(r, n)
	servers := startCeilingServers(t, opt, dest)
	waitFor(t, 10*time.Minute, "ceiling drain", func() bool { return dest.hits.Load() >= int64(n) })
	drain := meter.stop()
	for _, s := range servers {
		s.Shutdown()
	}
	if statsBefore != nil {
		// The idle servers' polling after the drain is not per task.
		fmt.Println("COMMANDSTATS (the figures below include the servers' polling while idle at shutdown)")
	}
	return drain
}

// benchCeilingEndToEnd: raw asynq as retryd's end-to-end figure runs, with
// the servers running while 32 goroutines enqueue N tasks through asynq's
// client; tasks/s from the first enqueue to the last delivery, and CPU per
// task of the whole task's life (enqueue, dequeue, delivery, done).
func benchCeilingEndToEnd(t testing.TB, dest *sink, n int) ceilingFigures {
	r := redistest.StartServer(t, redistest.Options{})
	opt := asynq.RedisClientOpt{Addr: r.Addr}
	client := asynq.NewClient(opt)
	defer client.Close()
	dest.reset(false, false)
	servers := startCeilingServers(t, opt, dest)
	meter := startMeter(r, n)
	enqueueAll(t, client, n, 32)
	waitFor(t, 10*time.Minute, "ceiling end to end", func() bool { return dest.hits.Load() >= int64(n) })
	figures := meter.stop()
	for _, s := range servers {
		s.Shutdown()
	}
	return figures
}

// startCeilingServers starts the ceiling's two asynq servers (concurrency
// 100 each) on queue "bench", POSTing each task's payload to dest.
func startCeilingServers(t testing.TB, opt asynq.RedisClientOpt, dest *sink) []*asynq.Server {
	hc := tunedClient()
	handler := asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", dest.URL, bytes.NewReader(task.Payload()))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	})
	var servers []*asynq.Server
	for i := 0; i < 2; i++ {
		srv := asynq.NewServer(opt, asynq.Config{Concurrency: 100, Queues: map[string]int{"bench": 1},
			TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.ErrorLevel})
		if err := srv.Start(handler); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, srv)
	}
	return servers
}

// enqueueAll enqueues n tasks carrying the 1 KiB payload from clients
// goroutines, one Enqueue call each; the run ends at the first error.
func enqueueAll(t testing.TB, client *asynq.Client, n, clients int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := client.Enqueue(asynq.NewTask("post", []byte(payload)), asynq.Queue("bench")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

// meter measures tasks/s and CPU per task of this process and Redis.
type meter struct {
	r           *redistest.Server
	n           int
	start       time.Time
	self, redis float64
}

func startMeter(r *redistest.Server, n int) *meter {
	return &meter{r: r, n: n, start: time.Now(), self: procCPU(os.Getpid()), redis: procCPU(r.Pid())}
}

func (m *meter) stop() ceilingFigures {
	el := time.Since(m.start)
	return ceilingFigures{perSecond: float64(m.n) / el.Seconds(), cpu: map[string]float64{
		"process": (procCPU(os.Getpid()) - m.self) * 1e6 / float64(m.n),
		"redis":   (procCPU(m.r.Pid()) - m.redis) * 1e6 / float64(m.n),
	}}
}
