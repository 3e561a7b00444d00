package record

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// BenchmarkScripts measures what each of a delivery's three record scripts
// costs Redis, the way the API and the workers call them (owner cap on,
// doorbell rung, 1 KiB body): b.N creates, then b.N begins, then b.N
// finishes, each phase reported as Redis' script time (INFO commandstats)
// per call. Under `valgrind --tool=callgrind redis-server` (REDIS_URL and
// BENCH_CALLGRIND_PID; e2e/profile.sh) the same phases give instruction
// counts, which do not drift with the machine.
func BenchmarkScripts(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	s := NewStore(rdb, time.Hour)
	ctx := context.Background()
	now := time.Now()
	body := strings.Repeat("x", 1024)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("01m8mhyychtfy%07d", i)
	}
	// Under callgrind (BENCH_CALLGRIND_PID: the valgrind'ed redis-server),
	// each phase's instructions go to their own dump.
	callgrind := func(args ...string) {
		if pid := os.Getenv("BENCH_CALLGRIND_PID"); pid != "" {
			if out, err := exec.Command("callgrind_control", append(args, pid)...).CombinedOutput(); err != nil {
				b.Fatalf("callgrind_control %v: %v %s", args, err, out)
			}
		}
	}
	phase := func(name string, run func(id string) error) {
		callgrind("-z")
		before := evalUsec(b, rdb)
		for _, id := range ids {
			if err := run(id); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
		}
		calls, usec := evalUsec(b, rdb).minus(before)
		b.ReportMetric(float64(usec)/float64(calls), name+"-µs/call")
		callgrind("-d", fmt.Sprintf("%s-%d", name, b.N))
	}
	b.ResetTimer()
	phase("create", func(id string) error {
		r := newRequest(id, now)
		r.Method, r.Body = "POST", body
		// With its task, as a submission pending at once writes it (a
		// message of the size asynq's is for a request id).
		task := &Task{Key: "{retryd}:bench-task:" + id, List: "{retryd}:bench-pending",
			Fields: []any{"msg", strings.Repeat("m", 60), "state", "pending", "pending_since", now.UnixNano()}}
		_, err := s.Create(ctx, r, "", nil, CreateOptions{Owner: Owner{ID: "bench", Limit: 100000}, Ring: true, Task: task})
		return err
	})
	phase("begin", func(id string) error {
		_, err := s.Begin(ctx, id, now)
		return err
	})
	dur := int64(3)
	phase("finish", func(id string) error {
		_, err := s.Finish(ctx, id, Outcome{Attempt: Attempt{N: 1, StartedAt: now, DurationMs: &dur, Outcome: "success", StatusCode: 200},
			Status: Completed, Host: "e.com", Due: now.Add(-time.Millisecond)}, now)
		return err
	})
}

type evalStats struct{ calls, usec int64 }

func (a evalStats) minus(b evalStats) (int64, int64) { return a.calls - b.calls, a.usec - b.usec }

// evalUsec reads the EVALSHA line of INFO commandstats.
func evalUsec(b *testing.B, rdb *redis.Client) evalStats {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var st evalStats
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
	}
	return st
}
