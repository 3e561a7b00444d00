# retryd — the commands the README promises.
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1

.PHONY: run test deps bench lint fuzz

## run: the whole service in one process (embedded Redis, in-process worker)
run:
	$(GO) run ./cmd/api -dev

## deps: make sure what the tests start is installed (redis-server)
deps:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing redis-server with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else \
	    echo "redis-server is missing. Install it: 'sudo apt-get install -y redis-server' (Debian/Ubuntu) or 'brew install redis' (macOS)."; \
	    exit 1; \
	  fi; }

## test: vet, then every test with the race detector (tests start their own redis-server)
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

## bench: timing and throughput figures against real processes
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 3 -timeout 30m ./e2e/

## fuzz: fuzz the submission decoder/validator (FUZZTIME=1m)
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $${FUZZTIME:-1m} ./internal/submit/

## lint: formatting, vet and staticcheck
lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
