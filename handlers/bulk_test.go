package handlers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/tasks"
)

// raceStore is the real store with a hook run before each redrive: there
// a test deletes a record the walk has already listed, as a DLQ delete
// racing the bulk redrive does.
type raceStore struct {
	*record.Store
	mu            sync.Mutex
	beforeRedrive func(id string)
}

func (s *raceStore) Redrive(ctx context.Context, id string, in record.RedriveInput) (*record.RedriveResult, error) {
	s.mu.Lock()
	hook := s.beforeRedrive
	s.mu.Unlock()
	if hook != nil {
		hook(id)
	}
	return s.Store.Redrive(ctx, id, in)
}

type dlqBundle struct {
	ts    *httptest.Server
	store *record.Store
	race  *raceStore
}

// dlqSetup serves the API and its DLQ routes (no keys) over a private
// Redis, with the given REDRIVE_LIMIT.
func dlqSetup(t *testing.T, redriveLimit int) *dlqBundle {
	t.Helper()
	rdb := redistest.StartServer(t, redistest.Options{}).Client()
	store := record.NewStore(rdb, time.Hour)
	enq := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)}
	api := &handlers.API{Store: store, Queue: enq, Destinations: &egress.Guard{AllowPrivate: true},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	race := &raceStore{Store: store}
	dlq := &handlers.DLQ{Store: race, Queue: enq, RedriveLimit: redriveLimit, API: api}
	ts := httptest.NewServer(app.NewEngine(api, app.Access{}, api.Log, dlq))
	t.Cleanup(ts.Close)
	return &dlqBundle{ts: ts, store: store, race: race}
}

// failed stores a request that failed for good, redriven n times before.
func (b *dlqBundle) failed(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	id := ids.New(time.Now())
	now := time.Now()
	r := &record.Request{ID: id, URL: "https://e.com/x", Host: "e.com", Method: "POST", Headers: map[string]string{},
		MaxRetries: 0, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000, Status: record.Pending, CreatedAt: now, NextAttemptAt: now}
	if _, err := b.store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		at, err := b.store.Begin(ctx, id, now)
		if err != nil || at.State != record.Started {
			t.Fatalf("begin %s: %+v %v", id, at, err)
		}
		if _, err := b.store.Finish(ctx, id, record.Outcome{Attempt: record.Attempt{N: at.N, StartedAt: now, StatusCode: 500,
			Outcome: "permanent", FailureClass: "server_error"}, Status: record.Failed, Host: "e.com", Run: -1}, now); err != nil {
			t.Fatal(err)
		}
		if i == n {
			return id
		}
		if _, err := b.store.Redrive(ctx, id, record.RedriveInput{Scope: tenant.All, Actor: "t", Limit: 100, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
}

// remove deletes id's record, as DELETE /v2/dlq/{id} does.
func (b *dlqBundle) remove(t *testing.T, id string) {
	t.Helper()
	if err := b.store.Remove(context.Background(), "", id, ""); err != nil {
		t.Errorf("remove %s: %v", id, err)
	}
}

type bulkAnswer struct {
	redriven []string
	skipped  map[string]string // id → reason
}

func (b *dlqBundle) bulk(t *testing.T, body string) (answer, bulkAnswer) {
	t.Helper()
	a := do(t, "POST", b.ts.URL+"/dlq/redrive", "application/json", body)
	var out bulkAnswer
	key := "redriven"
	if strings.Contains(body, `"dryRun":true`) {
		key = "wouldRedrive"
	}
	list, ok := a.body[key].([]any)
	if a.status != 200 || !ok {
		t.Fatalf("POST /dlq/redrive %s: %d %s", body, a.status, a.raw)
	}
	for _, id := range list {
		out.redriven = append(out.redriven, id.(string))
	}
	sort.Strings(out.redriven)
	out.skipped = map[string]string{}
	sk, ok := a.body["skipped"].([]any)
	if !ok {
		t.Fatalf("no skipped list: %s", a.raw)
	}
	for _, s := range sk {
		m := s.(map[string]any)
		out.skipped[m["id"].(string)], _ = m["reason"].(string)
	}
	return a, out
}

func sorted(s ...string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// A record deleted while a bulk redrive walks the DLQ is skipped, with
// why, and the call goes on: the answer lists every redrive it made.
func TestBulkRedriveGoesOnPastARecordGoneMidWalk(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 3)
	x, y, z := b.failed(t, 0), b.failed(t, 0), b.failed(t, 0)
	var once sync.Once
	b.race.beforeRedrive = func(string) { once.Do(func() { b.remove(t, y) }) }
	_, got := b.bulk(t, `{"actor":"alice","reason":"provider back"}`)
	if diff := cmp.Diff(sorted(x, z), got.redriven); diff != "" {
		t.Errorf("redriven (-want +got):\n%s", diff)
	}
	if r, ok := got.skipped[y]; !ok || !strings.Contains(r, "no request with this id") || len(got.skipped) != 1 {
		t.Errorf("skipped %v; want only %s, gone meanwhile", got.skipped, y)
	}
}

// By ids, every id not redriven is listed with its reason: gone
// meanwhile, never there, not failed, at its redrive limit, past the
// count.
func TestBulkRedriveByIDsListsEveryIDNotRedriven(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 1)
	ok1, gone, atLimit, ok2 := b.failed(t, 0), b.failed(t, 0), b.failed(t, 1), b.failed(t, 0)
	pending := b.failed(t, 0)
	if _, err := b.store.Redrive(context.Background(), pending, record.RedriveInput{Scope: tenant.All, Actor: "t", Limit: 5, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	unknown := ids.New(time.Now())
	var once sync.Once
	b.race.beforeRedrive = func(string) { once.Do(func() { b.remove(t, gone) }) }
	body := fmt.Sprintf(`{"ids":[%q,%q,%q,%q,%q,%q]}`, ok1, gone, atLimit, unknown, pending, ok2)
	_, got := b.bulk(t, body)
	if diff := cmp.Diff(sorted(ok1, ok2), got.redriven); diff != "" {
		t.Errorf("redriven (-want +got):\n%s", diff)
	}
	want := map[string]string{gone: "no request with this id", unknown: "no request with this id",
		atLimit: "redrive limit reached", pending: "only a failed request can be redriven"}
	for id, reason := range want {
		if !strings.Contains(got.skipped[id], reason) {
			t.Errorf("skipped[%s] = %q; want it to say %q", id, got.skipped[id], reason)
		}
	}
	if len(got.skipped) != len(want) {
		t.Errorf("skipped %v; want exactly %d entries", got.skipped, len(want))
	}
	if !strings.Contains(got.skipped[atLimit], "POST /requests") {
		t.Errorf("the redrive limit names no next step: %q", got.skipped[atLimit])
	}
	// A count below the ids named: the rest is listed, not dropped.
	a, b2 := b.failed(t, 0), b.failed(t, 0)
	_, got = b.bulk(t, fmt.Sprintf(`{"ids":[%q,%q],"limit":1}`, a, b2))
	if len(got.redriven) != 1 || got.redriven[0] != a || !strings.Contains(got.skipped[b2], "count") {
		t.Errorf("limit 1 of 2 ids: redriven %v skipped %v; want %s redriven and %s skipped past the count", got.redriven, got.skipped, a, b2)
	}
}

// The dry run walks as the real call does and counts only what would go:
// a request at its redrive limit is skipped, not counted.
func TestBulkRedriveDryRunCountsWhatTheRealCallSends(t *testing.T) {
	t.Parallel()
	b := dlqSetup(t, 1)
	var fresh []string
	for range 3 {
		fresh = append(fresh, b.failed(t, 0))
	}
	spent := b.failed(t, 1)
	_, dry := b.bulk(t, `{"actor":"alice","dryRun":true}`)
	if diff := cmp.Diff(sorted(fresh...), dry.redriven); diff != "" {
		t.Errorf("dry run would redrive (-want +got):\n%s", diff)
	}
	if _, ok := dry.skipped[spent]; !ok || len(dry.skipped) != 1 {
		t.Errorf("dry run skipped %v; want %s at its limit", dry.skipped, spent)
	}
	for _, id := range append(fresh, spent) {
		if a := do(t, "GET", b.ts.URL+"/requests/"+id, "", ""); a.body["status"] != "failed" {
			t.Errorf("after the dry run %s is %v; want failed (unchanged)", id, a.body["status"])
		}
	}
	_, real := b.bulk(t, `{"actor":"alice"}`)
	if diff := cmp.Diff(dry.redriven, real.redriven); diff != "" {
		t.Errorf("the real call sent other requests than the dry run said (-dry +real):\n%s", diff)
	}
	if bad := do(t, "POST", b.ts.URL+"/dlq/redrive", "application/json", `{"dryRun":"maybe"}`); bad.status != 400 {
		t.Errorf("dryRun maybe: %d %s; want 400", bad.status, bad.raw)
	}
}

// When the store fails midway, the answer still says what was redriven;
// a call that did nothing answers 503.
func TestBulkRedriveReportsWhatItDidWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t, redistest.Options{})
	rdb := rs.Client()
	store := record.NewStore(rdb, time.Hour)
	enq := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)}
	api := &handlers.API{Store: store, Queue: enq, Destinations: &egress.Guard{AllowPrivate: true},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	race := &raceStore{Store: store}
	dlq := &handlers.DLQ{Store: race, Queue: enq, RedriveLimit: 3, API: api}
	ts := httptest.NewServer(app.NewEngine(api, app.Access{}, api.Log, dlq))
	t.Cleanup(ts.Close)
	b := &dlqBundle{ts: ts, store: store, race: race}
	first, second, third := b.failed(t, 0), b.failed(t, 0), b.failed(t, 0)
	calls := 0
	race.beforeRedrive = func(string) {
		if calls++; calls == 2 {
			rs.Kill()
		}
	}
	_, got := b.bulk(t, fmt.Sprintf(`{"ids":[%q,%q,%q]}`, first, second, third))
	if len(got.redriven) != 1 || got.redriven[0] != first {
		t.Errorf("redriven %v; want %s, done before Redis went away", got.redriven, first)
	}
	for _, id := range []string{second, third} {
		if !strings.Contains(got.skipped[id], "unavailable") {
			t.Errorf("skipped[%s] = %q; want storage unavailable", id, got.skipped[id])
		}
	}
	a := do(t, "POST", ts.URL+"/dlq/redrive", "application/json", fmt.Sprintf(`{"ids":[%q]}`, third))
	if a.status != 503 || a.header.Get("Retry-After") == "" {
		t.Errorf("a bulk call that did nothing with Redis down: %d %s; want 503 with Retry-After", a.status, a.raw)
	}
}
