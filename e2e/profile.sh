#!/usr/bin/env bash
# Profiles behind docs/benchmarks.md (issue 17): where each process spends
# its CPU per delivered request. Run from the repository root: make profile.
#   1. perf: the real stack (API, 2 workers, Redis, load generator) during
#      the bench's end-to-end run, sampled with `perf record -g`.
#   2. pprof: the API's submission path and a worker's delivery path, in
#      process (internal/app's BenchmarkSubmit and BenchmarkWorker).
#   3. callgrind: Redis instructions per call of each record script and per
#      delivered request; instruction counts do not drift with the machine.
# Needs perf (apt-get install -y linux-perf) and valgrind.
set -euo pipefail
out=${PROFILE_DIR:-$(mktemp -d)}
n=${PROFILE_N:-10000}
if ! command -v perf >/dev/null || ! command -v valgrind >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing linux-perf valgrind with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf valgrind >/dev/null
  fi
fi
for tool in perf valgrind callgrind_annotate callgrind_control redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "profile needs $tool: apt-get install -y linux-perf valgrind redis-server python3"; exit 1; }
done
echo "profiles in $out"

echo "== perf: the stack, end to end ($n requests)"
BENCH_PERF="$out" BENCH_N="$n" BENCH_ROUNDS=1 BENCH_BULLMQ=0 \
  go test -run '^$' -bench '^BenchmarkSuite$' -benchtime 1x -timeout 30m ./e2e/ | grep -E '^RESULT (cpu_per|ceiling|ratio)'
for p in api workers redis; do
  echo "-- $p: top symbols (self)"
  perf report -i "$out/$p.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -vE '^(#|$)' | sed -n '1,15p'
done
for p in api workers; do
  echo "-- $p: retryd, asynq and go-redis frames (with callees)"
  perf report -i "$out/$p.data" --children --sort sym --stdio -g none 2>/dev/null |
    grep -E 'retryd/retryd|hibiken/asynq|\(\*baseClient\)\._process$|net/http\.\(\*conn\)\.serve$|gin\.\(\*Engine\)\.ServeHTTP$|syscall\.(read|write)$|runtime\.(findRunnable|mallocgc|newstack|gcBgMarkWorker)$' | sed -n '1,25p'
done

echo "== pprof: the API's submission path (BenchmarkSubmit)"
go test -run '^$' -bench '^BenchmarkSubmit$' -benchtime 20000x -cpuprofile "$out/api.pprof" -o "$out/app.test" ./internal/app/ | grep '^Benchmark'
go tool pprof -top -cum -nodecount 200 "$out/app.test" "$out/api.pprof" 2>/dev/null |
  grep -E 'retryd/retryd|asynq\.\(\*Client\)|Script\)\.Run|syscall\.(read|write)$|mallocgc$|gcBgMarkWorker$' | sed -n '1,20p'
echo "== pprof: a worker's delivery path (BenchmarkWorker; the setup's frames left out)"
go test -run '^$' -bench '^BenchmarkWorker$' -benchtime 20000x -cpuprofile "$out/worker.pprof" -o "$out/app.test" ./internal/app/ | grep '^Benchmark'
go tool pprof -top -cum -nodecount 200 -ignore 'BenchmarkWorker' "$out/app.test" "$out/worker.pprof" 2>/dev/null |
  grep -E 'retryd/retryd|asynq\.\(\*processor\)|rdb\.\(\*RDB\)\.(Dequeue|Done)|Script\)\.Run|syscall\.(read|write)$|mallocgc$|newstack$|gcBgMarkWorker$' | sed -n '1,20p'

# redis-server under callgrind on a free port; $1: where its counts go.
callgrind_redis() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$1" redis-server --port "$port" --save "" --appendonly no \
    --bind 127.0.0.1 >"$1.log" 2>&1 &
  vpid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  vport=$port
}
stop_redis() { redis-cli -p "$vport" shutdown nosave >/dev/null 2>&1 || true; wait "$vpid" || true; }
total() { grep -m1 -E '^(summary|totals):' "$1" | awk '{print $2}'; }

echo "== callgrind: Redis instructions per call of each record script (BenchmarkScripts, 2000 calls each)"
go test -c -o "$out/record.test" ./internal/record/
callgrind_redis "$out/scripts.cg"
REDIS_URL="redis://127.0.0.1:$vport" BENCH_CALLGRIND_PID="$vpid" "$out/record.test" -test.run '^$' \
  -test.bench BenchmarkScripts -test.benchtime 2000x | grep '^Benchmark'
stop_redis
for phase in create begin finish; do
  f=$(grep -l "^desc: Trigger: .*$phase-2000" "$out"/scripts.cg.*)
  echo "$phase: $(( $(total "$f") / 2000 )) instructions per call"
done

echo "== callgrind: Redis instructions per delivered request (BenchmarkWorker, 3000 requests, idle polling included)"
callgrind_redis "$out/worker.cg"
REDIS_URL="redis://127.0.0.1:$vport" go test -run '^$' -bench '^BenchmarkWorker$' -benchtime 3000x ./internal/app/ | grep '^Benchmark' || true
stop_redis
echo "per request: $(( $(total "$out/worker.cg") / 3001 )) instructions"
