package app_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/luascript"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/redistest/keywatch"
	"github.com/retryd/retryd/internal/waiting"
	"github.com/retryd/retryd/internal/waiting/asynqx"
)

// lineKey is a waiting line's key: flow's per-name state
// ("{retryd-flow:<hash>}:<kind>", keys.Flow) of a kind that is a
// line: a parallelism key's line ("wait"), a paused key's ("paused"), a
// queue's, a fairness, cut or endpoint line ("line"); the line library
// (internal/flow/lines) lists these kinds. The pattern is written out rather than taken from
// the key-name functions so that a change of names shows here: the test
// fails when no flow script touched a key it matches.
var lineKey = regexp.MustCompile(`^\{retryd-flow:[0-9a-f]{16}\}:(wait|paused|line)$`)

// knownScripts says whether sha is a script loaded from .lua files: one
// luascript.Load built, or a .lua file of the module loaded whole
// (packages that embed one file and hand it to redis.NewScript).
func knownScripts(t *testing.T) func(string) (string, bool) {
	t.Helper()
	whole := map[string]string{}
	root, _ := filepath.Abs("../..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".lua") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha1.Sum(b)
			whole[hex.EncodeToString(sum[:])] = strings.TrimSuffix(filepath.Base(p), ".lua")
		}
		return nil
	})
	if err != nil || len(whole) < 20 {
		t.Fatalf("read the module's .lua files under %s: %d found, %v", root, len(whole), err)
	}
	return func(sha string) (string, bool) {
		if luascript.Known(sha) {
			return luascript.Files(sha), true
		}
		f, ok := whole[sha]
		return f, ok
	}
}

// asynqVia are the packages besides internal/waiting that reach asynq's
// keys through asynq's client or inspector, or asynqmon.
var asynqVia = map[string]string{
	"internal/dashboard": "asynqmon's reads, and its queue-level actions; a task's run, archive, delete or cancel is retryd's own action",
	"internal/app":       "the inspector's reads: live workers, queue sizes for the metrics",
}

// watchedConnOpt makes the clients the dashboard opens watched.
type watchedConnOpt struct {
	asynq.RedisConnOpt
	w *keywatch.Watcher
}

func (o watchedConnOpt) MakeRedisClient() any {
	c := o.RedisConnOpt.MakeRedisClient().(redis.UniversalClient)
	c.AddHook(o.w)
	return c
}

// Every command an API and a worker send while requests wait (for a
// parallelism key and a rate, in a queue, paused, delayed, canceled,
// retried) keeps to who may touch what: asynq's keys only from
// internal/waiting, a line written only by flow's scripts, every script
// from .lua files. And the watch sees a command that breaks each rule,
// however its key was built.
func TestEveryCommandKeepsToWhoMayTouchWhat(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := keywatch.New(keywatch.Config{IsLine: lineKey.MatchString, KnownScript: knownScripts(t),
		IsAsynq: asynqx.IsKey, Via: asynqVia})

	var mu sync.Mutex
	tries := map[string]int{}
	release := make(chan struct{}) // holds /slow* until closed
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	dest := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		tries[r.URL.Path]++
		n := tries[r.URL.Path]
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/slow") {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		if r.URL.Path == "/flaky" && n == 1 {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rw.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(dest.Close)
	delivered := func(path string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return tries[path] > 0 }
	}

	srv := redistest.Start(t)
	rdb := srv.Client()
	rdb.AddHook(w)
	env := map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "k1",
		"SWEEP_INTERVAL": "1h", "WORKER_CONCURRENCY": "4"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, closeEngine := app.APIEngine(cfg, rdb, watchedConnOpt{asynq.RedisClientOpt{Addr: srv.Addr}, w}, app.EngineOptions{}, log)
	api := httptest.NewServer(engine)
	t.Cleanup(func() { api.Close(); closeEngine() })
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := app.WorkerOptions{RedisHooks: []redis.Hook{w}, Waiting: waiting.Tuning{TroubleBase: 50 * time.Millisecond}}
	go func() { done <- app.RunWorker(ctx, cfg, opts, log) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	s := &healthStack{api: api.URL, dest: dest.URL}

	// Two slow requests hold the destination's share of the slots (half
	// of 4): a third waits in its fairness line until they end.
	s.submit(t, "k1", "/slow1", "")
	s.submit(t, "k1", "/slow2", "")
	eventually(t, 15*time.Second, "both slow requests started", func() bool { return delivered("/slow1")() && delivered("/slow2")() })
	fair := s.submit(t, "k1", "/fair", "")
	eventually(t, 15*time.Second, "the third request waits for its share", func() bool {
		return s.request(t, "k1", fair)["waitingFor"] == "fair_share"
	})
	releaseOnce.Do(func() { close(release) })
	eventually(t, 15*time.Second, "/fair is delivered", delivered("/fair"))

	// A parallelism key with a rate, twice; a queue; a retry; a delayed
	// request, and one canceled while it waits.
	fc := `,"flowControl":{"key":"kw","parallelism":1,"rate":50,"periodMs":1000}`
	s.submit(t, "k1", "/fc1", fc)
	s.submit(t, "k1", "/fc2", fc)
	s.submit(t, "k1", "/flaky", `,"backoffMs":100,"callbackUrl":"`+dest.URL+`/callback"`)
	s.submit(t, "k1", "/later", `,"delayMs":300`)
	canceled := s.submit(t, "k1", "/never", `,"delayMs":60000`)
	if code, body := s.call(t, "k1", "DELETE", "/requests/"+canceled, ""); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if code, body := s.call(t, "k1", "POST", "/v2/enqueue/kwq/"+dest.URL+"/queued", "x"); code/100 != 2 {
		t.Fatalf("enqueue: %d %s", code, body)
	}
	// A paused key holds its request in the paused line until resumed.
	if code, body := s.call(t, "k1", "POST", "/flows/kwp/pause", ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	held := s.submit(t, "k1", "/paused", `,"flowControl":{"key":"kwp","parallelism":1}`)
	eventually(t, 15*time.Second, "the paused key's request waits", func() bool {
		return s.request(t, "k1", held)["waitingFor"] == "paused"
	})
	if code, body := s.call(t, "k1", "POST", "/flows/kwp/resume", ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	// The dashboard's reads of asynq's queues go through asynqmon.
	for _, p := range []string{app.DashboardPath + "/api/queues", app.DashboardPath + "/api/queues/retryd/scheduled_tasks", "/metrics"} {
		if code, body := s.call(t, "k1", "GET", p, ""); code != http.StatusOK {
			t.Fatalf("dashboard %s: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/fc1", "/fc2", "/later", "/queued", "/paused"} {
		eventually(t, 15*time.Second, p+" is delivered", delivered(p))
	}
	eventually(t, 15*time.Second, "/flaky is retried after its 503", func() bool { mu.Lock(); defer mu.Unlock(); return tries["/flaky"] >= 2 })
	eventually(t, 15*time.Second, "the callback is called", delivered("/callback"))

	for _, v := range w.Violations() {
		t.Errorf("%v", v)
	}
	seen := w.Seen()
	var fromWaiting, flowScripts int
	for k, n := range seen {
		f := strings.Fields(k)
		if len(f) > 3 { // "lib via pkg CMD class"
			f = []string{f[0] + " via " + f[2], f[3], f[4]}
		}
		if strings.HasPrefix(f[0], "internal/waiting") && f[2] == "asynq" {
			fromWaiting += n
		}
		if f[0] == "internal/flow/flowdb" && strings.HasPrefix(f[1], "EVAL") && f[2] == "line" {
			flowScripts += n
		}
		if f[2] != "other" && (strings.Contains(f[0], ".") || os.Getenv("KEYWATCH_ALL") != "") {
			t.Logf("seen: %s ×%d", k, n)
		}
	}
	if fromWaiting == 0 || flowScripts == 0 {
		t.Fatalf("the watch saw %d commands of internal/waiting on asynq's keys and %d flow scripts on lines: it watched nothing (%v)",
			fromWaiting, flowScripts, seen)
	}
	lines := w.Keys("line")
	checkFlowScripts(t, w.LineSlots())

	// Commands that break each rule, from this test (not the owner), are
	// seen, however their keys are built.
	before := len(w.Violations())
	q := "retryd"
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	planted := []struct{ rule, what string }{{keywatch.RuleAsynqKeys, "ZREM on asynq's scheduled set"},
		{keywatch.RuleLineWrite, "ZREM on " + lines[0]}, {keywatch.RuleScript, "EVAL of a Go string"},
		{keywatch.RuleAsynqKeys, "a task run through asynq's inspector"}}
	_ = rdb.Do(pctx, "ZREM", fmt.Sprintf("%s:{%s}:%s", "asynq", q, "scheduled"), "id").Err()
	_ = rdb.Do(pctx, "ZREM", lines[0], "id").Err()
	_ = rdb.Eval(pctx, `return redis.call("ZCARD", KEYS[1])`, []string{"kw-plain"}).Err()
	_ = asynq.NewInspectorFromRedisClient(rdb).RunTask(q, "planted")
	got := w.Violations()[before:]
	if len(got) < len(planted) {
		t.Fatalf("planted %d violations, saw %d: %v", len(planted), len(got), got)
	}
	for i, p := range planted {
		if by := strings.Fields(got[i].By); got[i].Rule != p.rule || by[len(by)-1] != "internal/app_test" {
			t.Errorf("%s: reported as %v, want rule %q by internal/app_test", p.what, got[i], p.rule)
		}
	}
	t.Logf("watched %d kinds of command in %v", len(seen), time.Since(start).Round(time.Millisecond))
}
