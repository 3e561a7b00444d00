package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// The idle figures (`make bench-idle`): the Redis commands a second of
// one worker with nothing to do, by partitions. An operator who shards
// over a Redis Cluster pays them on every shard, whether or not requests
// come.

// BenchmarkIdle prints the idle figures: one worker at PARTITIONS=1 and
// 16, BENCH_IDLE_WINDOW seconds each (default 10) once it has settled.
func BenchmarkIdle(b *testing.B) {
	window := time.Duration(envInt("BENCH_IDLE_WINDOW", 10)) * time.Second
	for i := 0; i < b.N; i++ {
		for _, parts := range []int{1, 16} {
			cmds, cpuMs := runIdle(b, parts, window)
			fmt.Printf("IDLE partitions=%d redis_commands_per_s %.1f\n", parts, cmds)
			fmt.Printf("IDLE partitions=%d cpu_ms_per_s_worker_and_redis %.2f\n", parts, cpuMs)
		}
	}
}

// TestIdleSmoke keeps the idle benchmark working: a short window, no
// figure asserted.
func TestIdleSmoke(t *testing.T) {
	t.Parallel()
	if cmds, _ := runIdle(t, 2, time.Second); cmds <= 0 {
		t.Errorf("an idle worker made %.1f Redis commands a second: the count is broken", cmds)
	}
}

// runIdle starts Redis and one worker with PARTITIONS=parts, lets it
// settle, and measures window: Redis commands a second, and the CPU of
// the worker and Redis (ms a second).
func runIdle(t testing.TB, parts int, window time.Duration) (cmdsPerS, cpuMsPerS float64) {
	r := redistest.StartServer(t, redistest.Options{})
	w := startProc(t, "worker", bin.worker, []string{"REDIS_URL=" + r.URL, fmt.Sprintf("PARTITIONS=%d", parts), "LOG_LEVEL=warn"})
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	time.Sleep(8 * time.Second) // measured: the worker starts and settles (its first looks)
	cmd0, start := commandCalls(t, rdb), time.Now()
	cpu0 := procCPU(w.cmd.Process.Pid) + procCPU(r.Pid())
	time.Sleep(window) // measured: idle
	el := time.Since(start)
	cmd1 := commandCalls(t, rdb) - 1 // this INFO
	cpu1 := procCPU(w.cmd.Process.Pid) + procCPU(r.Pid())
	return float64(cmd1-cmd0) / el.Seconds(), (cpu1 - cpu0) * 1000 / el.Seconds()
}
