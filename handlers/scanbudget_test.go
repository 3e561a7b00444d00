package handlers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// entryCounter counts the index entries the API reads: the members every
// ZRANGE answers.
type entryCounter struct{ n atomic.Int64 }

func (c *entryCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *entryCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c.count(cmd)
		return err
	}
}
func (c *entryCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return err
	}
}
func (c *entryCounter) count(cmd redis.Cmder) {
	if cmd.Name() != "zrange" {
		return
	}
	switch v := cmd.(type) {
	case *redis.StringSliceCmd:
		c.n.Add(int64(len(v.Val())))
	case *redis.ZSliceCmd:
		c.n.Add(int64(len(v.Val())))
	}
}

// Every list reads at most record.ScanBudget index entries a call,
// whatever its filter matches: a filter that matches nothing in a history
// three budgets long answers with a cursor after one budget, and following
// the cursors visits every match exactly once.
func TestEveryListReadsABoundedNumberOfEntriesACall(t *testing.T) {
	t.Parallel()
	const n, every = 3*record.ScanBudget + 50, 500
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := srv.Client()
	counter := &entryCounter{}
	rdb.AddHook(counter)
	env := map[string]string{"ALLOW_PRIVATE_TARGETS": "true"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	cfg.Port = ts.Listener.Addr().(*net.TCPAddr).Port
	engine, closeEngine := app.APIEngine(cfg, rdb, asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts.Config.Handler = engine
	ts.Start()
	t.Cleanup(func() { ts.Close(); closeEngine() })

	store := record.NewStore(srv.Client(), time.Hour)
	ctx := context.Background()
	rare := map[string]bool{}
	for i := range n {
		now := time.Now()
		r := &record.Request{ID: ids.New(now), URL: "http://127.0.0.1:1/x", Host: "127.0.0.1", Method: "POST",
			Headers: map[string]string{}, MaxRetries: 0, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000,
			Status: record.Pending, CreatedAt: now, NextAttemptAt: now.Add(time.Hour), QStash: &record.QStash{}}
		if i%every == 0 {
			r.QStash.Label, r.QStash.Labels = "rare", []string{"rare"}
			rare[r.ID] = true
		}
		if _, err := store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const most = record.ScanBudget + 100 // the budget, and each page's look past its end
	calls := []struct {
		name, method, path, body string
		items                    func(answer) []string
		cursor                   func(answer) string
		param                    string
	}{
		{"events", "GET", "/v2/events?count=1000&label=", "", eventIDs, func(a answer) string { s, _ := a.body["cursor"].(string); return s }, "cursor"},
		{"resend dry run", "POST", "/requests/resend?dryRun=true&limit=1000&host=127.0.0.1&method=", "", func(a answer) []string { return strs(a.body["wouldResend"]) },
			func(a answer) string { s, _ := a.body["nextCursor"].(string); return s }, "cursor"},
	}
	for _, c := range calls {
		filter := "nomatch"
		if c.method == "POST" {
			filter = "DELETE" // no request was sent with it
		}
		counter.n.Store(0)
		a := do(t, c.method, ts.URL+c.path+filter, "application/json", c.body)
		read := counter.n.Load()
		if a.status != 200 || c.cursor(a) == "" || len(c.items(a)) != 0 {
			t.Errorf("%s matching nothing: %d %s, want 200, nothing and a cursor", c.name, a.status, a.raw)
		}
		if read > most {
			t.Errorf("%s matching nothing read %d index entries, want at most %d", c.name, read, most)
		}
	}
	// Following the cursors of a rare match visits each match once.
	got := map[string]int{}
	cursor, pages := "", 0
	for {
		path := "/v2/events?state=CREATED&label=rare"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		counter.n.Store(0)
		a := do(t, "GET", ts.URL+path, "", "")
		if a.status != 200 {
			t.Fatalf("GET %s: %d %s", path, a.status, a.raw)
		}
		if read := counter.n.Load(); read > most {
			t.Errorf("GET %s read %d index entries, want at most %d", path, read, most)
		}
		for _, id := range eventIDs(a) {
			got[id]++
		}
		cursor, _ = a.body["cursor"].(string)
		if pages++; cursor == "" || pages > 20 {
			break
		}
	}
	if pages < 2 {
		t.Errorf("the rare label took %d page; a call should stop after %d entries", pages, record.ScanBudget)
	}
	for id := range rare {
		if got[id] != 1 {
			t.Errorf("%s seen %d times, want once", id, got[id])
		}
	}
	if len(got) != len(rare) {
		t.Errorf("saw %d messages, want the %d labelled rare", len(got), len(rare))
	}
}

func eventIDs(a answer) []string {
	evs, _ := a.body["events"].([]any)
	var out []string
	for _, e := range evs {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m["messageId"].(string))
		}
	}
	return out
}

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// /v2/events?count=N gives at most N events, even when one message has
// more; its cursor then points within that message, and following it
// gives every event once.
func TestEventsCountCountsEvents(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := engineServer(t, srv, map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	seedCanceled(t, record.NewStore(srv.Client(), time.Hour), "", "127.0.0.1", 2) // CREATED and CANCELED each
	seen := map[string]bool{}
	cursor := ""
	for range 10 {
		path := "/v2/events?count=1"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		a := do(t, "GET", ts.URL+path, "", "")
		evs, _ := a.body["events"].([]any)
		if a.status != 200 || len(evs) > 1 {
			t.Fatalf("GET %s: %d %s, want at most 1 event", path, a.status, a.raw)
		}
		for _, e := range evs {
			m := e.(map[string]any)
			key := m["messageId"].(string) + " " + m["state"].(string)
			if seen[key] {
				t.Errorf("%s given twice", key)
			}
			seen[key] = true
		}
		if cursor, _ = a.body["cursor"].(string); cursor == "" {
			break
		}
	}
	if len(seen) != 4 {
		t.Errorf("saw %d events, want 4: %v", len(seen), seen)
	}
	if a := do(t, "GET", ts.URL+"/v2/events?cursor=nonsense", "", ""); a.status != 400 {
		t.Errorf("a made-up cursor: %d %s, want 400", a.status, a.raw)
	}
}

// A cursor inside a message goes on with the events still owed, counted
// from its oldest: a message in flight that gains events between two
// pages repeats none of them.
func TestEventsCursorWithinAMessageSurvivesNewEvents(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := engineServer(t, srv, map[string]string{"ALLOW_PRIVATE_TARGETS": "true"})
	store := record.NewStore(srv.Client(), time.Hour)
	ctx := context.Background()
	now := time.Now().Add(-time.Minute)
	r := &record.Request{ID: ids.New(now), URL: "http://127.0.0.1:1/x", Host: "127.0.0.1", Method: "POST", Headers: map[string]string{},
		MaxRetries: 5, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000, Status: record.Pending, CreatedAt: now, NextAttemptAt: now}
	if _, err := store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fail := func(at time.Time) { // one attempt that fails and will be retried
		t.Helper()
		b, err := store.Begin(ctx, r.ID, at)
		if err != nil || b.State != record.Started {
			t.Fatalf("begin: %+v %v", b, err)
		}
		if _, err := store.Finish(ctx, r.ID, record.Outcome{Attempt: record.Attempt{N: b.N, StartedAt: at, StatusCode: 503,
			Outcome: "retryable", FailureClass: "server_error"}, Status: record.Retrying, NextAttemptAt: at.Add(500 * time.Millisecond),
			Host: "127.0.0.1", Run: -1}, at); err != nil {
			t.Fatal(err)
		}
	}
	page := func(cursor string) ([]string, string) {
		path := "/v2/events?count=1"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		a := do(t, "GET", ts.URL+path, "", "")
		if a.status != 200 {
			t.Fatalf("GET %s: %d %s", path, a.status, a.raw)
		}
		var got []string
		evs, _ := a.body["events"].([]any)
		for _, e := range evs {
			m := e.(map[string]any)
			got = append(got, fmt.Sprint(m["state"], " ", m["time"]))
		}
		next, _ := a.body["cursor"].(string)
		return got, next
	}
	fail(now.Add(time.Second)) // CREATED, ERROR, RETRY
	first, cursor := page("")
	if len(first) != 1 || !strings.Contains(cursor, ".") {
		t.Fatalf("first page %v, cursor %q: want one event and a cursor within the message", first, cursor)
	}
	fail(now.Add(2 * time.Second)) // two more events, newer than the page
	seen := map[string]bool{first[0]: true}
	for range 10 {
		var got []string
		if got, cursor = page(cursor); len(got) > 1 {
			t.Fatalf("a page of count=1 gave %v", got)
		}
		for _, e := range got {
			if seen[e] {
				t.Errorf("%s given twice", e)
			}
			seen[e] = true
		}
		if cursor == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("the pages gave %v, want the 3 events the message had when the walk began", seen)
	}
}
