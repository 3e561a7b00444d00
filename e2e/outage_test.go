package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/tasks"
)

// The sweeper makes "never stuck" true whatever happens to asynq's task: a
// task deleted behind retryd's back, and one stranded "active" without a
// lease (asynq issues #1051, #1144), both end completed.
func TestSweeperRecoversLostAndStrandedTasks(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0, "SWEEP_INTERVAL=1s")
	dest := newDestination(t)
	lost := s.submit(t, fmt.Sprintf(`{"url":%q}`, dest.script("/lost", 200)))
	stranded := s.submit(t, fmt.Sprintf(`{"url":%q}`, dest.script("/stranded", 200)))

	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: s.redis.Addr})
	defer insp.Close()
	if err := insp.DeleteTask(tasks.Queue, lost); err != nil {
		t.Fatalf("delete task: %v", err)
	}
	rdb := s.redis.Client()
	ctx := context.Background()
	q := "asynq:{" + tasks.Queue + "}:"
	pipe := rdb.TxPipeline()
	pipe.LRem(ctx, q+"pending", 0, stranded)
	pipe.RPush(ctx, q+"active", stranded)
	pipe.HSet(ctx, q+"t:"+stranded, "state", "active")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	s.startWorker(t)
	for _, id := range []string{lost, stranded} {
		if doc := s.waitTerminal(t, id, 30*time.Second); doc["status"] != "completed" {
			t.Errorf("%s ended %v", id, doc["status"])
		}
	}
	if len(dest.calls("/lost")) != 1 || len(dest.calls("/stranded")) != 1 {
		t.Errorf("deliveries: lost %d, stranded %d; want 1 each", len(dest.calls("/lost")), len(dest.calls("/stranded")))
	}
}

// Redis is SIGKILLed with 200 acknowledged requests in it and restarted
// from its append-only file: every one of them completes.
func TestRedisKillAndAOFRestartLosesNothing(t *testing.T) {
	t.Parallel()
	r := redistest.StartServer(t, redistest.Options{Persistent: true})
	s := startStackOn(t, r, 0, "SWEEP_INTERVAL=1s")
	dest := newDestination(t)
	var ids []string
	for i := 0; i < 200; i++ {
		ids = append(ids, s.submit(t, fmt.Sprintf(`{"url":%q}`, dest.script("/aof", 200))))
	}
	r.Kill()
	r.Restart()
	s.startWorker(t)
	s.startWorker(t)
	for _, id := range ids {
		if doc := s.waitTerminal(t, id, 60*time.Second); doc["status"] != "completed" {
			t.Errorf("%s ended %v", id, doc["status"])
		}
	}
	if n := len(dest.calls("/aof")); n != 200 {
		t.Errorf("%d deliveries, want 200", n)
	}
}

// With Redis down the API answers 503 (never 202) and /readyz fails; when
// Redis is back, the API and the workers resume without a restart.
func TestRedisDownThenBack(t *testing.T) {
	t.Parallel()
	r := redistest.StartServer(t, redistest.Options{Persistent: true})
	workerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := startStackOn(t, r, 1, "METRICS_ADDR="+workerAddr)
	dest := newDestination(t)
	before := s.submit(t, fmt.Sprintf(`{"url":%q,"delayMs":1500}`, dest.script("/before", 200)))
	// The worker's listener may come up after the API's: until it does, the
	// GET fails, which is "not ready yet" here.
	waitFor(t, 10*time.Second, "the worker ready", func() bool { return statusOf("http://"+workerAddr+"/readyz") == 200 })
	logBefore, _ := os.ReadFile(s.workers[0].log)
	r.Kill()
	// The worker's readiness follows Redis; its liveness does not.
	waitFor(t, 10*time.Second, "the worker's /readyz to fail", func() bool {
		return call(t, "GET", "http://"+workerAddr+"/readyz", "").status == 503
	})
	if a := call(t, "GET", "http://"+workerAddr+"/healthz", ""); a.status != 200 {
		t.Errorf("the worker's /healthz with Redis down: %d", a.status)
	}
	a := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q}`, dest.script("/during", 200)))
	if e, _ := a.body["error"].(map[string]any); a.status != 503 || e["code"] != "unavailable" {
		t.Errorf("submit with Redis down: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", s.api+"/readyz", ""); a.status != 503 {
		t.Errorf("/readyz with Redis down: %d", a.status)
	}
	if a := call(t, "GET", s.api+"/healthz", ""); a.status != 200 {
		t.Errorf("/healthz with Redis down: %d", a.status)
	}
	time.Sleep(2 * time.Second) // the workers meet the outage too
	logDuring, _ := os.ReadFile(s.workers[0].log)
	// Repeated errors are summarised, not written on every poll.
	n := strings.Count(string(logDuring[len(logBefore):]), "\n")
	t.Logf("LOGS the worker wrote %d lines in the first 2 s of a Redis outage", n)
	if n > 40 {
		t.Errorf("the worker wrote %d log lines in about 2 s of outage, want repeats summarised", n)
	}
	r.Restart()
	waitFor(t, 20*time.Second, "/readyz back", func() bool { return call(t, "GET", s.api+"/readyz", "").status == 200 })
	waitFor(t, 20*time.Second, "the worker's /readyz back", func() bool { return statusOf("http://"+workerAddr+"/readyz") == 200 })
	after := s.submit(t, fmt.Sprintf(`{"url":%q}`, dest.script("/after", 200)))
	for _, id := range []string{before, after} {
		if doc := s.waitTerminal(t, id, 30*time.Second); doc["status"] != "completed" {
			t.Errorf("%s ended %v", id, doc["status"])
		}
	}
	if n := len(dest.calls("/during")); n != 0 {
		t.Errorf("the request refused with 503 was delivered %d times", n)
	}
}

// SIGTERM on a worker: an attempt that finishes within the drain bound is
// recorded by that worker; one that does not is cut, recorded as
// interrupted, and completed by another worker. The worker exits in time.
func TestWorkerSIGTERM(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0, "SWEEP_INTERVAL=1s")
	var slowCalls atomic.Int32
	dest := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/quick":
			time.Sleep(1500 * time.Millisecond)
		case "/slow":
			if slowCalls.Add(1) == 1 {
				select {
				case <-time.After(60 * time.Second):
				case <-r.Context().Done():
				}
				return
			}
		}
		w.WriteHeader(200)
	})
	w1 := s.startWorker(t)
	quick := s.submit(t, fmt.Sprintf(`{"url":%q,"timeoutMs":60000}`, dest+"/quick"))
	slow := s.submit(t, fmt.Sprintf(`{"url":%q,"timeoutMs":120000,"maxRetries":0}`, dest+"/slow"))
	waitFor(t, 10*time.Second, "both attempts in flight", func() bool {
		return s.get(t, quick)["attemptCount"] == 1.0 && s.get(t, slow)["attemptCount"] == 1.0
	})
	start := time.Now()
	if err := w1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w1.done:
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not exit within 15 s of SIGTERM")
	}
	if el := time.Since(start); el > 11*time.Second {
		t.Errorf("worker took %v to stop; the drain bound is 8 s", el)
	}
	if code := w1.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("worker exit code %d after SIGTERM", code)
	}
	if doc := s.get(t, quick); doc["status"] != "completed" {
		t.Errorf("the attempt that fit in the drain bound: %v", doc["status"])
	}
	s.startWorker(t)
	doc := s.waitTerminal(t, slow, 30*time.Second)
	var outcomes []string
	for _, a := range doc["attempts"].([]any) {
		outcomes = append(outcomes, a.(map[string]any)["outcome"].(string))
	}
	if doc["status"] != "completed" || strings.Join(outcomes, ",") != "interrupted,success" {
		t.Errorf("cut attempt: status %v outcomes %v, want completed after interrupted,success", doc["status"], outcomes)
	}
}

// SIGTERM on the API while a submission is still being uploaded: the API
// finishes it (202, stored) before it exits.
func TestAPISIGTERMDrainsInFlightRequests(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	dest := newDestination(t)
	body := fmt.Sprintf(`{"url":%q,"body":"%s"}`, dest.script("/drain", 200), strings.Repeat("x", 1000))
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /requests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	_, _ = io.WriteString(conn, body[:500])
	time.Sleep(200 * time.Millisecond) // the server is now reading the body
	if err := s.apiProc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	_, _ = io.WriteString(conn, body[500:])
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the in-flight submission: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Errorf("in-flight submission answered %d, want 202", resp.StatusCode)
	}
	select {
	case <-s.apiProc.done:
	case <-time.After(12 * time.Second):
		t.Fatal("API did not exit after draining")
	}
	if code := s.apiProc.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("API exit code %d", code)
	}
}
