package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/tasks"
)

// failed submits a request to path that the destination fails, and waits
// until it is in the DLQ.
func (s *stack) failed(t *testing.T, url string) string {
	t.Helper()
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":1,"backoffMs":100}`, url))
	if doc := s.waitTerminal(t, id, 10*time.Second); doc["status"] != "failed" {
		t.Fatalf("request %s ended %v, want failed", id, doc["status"])
	}
	return id
}

func (s *stack) dlqIDs(t *testing.T, query string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	cursor := ""
	for {
		a := call(t, "GET", s.api+"/dlq?limit=500&"+query+"&cursor="+cursor, "")
		if a.status != 200 {
			t.Fatalf("GET /dlq?%s: %d %s", query, a.status, a.raw)
		}
		for _, d := range a.body["data"].([]any) {
			doc := d.(map[string]any)
			out[doc["id"].(string)] = doc
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func redrivesOf(doc map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range doc["redrives"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// The recovery drill: a destination fails → the request is in the DLQ →
// the destination is fixed → one selected entry is redriven → exactly one
// successful completion, with a complete audit record.
func TestRecoveryDrill(t *testing.T) {
	s := startStack(t, 2, "REDRIVE_LIMIT=3")
	dest := newDestination(t)

	for _, c := range []struct {
		name      string
		codes     []int // before the fix
		fixed     int   // after the fix
		class     string
		wantFinal string
	}{
		{"server error", []int{500}, 200, "server_error", "completed"},
		{"rate limited", []int{429}, 200, "rate_limited", "completed"},
		{"malformed request", []int{400}, 400, "client_error", "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := "/drill-" + c.class
			url := dest.script(path, c.codes...)
			id := s.failed(t, url)
			other := s.failed(t, dest.script(path+"-other", c.codes...)) // must stay untouched

			dlq := s.dlqIDs(t, "failureClass="+c.class)
			entry, ok := dlq[id]
			if !ok {
				t.Fatalf("failed request %s is not in GET /dlq?failureClass=%s", id, c.class)
			}
			before := entry["attemptCount"].(float64)
			if entry["redriveCount"] != 0.0 || entry["failureClass"] != c.class {
				t.Errorf("DLQ entry %v", entry)
			}
			hitsBefore := len(dest.calls(path))

			dest.script(path, c.fixed)
			a := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"alice","reason":"endpoint fixed"}`)
			if a.status != 202 || a.body["id"] != id {
				t.Fatalf("redrive: %d %s", a.status, a.raw)
			}
			doc := s.waitTerminal(t, id, 10*time.Second)
			// The redrive's outcome is filled once the run ends.
			waitFor(t, 5*time.Second, "redrive outcome", func() bool {
				doc = s.get(t, id)
				r := redrivesOf(doc)
				return len(r) == 1 && r[0]["outcome"] != nil
			})
			if doc["status"] != c.wantFinal || doc["redriveCount"] != 1.0 {
				t.Errorf("after redrive: status %v redriveCount %v", doc["status"], doc["redriveCount"])
			}
			r := redrivesOf(doc)[0]
			if r["n"] != 1.0 || r["actor"] != "alice" || r["reason"] != "endpoint fixed" || r["at"] == nil ||
				r["previousFailureClass"] != c.class || r["previousAttemptCount"] != before || r["outcome"] != c.wantFinal {
				t.Errorf("audit record %v", r)
			}
			time.Sleep(300 * time.Millisecond) // a duplicate would show up here
			hits := dest.calls(path)
			if len(hits) != hitsBefore+1 {
				t.Errorf("destination got %d calls after the redrive, want exactly 1", len(hits)-hitsBefore)
			}
			for _, h := range hits {
				if h.header.Get("Idempotency-Key") != id {
					t.Errorf("a call carried Idempotency-Key %q, want %s throughout", h.header.Get("Idempotency-Key"), id)
				}
			}
			attempts := doc["attempts"].([]any)
			last := attempts[len(attempts)-1].(map[string]any)
			if last["n"] != before+1 || doc["attemptCount"] != before+1 {
				t.Errorf("attempt numbering did not continue: last n %v, attemptCount %v, before %v", last["n"], doc["attemptCount"], before)
			}
			if c.wantFinal == "failed" {
				if _, still := s.dlqIDs(t, "")[id]; !still {
					t.Error("a request that failed again is not back in the DLQ")
				}
			}
			if o := s.get(t, other); o["status"] != "failed" || o["redriveCount"] != 0.0 {
				t.Errorf("the entry not selected changed: %v %v", o["status"], o["redriveCount"])
			}
		})
	}
}

func TestRedriveRules(t *testing.T) {
	s := startStack(t, 1, "REDRIVE_LIMIT=2")
	dest := newDestination(t)

	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		id := s.failed(t, dest.script("/always-400", 400))
		for i := 1; i <= 2; i++ {
			a := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"bob","reason":"try again"}`)
			if a.status != 202 {
				t.Fatalf("redrive %d: %d %s", i, a.status, a.raw)
			}
			s.waitTerminal(t, id, 10*time.Second)
		}
		a := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"bob"}`)
		if e, _ := a.body["error"].(map[string]any); a.status != 409 || e["code"] != "conflict" {
			t.Errorf("third redrive with REDRIVE_LIMIT=2: %d %s, want 409", a.status, a.raw)
		}
		if doc := s.get(t, id); doc["redriveCount"] != 2.0 || len(redrivesOf(doc)) != 2 {
			t.Errorf("redriveCount %v, %d audit entries", doc["redriveCount"], len(redrivesOf(doc)))
		}
	})

	t.Run("not failed", func(t *testing.T) {
		t.Parallel()
		id := s.submit(t, fmt.Sprintf(`{"url":%q,"delayMs":600000}`, dest.script("/later", 200)))
		a := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"bob"}`)
		if a.status != 409 {
			t.Errorf("redrive of a pending request: %d %s", a.status, a.raw)
		}
		okID := s.submit(t, fmt.Sprintf(`{"url":%q}`, dest.script("/fine", 200)))
		s.waitTerminal(t, okID, 10*time.Second)
		if a := call(t, "POST", s.api+"/dlq/"+okID+"/redrive", `{}`); a.status != 409 {
			t.Errorf("redrive of a completed request: %d %s", a.status, a.raw)
		}
		if a := call(t, "POST", s.api+"/dlq/01m8mg842n8nbsaee7cq/redrive", `{}`); a.status != 404 {
			t.Errorf("redrive of an unknown id: %d %s", a.status, a.raw)
		}
	})

	t.Run("replayed key", func(t *testing.T) {
		t.Parallel()
		path := "/replay-redrive"
		id := s.failed(t, dest.script(path, 500))
		dest.script(path, 200)
		first := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"carol"}`, "Idempotency-Key", "redrive-1")
		s.waitTerminal(t, id, 10*time.Second)
		again := call(t, "POST", s.api+"/dlq/"+id+"/redrive", `{"actor":"carol"}`, "Idempotency-Key", "redrive-1")
		if first.status != 202 || again.status != 202 || again.header.Get("Idempotent-Replayed") != "true" || again.body["id"] != id {
			t.Errorf("first %d, again %d %v %s", first.status, again.status, again.header, again.raw)
		}
		time.Sleep(300 * time.Millisecond)
		doc := s.get(t, id)
		if doc["redriveCount"] != 1.0 || len(dest.calls(path)) != 3 {
			t.Errorf("redriveCount %v, %d calls; want 1 redrive and 2+1 calls", doc["redriveCount"], len(dest.calls(path)))
		}
		otherID := s.failed(t, dest.script("/replay-other", 500))
		if a := call(t, "POST", s.api+"/dlq/"+otherID+"/redrive", `{}`, "Idempotency-Key", "redrive-1"); a.status != 409 {
			t.Errorf("the key reused for another request: %d %s", a.status, a.raw)
		}
	})
}

func TestBulkRedriveWithFilter(t *testing.T) {
	s := startStack(t, 2, "REDRIVE_LIMIT=1")
	dest := newDestination(t)
	var server, client []string
	for i := 0; i < 3; i++ {
		server = append(server, s.failed(t, dest.script(fmt.Sprintf("/bulk-5xx-%d", i), 503)))
		client = append(client, s.failed(t, dest.script(fmt.Sprintf("/bulk-4xx-%d", i), 404)))
	}
	// server[0] uses up its one redrive first (and fails again).
	if a := call(t, "POST", s.api+"/dlq/"+server[0]+"/redrive", `{"actor":"dave"}`); a.status != 202 {
		t.Fatalf("redrive: %d %s", a.status, a.raw)
	}
	waitFor(t, 10*time.Second, "server[0] failed again", func() bool {
		d := s.get(t, server[0])
		return d["status"] == "failed" && len(redrivesOf(d)) == 1 && redrivesOf(d)[0]["outcome"] == "failed"
	})
	for i := 1; i < 3; i++ {
		dest.script(fmt.Sprintf("/bulk-5xx-%d", i), 200)
	}
	a := call(t, "POST", s.api+"/dlq/redrive", `{"actor":"dave","reason":"provider back","failureClass":"server_error","limit":50}`)
	if a.status != 200 {
		t.Fatalf("bulk redrive: %d %s", a.status, a.raw)
	}
	redriven := map[string]bool{}
	for _, id := range a.body["redriven"].([]any) {
		redriven[id.(string)] = true
	}
	if len(redriven) != 2 || !redriven[server[1]] || !redriven[server[2]] {
		t.Errorf("redriven %v, want %v", redriven, server[1:])
	}
	sk := a.body["skipped"].([]any)
	if len(sk) != 1 || sk[0].(map[string]any)["id"] != server[0] || sk[0].(map[string]any)["reason"] == "" {
		t.Errorf("skipped %v, want %s with a reason", sk, server[0])
	}
	for _, id := range server[1:] {
		if doc := s.waitTerminal(t, id, 10*time.Second); doc["status"] != "completed" {
			t.Errorf("%s after bulk redrive: %v", id, doc["status"])
		}
	}
	for _, id := range client {
		if doc := s.get(t, id); doc["status"] != "failed" || doc["redriveCount"] != 0.0 {
			t.Errorf("client_error entry %s was touched: %v %v", id, doc["status"], doc["redriveCount"])
		}
	}
	if bad := call(t, "POST", s.api+"/dlq/redrive", `{"failureClass":"oops"}`); bad.status != 400 {
		t.Errorf("unknown failureClass: %d", bad.status)
	}
}

// asynq trims its archive (10,000 tasks / 90 days); retryd's DLQ comes from
// its own records, so even with the archive emptied every failed request is
// listed and can be redriven.
func TestDLQDoesNotDependOnTheAsynqArchive(t *testing.T) {
	s := startStack(t, 2)
	dest := newDestination(t)
	const n = 30
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script(fmt.Sprintf("/trim-%d", i), 410))))
	}
	for _, id := range ids {
		s.waitTerminal(t, id, 10*time.Second)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: s.redis.Addr})
	defer insp.Close()
	waitFor(t, 5*time.Second, "tasks archived", func() bool {
		q, err := insp.GetQueueInfo(tasks.Queue)
		return err == nil && q.Archived == n
	})
	// Trim the archive to nothing, as asynq would past its limits.
	if deleted, err := insp.DeleteAllArchivedTasks(tasks.Queue); err != nil || deleted != n {
		t.Fatalf("delete archived tasks: %d, %v", deleted, err)
	}
	dlq := map[string]bool{}
	cursor := ""
	for page := 0; page < 10; page++ {
		a := call(t, "GET", s.api+"/dlq?limit=7&host=127.0.0.1&cursor="+cursor, "")
		for _, d := range a.body["data"].([]any) {
			dlq[d.(map[string]any)["id"].(string)] = true
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	for _, id := range ids {
		if !dlq[id] {
			t.Errorf("failed request %s missing from the DLQ after the archive was trimmed", id)
		}
	}
	if other := s.dlqIDs(t, "host=example.com"); len(other) != 0 {
		t.Errorf("host=example.com lists %d entries", len(other))
	}
	// host:port matches that port only.
	hostPort := strings.TrimPrefix(dest.URL, "http://")
	if got := s.dlqIDs(t, "host="+hostPort); len(got) != n {
		t.Errorf("host=%s lists %d entries, want %d", hostPort, len(got), n)
	}
	if got := s.dlqIDs(t, "host=127.0.0.1:1"); len(got) != 0 {
		t.Errorf("host=127.0.0.1:1 lists %d entries, want 0", len(got))
	}
	dest.script("/trim-0", 200)
	if a := call(t, "POST", s.api+"/dlq/"+ids[0]+"/redrive", `{"actor":"erin"}`); a.status != 202 {
		t.Fatalf("redrive without an archived task: %d %s", a.status, a.raw)
	}
	if doc := s.waitTerminal(t, ids[0], 10*time.Second); doc["status"] != "completed" {
		t.Errorf("redriven request ended %v", doc["status"])
	}
}

// asynqmon's "Run" on an archived task is inspector.RunTask; retryd
// records it as a redrive by "dashboard".
func TestDashboardRunIsARedrive(t *testing.T) {
	s := startStack(t, 1, "REDRIVE_LIMIT=1")
	dest := newDestination(t)
	path := "/dash"
	id := s.failed(t, dest.script(path, 500))
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: s.redis.Addr})
	defer insp.Close()
	waitFor(t, 5*time.Second, "archived task", func() bool {
		info, err := insp.GetTaskInfo(tasks.Queue, id)
		return err == nil && info.State == asynq.TaskStateArchived
	})
	dest.script(path, 200)
	if err := insp.RunTask(tasks.Queue, id); err != nil {
		t.Fatal(err)
	}
	doc := s.waitTerminal(t, id, 10*time.Second)
	waitFor(t, 5*time.Second, "completed with a dashboard redrive", func() bool {
		doc = s.get(t, id)
		r := redrivesOf(doc)
		return doc["status"] == "completed" && len(r) == 1 && r[0]["outcome"] == "completed"
	})
	if r := redrivesOf(doc)[0]; r["actor"] != "dashboard" || r["previousFailureClass"] != "server_error" {
		t.Errorf("audit record %v", r)
	}

	// At its limit, a dashboard run is refused and the task goes back to
	// the archive without a call.
	id2 := s.failed(t, dest.script("/dash-limit", 500))
	if a := call(t, "POST", s.api+"/dlq/"+id2+"/redrive", `{"actor":"frank"}`); a.status != 202 {
		t.Fatalf("redrive: %d", a.status)
	}
	s.waitTerminal(t, id2, 10*time.Second)
	waitFor(t, 5*time.Second, "re-archived", func() bool {
		info, err := insp.GetTaskInfo(tasks.Queue, id2)
		return err == nil && info.State == asynq.TaskStateArchived
	})
	calls := len(dest.calls("/dash-limit"))
	if err := insp.RunTask(tasks.Queue, id2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "archived again", func() bool {
		info, err := insp.GetTaskInfo(tasks.Queue, id2)
		return err == nil && info.State == asynq.TaskStateArchived && info.LastErr != ""
	})
	if doc := s.get(t, id2); doc["redriveCount"] != 1.0 || doc["status"] != "failed" || len(dest.calls("/dash-limit")) != calls {
		t.Errorf("dashboard run past the limit: redriveCount %v status %v", doc["redriveCount"], doc["status"])
	}
}

func TestOutcomeCallback(t *testing.T) {
	const secret = "whsec_test"
	s := startStack(t, 1, "CALLBACK_SIGNING_SECRET="+secret)
	dest := newDestination(t)

	var mu sync.Mutex
	type delivery struct {
		body []byte
		sig  string
		id   string
	}
	var got []delivery
	fail := 2 // the callback receiver fails twice, then accepts
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, delivery{body, r.Header.Get("Retryd-Signature"), r.Header.Get("Retryd-Request-Id")})
		if fail > 0 {
			fail--
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(204)
	}))
	defer receiver.Close()

	id := s.submit(t, fmt.Sprintf(`{"url":%q,"callbackUrl":%q}`, dest.script("/cb-target", 200), receiver.URL+"/hook"))
	s.waitTerminal(t, id, 10*time.Second)
	var doc map[string]any
	waitFor(t, 20*time.Second, "callback delivered", func() bool {
		doc = s.get(t, id)
		cb, _ := doc["callback"].(map[string]any)
		return cb != nil && cb["status"] == "delivered"
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d callback deliveries, want 3 (two 500s, then success)", len(got))
	}
	last := got[2]
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(last.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); last.sig != want {
		t.Errorf("signature %q, want %q", last.sig, want)
	}
	var sent map[string]any
	if err := json.Unmarshal(last.body, &sent); err != nil {
		t.Fatal(err)
	}
	if last.id != id || sent["id"] != id || sent["status"] != "completed" {
		t.Errorf("callback carried id %q, body %v", last.id, sent)
	}
	if _, has := sent["attempts"]; has {
		t.Error("callback body carries attempts")
	}
	cb := doc["callback"].(map[string]any)
	if doc["status"] != "completed" || cb["attempts"] != 3.0 || cb["url"] != receiver.URL+"/hook" {
		t.Errorf("request %v, callback %v", doc["status"], cb)
	}

	// A callback that never succeeds does not change the request's status.
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(400) }))
	defer dead.Close()
	id2 := s.submit(t, fmt.Sprintf(`{"url":%q,"callbackUrl":%q}`, dest.script("/cb-target2", 200), dead.URL))
	waitFor(t, 10*time.Second, "callback failed", func() bool {
		cb, _ := s.get(t, id2)["callback"].(map[string]any)
		return cb != nil && cb["status"] == "failed"
	})
	if d := s.get(t, id2); d["status"] != "completed" {
		t.Errorf("a failed callback changed the request to %v", d["status"])
	}

	// Canceled is a final outcome too: its callback is sent at once.
	mu.Unlock()
	id3 := s.submit(t, fmt.Sprintf(`{"url":%q,"delayMs":60000,"callbackUrl":%q}`, dest.script("/cb-never", 200), receiver.URL+"/hook"))
	if a := call(t, "DELETE", s.api+"/requests/"+id3, ""); a.status != 200 || a.body["status"] != "canceled" {
		t.Fatalf("cancel: %d %v", a.status, a.body)
	}
	waitFor(t, 10*time.Second, "callback of the canceled request delivered", func() bool {
		cb, _ := s.get(t, id3)["callback"].(map[string]any)
		return cb != nil && cb["status"] == "delivered"
	})
	mu.Lock()
	sent = nil
	if err := json.Unmarshal(got[len(got)-1].body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["id"] != id3 || sent["status"] != "canceled" {
		t.Errorf("callback of the canceled request carried %v", sent)
	}
	if n := len(dest.calls("/cb-never")); n != 0 {
		t.Errorf("the canceled request reached its destination %d times", n)
	}
}
