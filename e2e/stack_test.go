// Package e2e drives retryd as its users run it: real redis-server, the API
// and worker binaries built from cmd/, and a fake destination over HTTP.
package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
)

// bin holds the programs built once for the whole package.
var bin struct{ api, worker, retryctl string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "retryd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.api, bin.worker, bin.retryctl = filepath.Join(dir, "api"), filepath.Join(dir, "worker"), filepath.Join(dir, "retryctl")
	for out, pkg := range map[string]string{bin.api: "./cmd/api", bin.worker: "./cmd/worker", bin.retryctl: "./cmd/retryctl"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = ".."
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running retryd program.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, name, path string, env []string, args ...string) *proc {
	t.Helper()
	dir := os.Getenv("E2E_LOG_DIR") // keep the programs' logs for a look afterwards
	if dir == "" {
		dir = t.TempDir()
	}
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("--- %s log (tail) ---\n%s", name, b)
		}
	})
	return p
}

// stop sends SIGTERM and waits up to grace before SIGKILL.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stack is redis + api + workers.
type stack struct {
	redis     *redistest.Server
	api       string // base URL
	env       []string
	workerEnv []string
	apiProc   *proc
	workers   []*proc
}

// startWorker starts one more worker, with extra environment on top of the
// stack's worker environment.
func (s *stack) startWorker(t testing.TB, extraEnv ...string) *proc {
	t.Helper()
	p := startProc(t, fmt.Sprintf("worker%d", len(s.workers)+1), bin.worker, append(append([]string{}, s.workerEnv...), extraEnv...))
	s.workers = append(s.workers, p)
	return p
}

// restartAPI stops the API (if it still runs) and starts it again.
func (s *stack) restartAPI(t testing.TB) {
	t.Helper()
	s.apiProc.stop(5 * time.Second)
	s.apiProc = startProc(t, "api-restarted", bin.api, s.env)
	s.waitHealthy(t)
}

func (s *stack) waitHealthy(t testing.TB) {
	t.Helper()
	waitFor(t, 20*time.Second, "API /healthz", func() bool { return statusOf(s.api+"/healthz") == 200 })
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startStack starts a private redis-server, the API and n workers, all
// allowing private destinations (the fake destination is on loopback).
func startStack(t testing.TB, workers int, extraEnv ...string) *stack {
	t.Helper()
	env := append([]string{"ALLOW_PRIVATE_TARGETS=true"}, extraEnv...)
	return startStackWith(t, workers, env, env)
}

// startStackWith starts redis, the API with apiEnv and n workers with
// workerEnv (on top of the Redis URL, port and quiet defaults).
func startStackWith(t testing.TB, workers int, apiEnv, workerEnv []string) *stack {
	t.Helper()
	return startStackFull(t, redistest.StartServer(t, redistest.Options{}), workers, apiEnv, workerEnv)
}

// startStackOn starts the API and n workers on an existing Redis, allowing
// private destinations.
func startStackOn(t testing.TB, r *redistest.Server, workers int, extraEnv ...string) *stack {
	t.Helper()
	env := append([]string{"ALLOW_PRIVATE_TARGETS=true"}, extraEnv...)
	return startStackFull(t, r, workers, env, env)
}

func startStackFull(t testing.TB, r *redistest.Server, workers int, apiEnv, workerEnv []string) *stack {
	t.Helper()
	port := freePort(t)
	base := []string{"REDIS_URL=" + r.URL, fmt.Sprintf("PORT=%d", port), "LOG_LEVEL=info", "API_KEYS=",
		"ALLOW_PRIVATE_TARGETS=false", "WORKER_CONCURRENCY=20"}
	s := &stack{redis: r, api: fmt.Sprintf("http://127.0.0.1:%d", port), env: append(base, apiEnv...),
		workerEnv: append(append([]string{}, base...), workerEnv...)}
	s.apiProc = startProc(t, "api", bin.api, s.env)
	for i := 0; i < workers; i++ {
		s.startWorker(t)
	}
	s.waitHealthy(t)
	return s
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t testing.TB, method, url, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// statusOf is the status of a GET of url, 0 when it gets no answer (for
// polls of a listener that may not be up yet).
func statusOf(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (s *stack) submit(t testing.TB, body string, headers ...string) string {
	t.Helper()
	a := call(t, "POST", s.api+"/requests", body, headers...)
	if a.status != http.StatusAccepted {
		t.Fatalf("submit %s: %d %s", body, a.status, a.raw)
	}
	return a.body["id"].(string)
}

func (s *stack) get(t testing.TB, id string) map[string]any {
	t.Helper()
	a := call(t, "GET", s.api+"/requests/"+id, "")
	if a.status != 200 {
		t.Fatalf("GET %s: %d %s", id, a.status, a.raw)
	}
	return a.body
}

// waitStatus polls until the request reaches a terminal status and returns
// its document.
func (s *stack) waitTerminal(t testing.TB, id string, within time.Duration) map[string]any {
	t.Helper()
	var doc map[string]any
	waitFor(t, within, "request "+id+" to finish", func() bool {
		doc = s.get(t, id)
		switch doc["status"] {
		case "completed", "failed", "canceled":
			return true
		}
		return false
	})
	return doc
}

// hit is one call the destination received.
type hit struct {
	at     time.Time
	method string
	header http.Header
	body   string
}

// destination is a fake peer: each path answers by a script of status codes
// (the last one repeats) and records every call.
type destination struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string][]hit
	scripts map[string][]int
	headers map[string]http.Header
}

func newDestination(t testing.TB) *destination {
	d := &destination{hits: map[string][]hit{}, scripts: map[string][]int{}, headers: map[string]http.Header{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.hits[r.URL.Path] = append(d.hits[r.URL.Path], hit{at: time.Now(), method: r.Method, header: r.Header.Clone(), body: string(body)})
		n := len(d.hits[r.URL.Path])
		script := d.scripts[r.URL.Path]
		extra := d.headers[r.URL.Path]
		d.mu.Unlock()
		code := 200
		if len(script) > 0 {
			code = script[min(n, len(script))-1]
		}
		for k, v := range extra {
			w.Header()[k] = v
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d to call %d", code, n)
	}))
	t.Cleanup(d.Close)
	return d
}

// script sets the answers of path and returns its full URL.
func (d *destination) script(path string, codes ...int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scripts[path] = codes
	return d.URL + path
}

func (d *destination) calls(path string) []hit {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]hit(nil), d.hits[path]...)
}

// newServer starts a destination with a handler of the test's own and
// returns its URL.
func newServer(t testing.TB, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
