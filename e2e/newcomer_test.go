package e2e

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// What a newcomer meets first: a root that says where to go, errors that
// name their remedy, and no silent dead end.
func TestNewcomerIsToldWhatToDo(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, []string{"API_KEYS=newcomer-key", "ALLOWED_CIDRS=127.0.0.0/8"}, []string{"ALLOWED_CIDRS=127.0.0.0/8"})
	as := func(method, path, body string) answer {
		t.Helper()
		return call(t, method, s.api+path, body, "Authorization", "Bearer newcomer-key")
	}
	root := call(t, "GET", s.api+"/", "")
	links, _ := root.body["links"].(map[string]any)
	if root.status != 200 || links["openapi"] != "/openapi.json" || links["dashboard"] != "/monitoring/" || links["health"] != "/healthz" {
		t.Errorf("GET /: %d %s, want 200 with links to /openapi.json, /monitoring/ and /healthz", root.status, root.raw)
	}

	private := as("POST", "/requests", `{"url":"http://10.1.2.3/hook"}`)
	if private.status != 422 || !strings.Contains(private.raw, "ALLOWED_CIDRS") || !strings.Contains(private.raw, "ALLOW_PRIVATE_TARGETS") {
		t.Errorf("a private destination: %d %s, want 422 naming ALLOWED_CIDRS and ALLOW_PRIVATE_TARGETS", private.status, private.raw)
	}

	dest := newDestination(t)
	id := as("POST", "/requests", fmt.Sprintf(`{"url":%q}`, dest.script("/done", 200))).body["id"].(string)
	waitFor(t, 15*time.Second, "the request to complete", func() bool { return as("GET", "/requests/"+id, "").body["status"] == "completed" })
	// A redrive of a completed request is refused: the remedy is a new
	// request, never a redrive.
	if a := as("DELETE", "/requests/"+id, ""); a.status != 409 || strings.Contains(a.raw, "redrive") || !strings.Contains(a.raw, "POST /requests") {
		t.Errorf("cancel of a completed request: %d %s, want 409 pointing at a new request, not at a redrive", a.status, a.raw)
	}

	_, stderr, code := s.retryctl(t, nil, "list")
	if code == 0 || !strings.Contains(stderr, "RETRYD_API_KEY") {
		t.Errorf("retryctl without a key: exit %d, stderr %q; want an error naming RETRYD_API_KEY", code, stderr)
	}
}

// An API with no worker says so in /readyz and in its log, instead of
// taking requests that nothing delivers.
func TestAPIWithoutWorkersSaysSo(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	ready := call(t, "GET", s.api+"/readyz", "")
	if ready.status != 200 || ready.body["workers"] != 0.0 || !strings.Contains(fmt.Sprint(ready.body["warning"]), "no worker is running") {
		t.Errorf("/readyz with no worker: %d %s, want workers 0 and a warning", ready.status, ready.raw)
	}
	waitFor(t, 40*time.Second, "the API to log that no worker runs", func() bool {
		b, _ := os.ReadFile(s.apiProc.log)
		return strings.Contains(string(b), "no worker is running")
	})
	s.startWorker(t)
	waitFor(t, 20*time.Second, "/readyz to count the worker", func() bool {
		a := call(t, "GET", s.api+"/readyz", "")
		return a.body["workers"] == 1.0 && a.body["warning"] == nil
	})
}

// A port in use is the error an API reports, before any word about Redis.
func TestBusyPortIsTheErrorReported(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	p := startProc(t, "api-busy-port", bin.api, []string{"REDIS_URL=redis://127.0.0.1:1/0", fmt.Sprintf("PORT=%d", port)},
		"-listen", fmt.Sprintf("127.0.0.1:%d", port))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the API still runs on a port in use")
	}
	b, _ := os.ReadFile(p.log)
	log := string(b)
	if !strings.Contains(log, "address already in use") || strings.Contains(log, "redis does not answer") {
		t.Errorf("the API's log on a busy port:\n%s\nwant the listen error and no word about Redis", log)
	}
}
