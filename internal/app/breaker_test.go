package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/events"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/redistest"
)

// healthStack is an API and a worker in this process on a Redis of their
// own, and a destination whose answer the test sets.
type healthStack struct {
	api, dest string
	// host is the destination's host:port.
	host string
	rdb  *redis.Client

	mu     sync.Mutex
	status int // what the destination answers
	hits   []string
	// held, while not nil, holds the destination's answers until it is
	// closed.
	held chan struct{}
}

func startHealthStack(t *testing.T, env map[string]string) *healthStack {
	t.Helper()
	return startHealthStackWith(t, env, app.WorkerOptions{})
}

// startHealthStackWith is startHealthStack with the worker's options.
func startHealthStackWith(t *testing.T, env map[string]string, opts app.WorkerOptions) *healthStack {
	t.Helper()
	s := &healthStack{status: http.StatusOK}
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.hits = append(s.hits, r.Header.Get(egress.RequestIDHeader))
		status, held := s.status, s.held
		s.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done():
			}
		}
		if strings.HasPrefix(r.URL.Path, "/fail") {
			status = http.StatusInternalServerError
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(dest.Close)
	s.dest = dest.URL
	u, _ := url.Parse(dest.URL)
	s.host = u.Host
	srv := redistest.Start(t)
	s.rdb = srv.Client()
	base := map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "k1,ta:ka,tb:kb",
		"ADMIN_KEYS": "adm", "SWEEP_INTERVAL": "1h", "WORKER_CONCURRENCY": "4", "FLOW_FAIR_SHARE": "1"}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.Load(func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, log)
	api := httptest.NewServer(engine)
	t.Cleanup(func() { api.Close(); closeEngine() })
	s.api = api.URL

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunWorker(ctx, cfg, opts, log) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return s
}

func (s *healthStack) answer(status int) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

// hitsOf counts the destination's calls of the requests ids (all when
// none are given).
func (s *healthStack) hitsOf(ids ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		return len(s.hits)
	}
	n := 0
	for _, h := range s.hits {
		for _, id := range ids {
			if h == id {
				n++
			}
		}
	}
	return n
}

// call makes an API call with API key apiKey and returns its status and
// body.
func (s *healthStack) call(t *testing.T, apiKey, method, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submit makes a request (with API key apiKey) to the destination's path
// with the JSON members extra, and returns its id.
func (s *healthStack) submit(t *testing.T, apiKey, path, extra string) string {
	t.Helper()
	code, body := s.call(t, apiKey, "POST", "/requests", `{"url":"`+s.dest+path+`"`+extra+`}`)
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	return jsonField(t, body, "id")
}

// request reads request id's document.
func (s *healthStack) request(t *testing.T, apiKey, id string) map[string]any {
	t.Helper()
	code, body := s.call(t, apiKey, "GET", "/requests/"+id, "")
	if code != http.StatusOK {
		t.Fatalf("read %s: %d %s", id, code, body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually polls cond until it holds or within passes, then fails with
// what.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: %s", within, what)
		}
	}
}

// Pausing a destination's own flow key (its host:port) holds every request
// to it, with a flowControl key or without, and GET /flows lists the key
// with its waiting requests; a resume delivers them.
func TestPausingADestinationsKeyHoldsEveryRequestToIt(t *testing.T) {
	t.Parallel()
	s := startHealthStack(t, nil)
	if code, body := s.call(t, "k1", "POST", "/flows/"+s.host+"/pause", ""); code != http.StatusOK || !strings.Contains(body, `"isPaused":true`) {
		t.Fatalf("pause: %d %s", code, body)
	}
	ids := []string{s.submit(t, "k1", "/a", ""), s.submit(t, "k1", "/b", ""), s.submit(t, "k1", "/c", `,"flowControl":{"key":"named","parallelism":2}`)}
	for _, id := range ids {
		eventually(t, 20*time.Second, id+" waits for its paused destination", func() bool {
			return s.request(t, "k1", id)["waitingFor"] == "paused"
		})
	}
	if n := s.hitsOf(); n != 0 {
		t.Fatalf("the paused destination got %d calls, want none", n)
	}
	code, body := s.call(t, "k1", "GET", "/flows", "")
	var flows struct {
		Data []struct {
			Key     string `json:"key"`
			Waiting int64  `json:"waiting"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &flows); code != http.StatusOK || err != nil {
		t.Fatalf("GET /flows: %d %s (%v)", code, body, err)
	}
	var waiting int64 = -1
	for _, f := range flows.Data {
		if f.Key == s.host {
			waiting = f.Waiting
		}
	}
	if waiting != 3 {
		t.Fatalf("GET /flows shows %d waiting on %s, want 3: %s", waiting, s.host, body)
	}
	if code, body := s.call(t, "k1", "POST", "/flows/"+s.host+"/resume", ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	eventually(t, 20*time.Second, "the resumed requests are delivered", func() bool { return s.hitsOf(ids...) == 3 })
}

// breakerEnv opens an endpoint after 5 attempts (all failed) of the
// window.
var breakerEnv = map[string]string{"BREAKER_MIN_ATTEMPTS": "5", "WORKER_CONCURRENCY": "1"}

// breakerTuning probes an open endpoint every 300 ms at first.
var breakerTuning = app.WorkerOptions{Flow: flow.Tuning{BreakerProbe: 300 * time.Millisecond}}

// failOnce sends n requests, as apiKey, to the destination's path, that
// fail for good at their first failed attempt, and waits until each was
// attempted.
func (s *healthStack) failOnce(t *testing.T, apiKey, path string, n int) {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, s.submit(t, apiKey, path, `,"maxRetries":0`))
	}
	for _, id := range ids {
		eventually(t, 20*time.Second, "request "+id+" is attempted and fails", func() bool {
			return s.request(t, apiKey, id)["status"] == "failed"
		})
	}
}

// endpoints reads GET /endpoints as apiKey.
func (s *healthStack) endpoints(t *testing.T, apiKey string) []map[string]any {
	t.Helper()
	code, body := s.call(t, apiKey, "GET", "/endpoints", "")
	var doc struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("GET /endpoints: %d %s (%v)", code, body, err)
	}
	return doc.Data
}

// notClosed is the endpoints apiKey sees that are not closed.
func (s *healthStack) notClosed(t *testing.T, apiKey string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range s.endpoints(t, apiKey) {
		if e["state"] != "closed" {
			out = append(out, e)
		}
	}
	return out
}

// An endpoint whose attempts fail opens: its requests wait (no attempt,
// no retry budget spent) showing endpoint_open and the next probe; only
// probes reach it; a probe that succeeds closes it and its waiters are
// delivered in the order they came.
func TestAnOpenEndpointHoldsItsRequestsUntilAProbeSucceeds(t *testing.T) {
	t.Parallel()
	opsURL, told := operatorEndpoint(t, nil)
	env := map[string]string{"OPERATOR_EVENTS_URL": opsURL}
	for k, v := range breakerEnv {
		env[k] = v
	}
	s := startHealthStackWith(t, env, breakerTuning)
	s.answer(http.StatusInternalServerError)
	s.failOnce(t, "k1", "/x", 5)
	var waiters []string
	for range 4 {
		waiters = append(waiters, s.submit(t, "k1", "/w", `,"maxRetries":1`))
	}
	for _, id := range waiters {
		eventually(t, 20*time.Second, id+" waits for its open endpoint", func() bool {
			r := s.request(t, "k1", id)
			return r["waitingFor"] == "endpoint_open" && r["nextRetryAt"] != nil
		})
	}
	// Probes fail a few times (each a waiter's attempt, its interval
	// doubling): the others are never attempted meanwhile.
	eventually(t, 20*time.Second, "a probe reaches the open endpoint", func() bool { return s.hitsOf(waiters...) >= 1 })
	if n := s.hitsOf(waiters[1:]...); n != 0 {
		t.Fatalf("requests behind the probe were attempted %d times while the endpoint was open", n)
	}
	eps := s.notClosed(t, "k1")
	if len(eps) != 1 || eps[0]["endpoint"] != "http://"+s.host || (eps[0]["state"] != "open" && eps[0]["state"] != "half_open") {
		t.Fatalf("GET /endpoints: %v, want http://%s open", eps, s.host)
	}
	s.answer(http.StatusOK)
	for _, id := range waiters {
		eventually(t, 30*time.Second, id+" is delivered once a probe succeeds", func() bool {
			return s.request(t, "k1", id)["status"] == "completed"
		})
	}
	s.mu.Lock()
	var order []string
	for _, h := range s.hits {
		if slices.Contains(waiters, h) && !slices.Contains(order, h) {
			order = append(order, h)
		}
	}
	s.mu.Unlock()
	if !slices.Equal(order, waiters) {
		t.Errorf("the waiters started in the order %v, want the order they came, %v", order, waiters)
	}
	if eps := s.notClosed(t, "k1"); len(eps) != 0 {
		t.Errorf("GET /endpoints after a probe succeeded: %v, want it closed", eps)
	}
	// The operator heard of it: the failed requests, the endpoint opened,
	// then closed.
	var kinds []string
	eventually(t, 10*time.Second, "the operator's events", func() bool {
		kinds = kinds[:0]
		for _, e := range told() {
			if e.Type != events.RequestFailed {
				if e.Data["endpoint"] != "http://"+s.host {
					t.Errorf("event %+v names another endpoint than http://%s", e, s.host)
				}
				kinds = append(kinds, e.Type)
			}
		}
		return len(kinds) >= 2
	})
	if !slices.Equal(kinds, []string{events.EndpointOpened, events.EndpointClosed}) {
		t.Errorf("endpoint events %v, want opened then closed", kinds)
	}
	if n := len(told()) - len(kinds); n != 5 {
		t.Errorf("%d request.failed events, want 5", n)
	}
}

// One tenant's failures open its own endpoint only: another tenant's
// requests to the same host go on.
func TestOneTenantsFailuresNeverHoldAnothersDeliveries(t *testing.T) {
	t.Parallel()
	s := startHealthStackWith(t, breakerEnv, breakerTuning)
	s.failOnce(t, "ka", "/fail", 5)
	held := s.submit(t, "ka", "/fail", "")
	eventually(t, 20*time.Second, "tenant a's request waits for its open endpoint", func() bool {
		return s.request(t, "ka", held)["waitingFor"] == "endpoint_open"
	})
	other := s.submit(t, "kb", "/ok", "")
	eventually(t, 20*time.Second, "tenant b's request to the same host is delivered", func() bool {
		return s.request(t, "kb", other)["status"] == "completed"
	})
	if eps := s.notClosed(t, "kb"); len(eps) != 0 {
		t.Errorf("tenant b sees endpoints %v not closed, want none", eps)
	}
	if eps := s.notClosed(t, "ka"); len(eps) != 1 {
		t.Errorf("tenant a sees endpoints %v not closed, want its open one", eps)
	}
	if eps := s.notClosed(t, "adm"); len(eps) != 1 || eps[0]["tenant"] != "ta" {
		t.Errorf("the admin sees endpoints %v not closed, want tenant a's open one", eps)
	}
	eventually(t, 20*time.Second, "tenant b sees the endpoint it used, closed, with its failure ratio", func() bool {
		eps := s.endpoints(t, "kb")
		return len(eps) == 1 && eps[0]["state"] == "closed" && eps[0]["tenant"] == "tb" && eps[0]["failureRatio"] == 0.0
	})
}

// With the breaker off, failures never hold a request.
func TestBreakerOffNeverHoldsARequest(t *testing.T) {
	t.Parallel()
	env := map[string]string{"BREAKER": "off"}
	for k, v := range breakerEnv {
		env[k] = v
	}
	s := startHealthStackWith(t, env, breakerTuning)
	s.failOnce(t, "k1", "/fail", 6)
	id := s.submit(t, "k1", "/ok", "")
	eventually(t, 20*time.Second, "a request after the failures is delivered", func() bool {
		return s.request(t, "k1", id)["status"] == "completed"
	})
}

// BREAKER_FAIL_AFTER ends a request that waited that long for an
// endpoint an operator opened (never probed) as failed (endpoint_down),
// with no call made. (A breaker's endpoint ends its waiters only once a
// probe made while they waited failed: TestARedriveAfterAnOutageIsDelivered.)
func TestWaitersOfAnEndpointDownTooLongFail(t *testing.T) {
	t.Parallel()
	env := map[string]string{"BREAKER_FAIL_AFTER": "1s"}
	for k, v := range breakerEnv {
		env[k] = v
	}
	s := startHealthStackWith(t, env, app.WorkerOptions{Flow: flow.Tuning{BreakerProbe: time.Hour}})
	if code, body := s.call(t, "k1", "POST", "/endpoints/http:"+s.host+"/open", ""); code != http.StatusOK {
		t.Fatalf("open: %d %s", code, body)
	}
	id := s.submit(t, "k1", "/ok", "")
	eventually(t, 30*time.Second, id+" fails as endpoint_down", func() bool {
		code, body := s.call(t, "k1", "GET", "/requests/"+id, "")
		return code == http.StatusOK && strings.Contains(body, `"failed"`) && strings.Contains(body, "endpoint_down")
	})
	if n := s.hitsOf(id); n != 0 {
		t.Errorf("the request ended as endpoint_down was sent %d times", n)
	}
}

// An operator opens an endpoint: its requests wait (never probed) until
// the operator closes it, and are then delivered; another tenant's
// endpoint of the same name is not touched.
func TestAnOperatorOpensAndClosesAnEndpoint(t *testing.T) {
	t.Parallel()
	s := startHealthStackWith(t, breakerEnv, breakerTuning)
	id := "http:" + s.host
	code, body := s.call(t, "ka", "POST", "/endpoints/"+id+"/open", "")
	if code != http.StatusOK || !strings.Contains(body, `"state":"open"`) || !strings.Contains(body, `"openedBy":"operator"`) {
		t.Fatalf("open: %d %s", code, body)
	}
	if code, body := s.call(t, "ka", "POST", "/endpoints/"+url.PathEscape("ftp:x")+"/open", ""); code != http.StatusBadRequest {
		t.Errorf("open of a malformed endpoint: %d %s, want 400", code, body)
	}
	held := s.submit(t, "ka", "/a", "")
	eventually(t, 20*time.Second, "the request waits for the endpoint an operator opened", func() bool {
		return s.request(t, "ka", held)["waitingFor"] == "endpoint_open"
	})
	other := s.submit(t, "kb", "/b", "")
	eventually(t, 20*time.Second, "another tenant's request to the same endpoint is delivered", func() bool {
		return s.request(t, "kb", other)["status"] == "completed"
	})
	if n := s.hitsOf(held); n != 0 {
		t.Fatalf("the held request was sent %d times", n)
	}
	if code, body := s.call(t, "ka", "POST", "/endpoints/"+id+"/close", ""); code != http.StatusOK || !strings.Contains(body, `"state":"closed"`) {
		t.Fatalf("close: %d %s", code, body)
	}
	eventually(t, 20*time.Second, "the request is delivered once the endpoint is closed", func() bool {
		return s.request(t, "ka", held)["status"] == "completed"
	})
}

// The breaker's Redis cost per delivered request, with it on and off
// (RETRYD_MEASURE=1 to run: it measures, and asserts nothing a loaded
// machine could fail).
func TestMeasureBreakerRedisCostPerRequest(t *testing.T) {
	if os.Getenv("RETRYD_MEASURE") == "" {
		t.Skip("a measurement: set RETRYD_MEASURE=1")
	}
	const n = 300
	for _, mode := range []string{"off", "on", "off", "on"} {
		s := startHealthStack(t, map[string]string{"BREAKER": mode, "WORKER_CONCURRENCY": "8"})
		before := infoField(t, s.rdb, "stats", "", "total_commands_processed")
		start := time.Now()
		for range n {
			s.submit(t, "k1", "/m", "")
		}
		eventually(t, 60*time.Second, "every request is delivered", func() bool { return s.hitsOf() >= n })
		elapsed := time.Since(start)
		cmds := infoField(t, s.rdb, "stats", "", "total_commands_processed") - before
		t.Logf("BREAKER=%s: %d requests in %v, %.1f Redis commands per request (the reads of GET /requests excluded: none made)",
			mode, n, elapsed.Round(time.Millisecond), float64(cmds)/n)
	}
}

// What requests waiting for an open endpoint cost: Redis commands to park
// each, and per second while they wait, beside a paused key's
// (RETRYD_MEASURE=1 to run).
func TestMeasureOpenEndpointWaitersCost(t *testing.T) {
	if os.Getenv("RETRYD_MEASURE") == "" {
		t.Skip("a measurement: set RETRYD_MEASURE=1")
	}
	const n = 300
	for _, hold := range []string{"paused", "endpoint_open"} {
		s := startHealthStack(t, map[string]string{"WORKER_CONCURRENCY": "8"})
		if hold == "paused" {
			s.call(t, "k1", "POST", "/flows/"+s.host+"/pause", "")
		} else {
			s.call(t, "k1", "POST", "/endpoints/http:"+s.host+"/open", "")
		}
		time.Sleep(1500 * time.Millisecond) // measured: the workers learn of it
		before := infoField(t, s.rdb, "stats", "", "total_commands_processed")
		var ids []string
		for range n {
			ids = append(ids, s.submit(t, "k1", "/m", ""))
		}
		last := ids[len(ids)-1]
		eventually(t, 60*time.Second, "the last request waits", func() bool { return s.request(t, "k1", last)["waitingFor"] == hold })
		time.Sleep(time.Second) // measured: the parks land
		parked := infoField(t, s.rdb, "stats", "", "total_commands_processed")
		time.Sleep(5 * time.Second)
		idle := infoField(t, s.rdb, "stats", "", "total_commands_processed")
		t.Logf("%s: %.1f Redis commands per request to submit and park it; %.1f commands/s while %d wait", hold,
			float64(parked-before)/n, float64(idle-parked)/5, n)
	}
}

// A destination down with n requests waiting, then back: the attempts
// during the outage (probes only), the stack's Redis commands a second
// then and idle, and the time to drain once it is back
// (RETRYD_MEASURE=1 to run; RETRYD_MEASURE_N requests, default 2000).
func TestMeasureAnOutage(t *testing.T) {
	if os.Getenv("RETRYD_MEASURE") == "" {
		t.Skip("a measurement: set RETRYD_MEASURE=1")
	}
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("RETRYD_MEASURE_N")); err == nil && v > 0 {
		n = v
	}
	s := startHealthStack(t, map[string]string{"WORKER_CONCURRENCY": "8"})
	s.answer(http.StatusInternalServerError)
	s.failOnce(t, "k1", "/trip", 20)
	var ids []string
	for range n {
		ids = append(ids, s.submit(t, "k1", "/m", ""))
	}
	eventually(t, 5*time.Minute, "every request waits for the open endpoint", func() bool {
		eps := s.notClosed(t, "k1")
		return len(eps) == 1 && eps[0]["waiting"].(float64) >= float64(n-1)
	})
	hits := s.hitsOf(ids...)
	before := infoField(t, s.rdb, "stats", "", "total_commands_processed")
	const outage = 20 * time.Second
	time.Sleep(outage) // measured: the outage
	during := infoField(t, s.rdb, "stats", "", "total_commands_processed") - before
	probes := s.hitsOf(ids...) - hits
	s.answer(http.StatusOK)
	back := time.Now()
	eventually(t, 5*time.Minute, "every request is delivered", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		seen := map[string]bool{}
		for _, h := range s.hits {
			seen[h] = true
		}
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	drained := time.Since(back)
	time.Sleep(2 * time.Second) // measured: the records written
	before = infoField(t, s.rdb, "stats", "", "total_commands_processed")
	time.Sleep(10 * time.Second) // measured: idle
	idle := infoField(t, s.rdb, "stats", "", "total_commands_processed") - before
	t.Logf("%d waiting through a %v outage: %d attempts (probes), %.1f Redis commands/s; idle after: %.1f commands/s; drained %v after it came back",
		n, outage, probes, float64(during)/outage.Seconds(), float64(idle)/10, drained.Round(time.Millisecond))
}

// The waiter to be woken for the next probe canceled: the next waiter is
// the probe in its place, not left to its safety net.
func TestACanceledFirstWaiterLeavesTheProbeToTheNext(t *testing.T) {
	t.Parallel()
	s := startHealthStackWith(t, breakerEnv, app.WorkerOptions{Flow: flow.Tuning{BreakerProbe: 2 * time.Second}})
	s.answer(http.StatusInternalServerError)
	s.failOnce(t, "k1", "/x", 5)
	first := s.submit(t, "k1", "/first", "")
	eventually(t, 20*time.Second, "the first waits for its open endpoint", func() bool {
		return s.request(t, "k1", first)["waitingFor"] == "endpoint_open"
	})
	next := s.submit(t, "k1", "/next", "")
	eventually(t, 20*time.Second, "the next waits for its open endpoint", func() bool {
		return s.request(t, "k1", next)["waitingFor"] == "endpoint_open"
	})
	if code, body := s.call(t, "k1", "DELETE", "/requests/"+first, ""); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	s.answer(http.StatusOK)
	eventually(t, 30*time.Second, "the next waiter, sent as the probe, is delivered", func() bool {
		return s.request(t, "k1", next)["status"] == "completed"
	})
	if n := s.hitsOf(first); n != 0 {
		t.Errorf("the canceled request was sent %d times", n)
	}
}

// An admin opens and closes a tenant's endpoint by naming the tenant; the
// tenant sees it, another tenant does not.
func TestAnAdminDecidesForATenant(t *testing.T) {
	t.Parallel()
	s := startHealthStack(t, nil)
	id := "http:" + s.host
	if code, body := s.call(t, "adm", "POST", "/endpoints/"+id+"/open?tenant=ta", ""); code != http.StatusOK || !strings.Contains(body, `"tenant":"ta"`) {
		t.Fatalf("an admin's open of tenant a's endpoint: %d %s", code, body)
	}
	if eps := s.notClosed(t, "ka"); len(eps) != 1 {
		t.Errorf("tenant a sees %v, want the endpoint the admin opened", eps)
	}
	if eps := s.notClosed(t, "kb"); len(eps) != 0 {
		t.Errorf("tenant b sees %v, want none", eps)
	}
	if code, body := s.call(t, "adm", "POST", "/endpoints/"+id+"/close?tenant=ta", ""); code != http.StatusOK || !strings.Contains(body, `"state":"closed"`) {
		t.Fatalf("an admin's close of tenant a's endpoint: %d %s", code, body)
	}
}

// An open endpoint's waiter, woken by the endpoint's close while its park
// is on its way to asynq, starts as soon as the park lands.
func TestWokenInTransitStartsWhenItsEndpointCloses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var held string
	var landed time.Time
	release := make(chan struct{})
	opts := breakerTuning
	opts.Flow.StalledWakeEvery, opts.Flow.ParkFallback = time.Minute, 5*time.Minute // far away: a start there is a stranding
	opts.InTransit = func(ctx context.Context, id string) {
		mu.Lock()
		first := held == ""
		if first {
			held = id
		}
		mu.Unlock()
		if !first {
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		mu.Lock()
		landed = time.Now()
		mu.Unlock()
	}
	s := startHealthStackWith(t, breakerEnv, opts)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	id := "http:" + s.host
	if code, body := s.call(t, "k1", "POST", "/endpoints/"+id+"/open", ""); code != http.StatusOK {
		t.Fatalf("open: %d %s", code, body)
	}
	waiter := s.submit(t, "k1", "/w", "")
	eventually(t, 20*time.Second, "the waiter to be held in transit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return held != ""
	})
	if held != waiter {
		t.Fatalf("held %s, want the waiter %s", held, waiter)
	}
	if code, body := s.call(t, "k1", "POST", "/endpoints/"+id+"/close", ""); code != http.StatusOK {
		t.Fatalf("close: %d %s", code, body)
	}
	close(release) // it lands after its wake
	eventually(t, 10*time.Second, "the waiter woken in transit starts", func() bool { return s.hitsOf(waiter) > 0 })
	mu.Lock()
	t.Logf("the waiter started within %v of landing", time.Since(landed).Round(100*time.Microsecond))
	mu.Unlock()
}
