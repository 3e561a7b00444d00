#!/usr/bin/env bash
# Runs an official QStash SDK's own test suite (upstash/qstash-js, or
# upstash/qstash-py) against retryd, inside a network namespace that has
# only loopback: the public destinations the suite uses are answered by
# e2e/sdkstandin over HTTPS with a throwaway CA, and nothing can leave the
# machine. Needs root (for unshare and the bind mount of /etc/hosts),
# redis-server, and bun (JS) or /usr/bin/python3 with httpx, pyjwt, pytest,
# pytest-asyncio and python-dotenv (Python).
#
#   e2e/sdk-suite.sh /path/to/qstash-js [test files, relative to it]
#   e2e/sdk-suite.sh /path/to/qstash-py [pytest arguments]
#
# The checkout stays outside this repository (docs/qstash-sdk-suite.md
# says how to get it). Prints the runner's report; exits with its status.
set -euo pipefail
sdk=$(cd "$1" && pwd); shift
files=("$@")
lang=js
[ -f "$sdk/pyproject.toml" ] && lang=py
[ ${#files[@]} -gt 0 ] || [ $lang = py ] || files=(src/client/client.test.ts src/client/dlq.test.ts src/client/logs.test.ts src/client/messages.test.ts
  src/client/schedules.test.ts src/client/queue.test.ts src/client/url-groups.test.ts src/client/flow-control.test.ts
  src/client/workflow/integration.test.ts src/dev-server/index.test.ts)
repo=$(cd "$(dirname "$0")/.." && pwd)
names=example.com,oz.requestcatcher.com,oz1.requestcatcher.com,requestcatcher.com,httpbin.org,mock.httpstatus.io,a.com,b.com,example.org,www.initial.com,www.updated.com,real.example.com,api.openai.com

if [ "${RETRYD_SDK_NETNS:-}" != 1 ]; then
  work=$(mktemp -d)
  (cd "$repo" && go build -o "$work/api" ./cmd/api && go build -o "$work/worker" ./cmd/worker && go build -o "$work/standin" ./e2e/sdkstandin)
  if [ $lang = js ]; then
    command -v bun >/dev/null || { echo "bun is missing: npm i -g bun (or put node_modules/.bin of npm i bun on PATH)"; exit 1; }
  else
    /usr/bin/python3 -c 'import httpx, jwt, pytest, pytest_asyncio, dotenv' ||
      { echo "python modules missing: apt-get install -y python3-httpx python3-jwt python3-pytest python3-pytest-asyncio python3-dotenv"; exit 1; }
  fi
  command -v redis-server >/dev/null || { echo "redis-server is missing: apt-get install -y redis-server"; exit 1; }
  exec unshare -n -m env RETRYD_SDK_NETNS=1 RETRYD_SDK_WORK="$work" "$0" "$sdk" ${files[@]+"${files[@]}"}
fi

work=$RETRYD_SDK_WORK
ip link set lo up
{ echo "127.0.0.1 localhost"; echo "::1 localhost"; for n in ${names//,/ }; do echo "127.0.0.1 $n"; done; } > "$work/hosts"
mount --bind "$work/hosts" /etc/hosts
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
"$work/standin" -ca "$work/ca.pem" -names "$names" > "$work/standin.log" 2>&1 &
redis-server --port 6390 --save '' --appendonly no --dir "$work" > "$work/redis.log" 2>&1 &
token=retryd-sdk-token
export REDIS_URL=redis://127.0.0.1:6390/0 ALLOW_PRIVATE_TARGETS=true API_KEYS=$token PORT=8090 SSL_CERT_FILE=$work/ca.pem \
  QSTASH_CURRENT_SIGNING_KEY=sig_sdk_current_0123456789 QSTASH_NEXT_SIGNING_KEY=sig_sdk_next_9876543210 LOG_LEVEL=warn
for i in $(seq 100); do redis-cli -p 6390 ping >/dev/null 2>&1 && break; sleep 0.1; done
"$work/api" > "$work/api.log" 2>&1 &
"$work/worker" > "$work/worker.log" 2>&1 &
ready() { for i in $(seq 100); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.1; done; }
ready 8090
cd "$sdk"
status=0
if [ $lang = py ]; then
  # The Python suite reads the token and the signing keys from the
  # environment, and compares the keys with GET /v2/keys. Its LLM tests
  # publish to api.openai.com (the stand-in answers) with a key of
  # OPENAI_API_KEY: any non-empty one will do.
  QSTASH_URL=http://127.0.0.1:8090 QSTASH_TOKEN=$token OPENAI_API_KEY=sk-retryd-standin /usr/bin/python3 -m pytest -p no:cacheprovider -q -rfE \
    ${files[@]+"${files[@]}"} 2>&1 | tee -a "$work/pytest.log" || status=$?
  echo "logs: $work"
  exit $status
fi
client=() dev=()
for f in "${files[@]}"; do
  case $f in
    *dev-server*) dev+=("$f") ;;
    src/client/workflow/integration.test.ts)
      # Upstream skips its live workflow tests (they need a server):
      # a copy of the file with them on runs against retryd.
      sed 's/describe\.skip("live serve tests"/describe("live serve tests"/' "$f" > src/client/workflow/integration.retryd.test.ts
      client+=(src/client/workflow/integration.retryd.test.ts) ;;
    *) client+=("$f") ;;
  esac
done
# The workflow tests read the server from MOCK_QSTASH_URL and _TOKEN.
run() { QSTASH_URL=http://127.0.0.1:8090 QSTASH_TOKEN=$token MOCK_QSTASH_URL=http://127.0.0.1:8090 MOCK_QSTASH_TOKEN=$token \
  bun test --timeout 60000 "$@" 2>&1 | tee -a "$work/bun.log" || status=$?; }
# The client files' mocked tests bind 8080 themselves: no dev server then.
[ ${#client[@]} -eq 0 ] || run "${client[@]}"
if [ ${#dev[@]} -gt 0 ]; then
  # The SDK's dev-mode tests look for QStash's local dev server on 8080 and
  # 8181: retryd -dev is one (its own in-memory store and worker, the SDK's
  # dev token and keys).
  for port in 8080 8181; do
    (export PORT=$((port + 1000)) REDIS_URL= API_KEYS= QSTASH_CURRENT_SIGNING_KEY= QSTASH_NEXT_SIGNING_KEY=
     exec "$work/api" -dev -qstash-dev "127.0.0.1:$port" > "$work/dev$port.log" 2>&1) &
    ready $((port + 1000))
  done
  run "${dev[@]}"
fi
echo "logs: $work"
exit $status
