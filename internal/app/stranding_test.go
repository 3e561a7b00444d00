package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/redistest"
)

// transitStack is an API and a worker in this process on a Redis of their
// own, whose worker holds the first request it parks in transit (its park
// decided, its task not yet back in asynq) until that request is woken.
// Its destination answers /block when released, /bad with a 400, /flaky
// with a 500 twice and then a 200, and anything else with a 200 at once.
type transitStack struct {
	api, dest string
	// block holds the destination's calls to /block until closed.
	block chan struct{}

	mu sync.Mutex
	// held is the request held in transit, landed when it was let go.
	held   string
	landed time.Time
	hits   map[string]time.Time
	// headers are what the destination received, by request id; tries
	// how often /flaky was called.
	headers map[string]http.Header
	tries   map[string]int
	// woken closes when held was woken (by the worker's owner, or by the
	// test through wokenByTest).
	woken     chan struct{}
	wokenOnce sync.Once
}

func startTransitStack(t *testing.T, env map[string]string) *transitStack {
	t.Helper()
	return startTransitStackWith(t, env, app.EngineOptions{})
}

// startTransitStackWith is startTransitStack with the API's options eo.
func startTransitStackWith(t *testing.T, env map[string]string, eo app.EngineOptions) *transitStack {
	t.Helper()
	s := &transitStack{block: make(chan struct{}), hits: map[string]time.Time{}, woken: make(chan struct{}), headers: map[string]http.Header{}, tries: map[string]int{}}
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.hits[r.Header.Get(egress.RequestIDHeader)] = time.Now()
		s.headers[r.Header.Get(egress.RequestIDHeader)] = r.Header.Clone()
		s.mu.Unlock()
		switch r.URL.Path {
		case "/block":
			select {
			case <-s.block:
			case <-r.Context().Done():
			}
		case "/bad":
			w.WriteHeader(http.StatusBadRequest)
		case "/flaky":
			s.mu.Lock()
			s.tries[r.Header.Get(egress.RequestIDHeader)]++
			n := s.tries[r.Header.Get(egress.RequestIDHeader)]
			s.mu.Unlock()
			if n <= 2 {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}
	}))
	t.Cleanup(dest.Close)
	t.Cleanup(func() { s.release() })
	s.dest = dest.URL
	srv := redistest.Start(t)
	base := map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "k1",
		"SWEEP_INTERVAL": "1h", "WORKER_CONCURRENCY": "4", "FLOW_FAIR_SHARE": "1"}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.Load(func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, eo, log)
	api := httptest.NewServer(engine)
	t.Cleanup(func() { api.Close(); closeEngine() })
	s.api = api.URL

	opts := app.WorkerOptions{
		// The safety nets far away: a waiter they start is a stranded one.
		Flow: flow.Tuning{StalledWakeEvery: time.Minute, ParkFallback: 5 * time.Minute},
		InTransit: func(ctx context.Context, id string) {
			s.mu.Lock()
			first := s.held == ""
			if first {
				s.held = id
			}
			s.mu.Unlock()
			if !first {
				return
			}
			select {
			case <-s.woken:
			case <-time.After(20 * time.Second):
				t.Errorf("the request held in transit, %s, was never woken", id)
			case <-ctx.Done():
			}
			s.mu.Lock()
			s.landed = time.Now()
			s.mu.Unlock()
		},
		OnWake: func(id string, _ error) {
			s.mu.Lock()
			held := s.held
			s.mu.Unlock()
			if id == held {
				s.wokenByTest()
			}
		},
	}
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

// wokenByTest lets the request held in transit land: it was woken.
func (s *transitStack) wokenByTest() { s.wokenOnce.Do(func() { close(s.woken) }) }

func (s *transitStack) release() {
	select {
	case <-s.block:
	default:
		close(s.block)
	}
}

// call makes an API call and returns its status and body.
func (s *transitStack) call(t *testing.T, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submit makes a request to the destination's path with the JSON members
// extra, and returns its id.
func (s *transitStack) submit(t *testing.T, path, extra string) string {
	t.Helper()
	code, body := s.call(t, "POST", "/requests", `{"url":"`+s.dest+path+`"`+extra+`}`)
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	return jsonField(t, body, "id")
}

// enqueue sends a message to QStash queue name and returns its id.
func (s *transitStack) enqueue(t *testing.T, queue, path string) string {
	t.Helper()
	code, body := s.call(t, "POST", "/v2/enqueue/"+queue+"/"+s.dest+path, `{}`)
	if code != http.StatusCreated && code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("enqueue: %d %s", code, body)
	}
	return jsonField(t, body, "messageId")
}

// hit waits for the destination's call of request id and returns when it
// came; zero after the deadline.
func (s *transitStack) hit(id string, within time.Duration) time.Time {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		s.mu.Lock()
		at, ok := s.hits[id]
		s.mu.Unlock()
		if ok {
			return at
		}
	}
	return time.Time{}
}

// heldID waits for the request held in transit.
func (s *transitStack) heldID(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		s.mu.Lock()
		id := s.held
		s.mu.Unlock()
		if id != "" {
			return id
		}
	}
	t.Fatal("no request was parked")
	return ""
}

// startsSoonAfterLanding checks that waiter, woken while held in transit,
// starts soon after it landed: not at a safety net (a minute and more
// here). The bound is loose for a loaded machine; the delay is logged.
func (s *transitStack) startsSoonAfterLanding(t *testing.T, waiter string) {
	t.Helper()
	if held := s.heldID(t); held != waiter {
		t.Fatalf("held in transit %s, want the waiter %s", held, waiter)
	}
	at := s.hit(waiter, 10*time.Second)
	s.mu.Lock()
	landed := s.landed
	s.mu.Unlock()
	if at.IsZero() {
		t.Fatalf("the waiter woken in transit had not started 10 s after it landed: stranded until a safety net")
	}
	delay := at.Sub(landed)
	t.Logf("the waiter started %v after it landed", delay.Round(100*time.Microsecond))
	if delay > 3*time.Second {
		t.Errorf("the waiter started %v after it landed, want well within a second", delay)
	}
}

// A request paused behind its key, resumed while its park is on its way
// to asynq, starts as soon as the park lands.
func TestWokenInTransitStartsResumed(t *testing.T) {
	t.Parallel()
	s := startTransitStack(t, nil)
	if code, body := s.call(t, "POST", "/flows/pk/pause", ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	waiter := s.submit(t, "/w", `,"flowControl":{"key":"pk"}`)
	s.heldID(t)
	if code, body := s.call(t, "POST", "/flows/pk/resume", ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	s.wokenByTest() // the API's resume woke it
	s.startsSoonAfterLanding(t, waiter)
}

// A queue's next message, whose turn comes while its park is on its way,
// starts as soon as the park lands.
func TestWokenInTransitStartsQueued(t *testing.T) {
	t.Parallel()
	s := startTransitStack(t, nil)
	first := s.enqueue(t, "tq", "/block")
	if s.hit(first, 10*time.Second).IsZero() {
		t.Fatal("the queue's first message never started")
	}
	waiter := s.enqueue(t, "tq", "/w")
	s.heldID(t)
	s.release() // the first ends; its queue wakes the waiter
	s.startsSoonAfterLanding(t, waiter)
}

// A parallelism key's waiter, handed a slot while its park is on its way,
// starts as soon as the park lands.
func TestWokenInTransitStartsInParallelism(t *testing.T) {
	t.Parallel()
	s := startTransitStack(t, nil)
	fc := `,"flowControl":{"key":"par","parallelism":1}`
	first := s.submit(t, "/block", fc)
	if s.hit(first, 10*time.Second).IsZero() {
		t.Fatal("the key's first request never started")
	}
	waiter := s.submit(t, "/w", fc)
	s.heldID(t)
	s.release()
	s.startsSoonAfterLanding(t, waiter)
}

// A destination's fairness waiter, promoted while its park is on its way,
// starts as soon as the park lands.
func TestWokenInTransitStartsInFairness(t *testing.T) {
	t.Parallel()
	// Two slots, half for one destination: one.
	s := startTransitStack(t, map[string]string{"WORKER_CONCURRENCY": "2", "FLOW_FAIR_SHARE": "0.5"})
	first := s.submit(t, "/block", "")
	if s.hit(first, 10*time.Second).IsZero() {
		t.Fatal("the destination's first request never started")
	}
	waiter := s.submit(t, "/w", "")
	s.heldID(t)
	s.release()
	s.startsSoonAfterLanding(t, waiter)
}

// jsonField is the string member name of the JSON object body.
func jsonField(t *testing.T, body, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	v, _ := m[name].(string)
	if v == "" {
		t.Fatalf("no %q in %s", name, body)
	}
	return v
}
