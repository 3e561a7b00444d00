# retryd — the commands the README promises.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1

.PHONY: help run test deps bench bench-hardening bench-backlog bench-outage bench-idle bench-find bench-tenants bench-lateness profile lint fuzz chaos chaos-failover

## help: list the targets
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

## run: the whole service in one process (embedded Redis, in-process worker); PORT=3000 and QSTASH_DEV_ADDR=127.0.0.1:8080 move its ports (QSTASH_DEV_ADDR= turns the QStash dev listener off)
QSTASH_DEV_ADDR ?= 127.0.0.1:8080
run:
	PORT=$${PORT:-3000} $(GO) run ./cmd/api -dev -qstash-dev '$(QSTASH_DEV_ADDR)'

## deps: make sure what the tests start is installed (redis-server, chromium, node + the npm oracles of e2e/oracles)
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	{ command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; } || missing="$$missing chromium"; \
	{ command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing:$$missing. Install with: sudo apt-get install -y$$missing"; \
	    exit 1; \
	  fi; \
	fi
	@test -d e2e/oracles/node_modules || { echo "installing the npm oracles (e2e/oracles, pinned by its package-lock.json)"; \
	  cd e2e/oracles && npm ci --no-audit --no-fund --silent; }

## test: vet, then every test with the race detector (tests start their own redis-server)
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

## bench: every figure of docs/benchmarks.md (BENCH_N=20000, BENCH_ROUNDS=3; BENCH_BULLMQ=0 skips the Node peer; BENCH_REPLICA=1 gives Redis a replica, for BENCH_API_ENV=REDIS_WAIT_REPLICAS=1)
bench: deps
	@command -v node >/dev/null 2>&1 || { echo "node is missing (needed for the BullMQ peer): apt-get install -y nodejs npm, or run with BENCH_BULLMQ=0"; exit 1; }
	$(GO) test -run '^$$' -bench '^BenchmarkSuite$$' -benchtime 1x -timeout 60m ./e2e/ | grep -vE '^(goos|goarch|pkg|cpu):' 

## bench-backlog: what waiting costs: commands, CPU and context switches per attempt with a backlog queued (BENCH_BACKLOG=20000, BENCH_WINDOW=30 s, BENCH_SCENARIOS=rate,slow,parallel,failing, BENCH_WORKER_ENV="K=V ...", BENCH_COMMANDSTATS=1, BENCH_PERF=dir to perf-record the window)
bench-backlog: deps
	$(GO) test -run '^$$' -bench '^BenchmarkBacklog$$' -benchtime 1x -timeout 60m ./e2e/ | grep -E '^(BACKLOG|ok|FAIL|---)'

## bench-outage: a destination down with a backlog waiting, then back: attempts while down (probes only), Redis commands and CPU a second while down and idle in the same run, time to drain, lost, out of order per key (BENCH_OUTAGE_N=10000, BENCH_OUTAGE=60 s)
bench-outage: deps
	$(GO) test -run '^$$' -bench '^BenchmarkOutage$$' -benchtime 1x -timeout 60m ./e2e/ | grep -E '^(OUTAGE|ok|FAIL|---|    [a-z_]+\.go:)'

## bench-idle: Redis commands and CPU a second of one idle worker, at PARTITIONS=1 and 16 (BENCH_IDLE_WINDOW=10 s)
bench-idle: deps
	$(GO) test -run '^$$' -bench '^BenchmarkIdle$$' -benchtime 1x -timeout 10m ./e2e/ | grep -E '^(IDLE|ok|FAIL|---)'

## bench-find: the filtered list of GET /requests over 1,000,000 stored requests: p50/p99 of a page per filter, and Redis memory per request before and after the filter indexes (BENCH_FIND_N=1000000, BENCH_FIND_RUNS=200)
bench-find:
	$(GO) test -run '^$$' -bench '^BenchmarkFind$$' -benchtime 1x -timeout 60m ./internal/record/ | grep -E '^(FIND|ok|FAIL|---|    [a-z_]+\.go:)'

## bench-tenants: fairness between tenants: another tenant's first attempts while one floods slow destinations, FLOW_TENANT_SHARE 0.5 and 1 (BENCH_TENANT_FLOOD=3000, BENCH_TENANT_PROBES=20)
bench-tenants: deps
	$(GO) test -run '^$$' -bench '^BenchmarkTenantFairness$$' -benchtime 1x -timeout 30m ./e2e/ | grep -E '^(TENANTS|ok|FAIL|---)'

## bench-lateness: retry lateness (backoffMs 1000) on an idle stack, then while the same workers carry a flood to a destination answering in 2 s (BENCH_LATENESS_N=200 probes per phase, BENCH_LATENESS_RATE=20 probes/s, BENCH_LATENESS_FLOOD=3000, BENCH_WORKER_ENV="K=V ...")
bench-lateness: deps
	$(GO) test -run '^$$' -bench '^BenchmarkLateness$$' -benchtime 1x -timeout 30m ./e2e/ | grep -E '^(LATENESS|Benchmark|ok|FAIL|---|    [a-z_]+\.go:)'

## bench-hardening: what one tenant can do to another: a tenant's healthy first attempts while another floods the same host:port with 70 % 503s, /v2/events on a filter matching nothing over 32,000 requests, five bulk resends under RATE_LIMIT_RPS=200, 200 opens of 600 KB endpoint names, the lateness a 30 s pause leaves (BENCH_HARDENING_SEED=32000, BENCH_HARDENING_FLOOD=1200, BENCH_HARDENING_PAUSE=30)
bench-hardening: deps
	$(GO) test -run '^$$' -bench '^BenchmarkHardening$$' -benchtime 1x -timeout 30m ./e2e/ | grep -E '^(HARDENING|ok|FAIL|---|    [a-z_]+\.go:)'

## profile: where each process's CPU per request goes: perf on the running stack, pprof in process, Redis instructions per script under callgrind (needs linux-perf, valgrind)
profile: deps
	bash e2e/profile.sh

## chaos: soak run with real processes, killed workers and a killed Redis (CHAOS_REQUESTS=10000)
chaos: deps
	CHAOS_REQUESTS=$${CHAOS_REQUESTS:-10000} $(GO) test -count=1 -run '^TestChaos$$' -v -timeout 60m ./e2e/ | grep -E '^(CHAOS|---|ok|FAIL)'

## chaos-failover: proof of delivery under failover (docs/reliability.md): a primary, a replica and three sentinels (redis-server --sentinel); the primary SIGKILLed, the API's and a worker's Redis connections cut 10 s; FAILOVER_RUNS=5 runs each with REDIS_WAIT_REPLICAS=1 and 0 (FAILOVER_WAITS=1,0)
chaos-failover: deps
	FAILOVER_RUNS=$${FAILOVER_RUNS:-5} $(GO) test -count=1 -run '^TestFailover$$' -v -timeout 90m ./e2e/ | grep --line-buffered -E '^(FAILOVER|---|ok|FAIL|    failover_)'

## fuzz: fuzz the submission decoder/validator (FUZZTIME=1m)
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $${FUZZTIME:-1m} ./internal/submit/

## lint: formatting, vet and staticcheck
lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
