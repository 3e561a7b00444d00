package record

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// Table tests of the record scripts, in the style of asynq's rdb tests: an
// initial Redis state, one call, the wanted state of the keys involved.

// state is Redis content by key: a string, a hash (map[string]string), a
// list ([]string) or a sorted set (zset, members in score order).
type state map[string]any

type zset []string

func seed(t *testing.T, rdb *redis.Client, st state) {
	t.Helper()
	ctx := context.Background()
	for k, v := range st {
		var err error
		switch v := v.(type) {
		case string:
			err = rdb.Set(ctx, k, v, 0).Err()
		case map[string]string:
			err = rdb.HSet(ctx, k, v).Err()
		case []string:
			for _, e := range v {
				if err = rdb.RPush(ctx, k, e).Err(); err != nil {
					break
				}
			}
		case zset:
			for i, m := range v {
				if err = rdb.ZAdd(ctx, k, redis.Z{Score: float64(i), Member: m}).Err(); err != nil {
					break
				}
			}
		default:
			t.Fatalf("seed %s: unsupported %T", k, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// dump reads keys back in the shape seed takes; a missing key is absent.
func dump(t *testing.T, rdb *redis.Client, keys ...string) state {
	t.Helper()
	ctx := context.Background()
	out := state{}
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "none":
		case "string":
			out[k] = rdb.Get(ctx, k).Val()
		case "hash":
			h := rdb.HGetAll(ctx, k).Val()
			// An emptied field is an absent one (request.go's hash fields).
			maps.DeleteFunc(h, func(_, v string) bool { return v == "" })
			out[k] = h
		case "list":
			out[k] = rdb.LRange(ctx, k, 0, -1).Val()
		case "zset":
			out[k] = zset(rdb.ZRange(ctx, k, 0, -1).Val())
		default:
			t.Fatalf("dump %s: type %s", k, typ)
		}
	}
	return out
}

const tid = "01m8mhyychtfy2pdj6g7"

// k0 is the keys of the single partition of NewStore.
var k0 = keysOf("retryd")

// d0 is the default tenant's keys of the one partition.
var d0 = k0.of("")

// jsonAware compares JSON objects stored as strings by content: Lua's cjson
// does not keep key order.
var jsonAware = cmp.FilterValues(func(a, b string) bool {
	return strings.HasPrefix(a, "{") && strings.HasPrefix(b, "{")
}, cmp.Transformer("json", func(s string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(s), &m)
	return m
}))

var (
	t0   = time.UnixMilli(1_800_000_000_000)
	t0ms = strconv.FormatInt(t0.UnixMilli(), 10)
)

// reqHash is a request hash in a given status, with overrides.
func reqHash(status Status, kv ...string) map[string]string {
	h := map[string]string{fMaxRetries: "1", fBackoff: "100", fMaxBackoff: "1000", fTimeout: "1000", fStatus: string(status),
		fAttemptCount: "0", fBudgetUsed: "0", fRedriveCount: "0", fNextAttemptAt: t0ms, fCreatedAt: t0ms, fUpdatedAt: t0ms}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(h, kv[i])
			continue
		}
		h[kv[i]] = kv[i+1]
	}
	return h
}

// emptied adds fields to h as the scripts empty them: "" (absent to
// every reader).
func emptied(h map[string]string, fields ...string) map[string]string {
	for _, f := range fields {
		h[f] = ""
	}
	return h
}

const specJSON = `{"u":"https://e.com","m":"GET"}`

func newStoreOn(t *testing.T) (*Store, *redis.Client) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	return NewStore(rdb, time.Hour), rdb
}

func TestCreateScript(t *testing.T) {
	t.Parallel()
	r := newRequest(tid, t0)
	r.URL = "https://e.com"
	cases := []struct {
		name       string
		initial    state
		idemKey    string
		wantReplay *Replay
		want       state
	}{
		{
			name: "a new request",
			want: state{k0.req(tid): reqHash(Pending), k0.spec(tid): specJSON, d0.index(Pending): zset{tid}},
		},
		{
			name:    "a new request claims its idempotency key",
			idemKey: "k1",
			want: state{k0.req(tid): reqHash(Pending), k0.spec(tid): specJSON, d0.index(Pending): zset{tid},
				d0.idem("k1"): tid + " " + hashHex("body")},
		},
		{
			name:       "a claimed key replays and marks its claim replayed",
			idemKey:    "k1",
			initial:    state{d0.idem("k1"): "01other " + hashHex("body")},
			wantReplay: &Replay{ID: "01other", SameBody: true},
			want:       state{d0.idem("k1"): "01other " + hashHex("body") + " replayed"},
		},
		{
			name:       "a replay of a replayed claim keeps one mark",
			idemKey:    "k1",
			initial:    state{d0.idem("k1"): "01other " + hashHex("body") + " replayed"},
			wantReplay: &Replay{ID: "01other", SameBody: true},
			want:       state{d0.idem("k1"): "01other " + hashHex("body") + " replayed"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			replay, err := s.Create(context.Background(), r, c.idemKey, []byte("body"), CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.wantReplay, replay); diff != "" {
				t.Errorf("replay (-want +got):\n%s", diff)
			}
			got := dump(t, rdb, k0.req(tid), k0.spec(tid), d0.legacyAll(), d0.index(Pending), d0.idem("k1"))
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBeginScript(t *testing.T) {
	t.Parallel()
	interrupted := `{"error":"` + InterruptedError + `","n":1,"outcome":"interrupted","startedAtMs":` + strconv.FormatInt(t0.UnixMilli()-5000, 10) + `}`
	cases := []struct {
		name      string
		initial   state
		now       time.Time
		wantState BeginState
		wantN     int
		// wantWaited and wantUntil are what Begin says of a wait since
		// the last attempt.
		wantWaited string
		wantUntil  time.Time
		want       state
	}{
		{name: "no record", now: t0, wantState: Missing, want: state{}},
		{
			name: "not due yet", now: t0.Add(-time.Second), wantState: NotDue,
			initial: state{k0.req(tid): reqHash(Pending), k0.spec(tid): specJSON},
			want:    state{k0.req(tid): reqHash(Pending)},
		},
		{
			name: "due: attempt 1 in flight", now: t0, wantState: Started, wantN: 1,
			initial: state{k0.req(tid): reqHash(Pending), k0.spec(tid): specJSON},
			want:    state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)},
		},
		{
			name: "an attempt left in flight by a crash is recorded interrupted and costs no budget", now: t0, wantState: Started, wantN: 2,
			initial: state{k0.req(tid): reqHash(Retrying, fAttemptCount, "1", "inflightN", "1", "inflightAt", strconv.FormatInt(t0.UnixMilli()-5000, 10)),
				k0.spec(tid): specJSON},
			want: state{
				k0.req(tid):      reqHash(Retrying, fAttemptCount, "2", "inflightN", "2", "inflightAt", t0ms, "interrupted", "1"),
				k0.attempts(tid): []string{interrupted},
				k0.stats():       map[string]string{"att|interrupted|": "1"},
			},
		},
		{
			name: "the second interruption is counted too", now: t0, wantState: Started, wantN: 3,
			initial: state{k0.req(tid): reqHash(Retrying, fAttemptCount, "2", "inflightN", "2", "inflightAt", strconv.FormatInt(t0.UnixMilli()-5000, 10), "interrupted", "1"),
				k0.spec(tid): specJSON},
			want: state{
				k0.req(tid):      reqHash(Retrying, fAttemptCount, "3", "inflightN", "3", "inflightAt", t0ms, "interrupted", "2"),
				k0.attempts(tid): []string{strings.Replace(interrupted, `"n":1`, `"n":2`, 1)},
				k0.stats():       map[string]string{"att|interrupted|": "1"},
			},
		},
		{
			name: "the third interruption poisons the request: nothing starts, nothing is written", now: t0, wantState: Poisoned, wantN: 3,
			initial: state{k0.req(tid): reqHash(Retrying, fAttemptCount, "3", "inflightN", "3", "inflightAt", strconv.FormatInt(t0.UnixMilli()-5000, 10), "interrupted", "2"),
				k0.spec(tid): specJSON},
			want: state{
				k0.req(tid): reqHash(Retrying, fAttemptCount, "3", "inflightN", "3", "inflightAt", strconv.FormatInt(t0.UnixMilli()-5000, 10), "interrupted", "2"),
			},
		},
		{
			name: "marks emptied by the last attempt's end are absent: no interruption, no wait", now: t0, wantState: Started, wantN: 2,
			initial: state{k0.req(tid): emptied(reqHash(Retrying, fAttemptCount, "1"), fInflightN, fInflightAt, fWaitingFor, fWaitUntil),
				k0.spec(tid): specJSON},
			want: state{k0.req(tid): reqHash(Retrying, fAttemptCount, "2", "inflightN", "2", "inflightAt", t0ms)},
		},
		{
			name: "waiting ends when the attempt starts, which says what it waited for and until when", now: t0, wantState: Started, wantN: 1,
			wantWaited: WaitingRate, wantUntil: t0,
			initial: state{k0.req(tid): reqHash(Pending, fWaitingFor, WaitingRate, fWaitUntil, t0ms), k0.spec(tid): specJSON},
			want:    state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)},
		},
		{
			name: "a wait with no time shown ends too", now: t0.Add(time.Minute), wantState: Started, wantN: 1,
			wantWaited: WaitingPaused,
			initial:    state{k0.req(tid): reqHash(Pending, fWaitingFor, WaitingPaused), k0.spec(tid): specJSON},
			want: state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1",
				"inflightAt", strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10), fUpdatedAt, strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10))},
		},
		{
			name: "finished: nothing starts", now: t0, wantState: Finished,
			initial: state{k0.req(tid): reqHash(Completed), k0.spec(tid): specJSON},
			want:    state{k0.req(tid): reqHash(Completed)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			b, err := s.Begin(context.Background(), tid, c.now)
			if err != nil {
				t.Fatal(err)
			}
			if b.State != c.wantState || b.N != c.wantN {
				t.Errorf("Begin = state %v n %d, want %v %d", b.State, b.N, c.wantState, c.wantN)
			}
			if b.WaitedFor != c.wantWaited || !b.WaitedUntil.Equal(c.wantUntil) {
				t.Errorf("Begin says it waited for %q until %v; want %q until %v", b.WaitedFor, b.WaitedUntil, c.wantWaited, c.wantUntil)
			}
			if diff := cmp.Diff(c.want, dump(t, rdb, k0.req(tid), k0.attempts(tid), k0.stats()), jsonAware); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// An attempt taken back (it waits for a flow-control slot) is not counted:
// attemptCount goes back, nothing is in flight, and the request says what
// it waits for and until when (no time when an event starts it). A stale
// take-back (another run holds the attempt) does nothing.
func TestUnbeginScript(t *testing.T) {
	t.Parallel()
	later := t0.Add(3 * time.Second)
	laterMs := strconv.FormatInt(later.UnixMilli(), 10)
	for _, c := range []struct {
		name    string
		initial state
		n       int
		reason  string
		until   time.Time
		want    state
	}{
		{"a rate turn: the reason and its time", state{k0.req(tid): reqHash(Retrying, fAttemptCount, "3", "inflightN", "3", "inflightAt", t0ms)}, 3,
			WaitingRate, later, state{k0.req(tid): reqHash(Retrying, fAttemptCount, "2", fWaitingFor, WaitingRate, fWaitUntil, laterMs)}},
		{"a paused key: the reason, no time", state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms,
			fWaitingFor, WaitingRate, fWaitUntil, laterMs)}, 1,
			WaitingPaused, time.Time{}, state{k0.req(tid): reqHash(Pending, fAttemptCount, "0", fWaitingFor, WaitingPaused)}},
		{"no reason to show", state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms,
			fWaitingFor, WaitingRate, fWaitUntil, laterMs)}, 1,
			"", time.Time{}, state{k0.req(tid): reqHash(Pending, fAttemptCount, "0")}},
		{"another attempt in flight", state{k0.req(tid): reqHash(Retrying, fAttemptCount, "4", "inflightN", "4", "inflightAt", t0ms)}, 3,
			WaitingQueue, time.Time{}, state{k0.req(tid): reqHash(Retrying, fAttemptCount, "4", "inflightN", "4", "inflightAt", t0ms)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			if err := s.Unbegin(context.Background(), tid, c.n, c.reason, c.until); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, dump(t, rdb, k0.req(tid)), jsonAware); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFinishScript(t *testing.T) {
	t.Parallel()
	dur := int64(7)
	inflight := reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)
	attempt := func(outcome, class string) Attempt {
		return Attempt{N: 1, StartedAt: t0, DurationMs: &dur, Outcome: outcome, FailureClass: class, StatusCode: 503, Error: "boom"}
	}
	body, long := "ok", strings.Repeat("r", inlineResultMax+1)
	cases := []struct {
		name       string
		initial    state
		outcome    Outcome
		wantResult FinishResult
		check      func(t *testing.T, got state)
	}{
		{
			name:    "a stale run changes nothing",
			initial: state{k0.req(tid): reqHash(Pending, fAttemptCount, "2", "inflightN", "2"), d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("retryable", "server_error"), Status: Retrying, NextAttemptAt: t0.Add(time.Second)}, wantResult: Stale,
			check: func(t *testing.T, got state) {
				want := state{k0.req(tid): reqHash(Pending, fAttemptCount, "2", "inflightN", "2"), d0.index(Pending): zset{tid}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("state (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "a retryable failure schedules the next attempt",
			initial: state{k0.req(tid): inflight, d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("retryable", "server_error"), Status: Retrying, NextAttemptAt: t0.Add(time.Second)}, wantResult: Recorded,
			check: func(t *testing.T, got state) {
				want := reqHash(Retrying, fAttemptCount, "1", fBudgetUsed, "1", fNextAttemptAt, strconv.FormatInt(t0.Add(time.Second).UnixMilli(), 10),
					fLastError, "boom", fLastStatusCode, "503", fFailureClass, "server_error", fUpdatedAt, t0ms)
				if diff := cmp.Diff(want, got[k0.req(tid)]); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(zset{tid}, got[d0.index(Retrying)]); diff != "" || got[d0.index(Pending)] != nil {
					t.Errorf("indexes: pending %v retrying %v", got[d0.index(Pending)], got[d0.index(Retrying)])
				}
				if n := len(got[k0.attempts(tid)].([]string)); n != 1 {
					t.Errorf("%d attempts recorded, want 1", n)
				}
			},
		},
		{
			name:    "a success completes, keeps its short result in the hash and makes the callback due",
			initial: state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms, fHasCallback, "1"), d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("success", ""), Status: Completed, Result: &body}, wantResult: RecordedCallback,
			check: func(t *testing.T, got state) {
				h := got[k0.req(tid)].(map[string]string)
				if h[fStatus] != "completed" || h["completedAt"] != t0ms || h["cbStatus"] != "pending" || h[fHasResult] != resultInline ||
					h[fResult] != "ok" || h[fResultTrunc] != "0" {
					t.Errorf("request hash %v; want completed, the callback pending, the result %q inline", h, body)
				}
				if got[k0.result(tid)] != nil {
					t.Errorf("result key %v; a short result has none", got[k0.result(tid)])
				}
				if diff := cmp.Diff(zset{tid}, got[k0.callbackDue()]); diff != "" {
					t.Errorf("callback-due (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "a success keeps a result longer than a compact hash's value in its own key",
			initial: state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms), d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("success", ""), Status: Completed, Result: &long}, wantResult: Recorded,
			check: func(t *testing.T, got state) {
				h := got[k0.req(tid)].(map[string]string)
				if h[fHasResult] != resultInKey || h[fResult] != "" {
					t.Errorf("request hash %v; want hasResult %q and no inline result", h, resultInKey)
				}
				if got[k0.result(tid)] != long {
					t.Errorf("result key %v, want the %d bytes", got[k0.result(tid)], len(long))
				}
			},
		},
		{
			name: "an attempt that made no call is recorded with what stopped it, takes back its number, spends no budget and is not counted",
			initial: state{k0.req(tid): reqHash(Retrying, fAttemptCount, "2", fBudgetUsed, "1", "inflightN", "2", "inflightAt", t0ms),
				d0.index(Retrying): zset{tid}},
			outcome: Outcome{Attempt: Attempt{N: 2, StartedAt: t0, Outcome: "permanent", FailureClass: "endpoint_down", Error: "endpoint open; no call was made",
				NotCalled: true}, Status: Failed, Due: t0.Add(-time.Minute)}, wantResult: Recorded,
			check: func(t *testing.T, got state) {
				h := got[k0.req(tid)].(map[string]string)
				if h[fStatus] != "failed" || h[fAttemptCount] != "1" || h[fBudgetUsed] != "1" || h[fFailureClass] != "endpoint_down" ||
					h[fLastError] != "endpoint open; no call was made" || h["inflightN"] != "" {
					t.Errorf("request hash %v; want failed, attemptCount 1 and budgetUsed 1 as before, endpoint_down and its error, nothing in flight", h)
				}
				want := []string{`{"n":2,"startedAtMs":` + t0ms + `,"outcome":"permanent","failureClass":"endpoint_down","error":"endpoint open; no call was made","notCalled":true}`}
				if diff := cmp.Diff(want, got[k0.attempts(tid)], jsonAware); diff != "" {
					t.Errorf("attempts (-want +got):\n%s", diff)
				}
				if got[k0.stats()] != nil {
					t.Errorf("stats %v; an attempt that made no call is counted in no attempt metric", got[k0.stats()])
				}
			},
		},
		{
			name: "an attempt that made no call and is to be retried (a token endpoint down) takes back its number but spends budget",
			initial: state{k0.req(tid): reqHash(Retrying, fAttemptCount, "2", fBudgetUsed, "1", "inflightN", "2", "inflightAt", t0ms),
				d0.index(Retrying): zset{tid}},
			outcome: Outcome{Attempt: Attempt{N: 2, StartedAt: t0, Outcome: "retryable", FailureClass: "credential_error", Error: "token endpoint answered 503",
				NotCalled: true}, Status: Retrying, NextAttemptAt: t0.Add(time.Second), Due: t0.Add(-time.Minute)}, wantResult: Recorded,
			check: func(t *testing.T, got state) {
				h := got[k0.req(tid)].(map[string]string)
				if h[fStatus] != "retrying" || h[fAttemptCount] != "1" || h[fBudgetUsed] != "2" || h[fFailureClass] != "credential_error" {
					t.Errorf("request hash %v; want retrying, attemptCount 1 (no call), budgetUsed 2 (a try all the same), credential_error", h)
				}
				if got[k0.stats()] != nil {
					t.Errorf("stats %v; an attempt that made no call is counted in no attempt metric", got[k0.stats()])
				}
			},
		},
		{
			name:    "a request canceled while an attempt that made no call ended takes its number back too",
			initial: state{k0.req(tid): reqHash(Canceled, fAttemptCount, "1", "inflightN", "1"), d0.index(Canceled): zset{tid}},
			outcome: Outcome{Attempt: Attempt{N: 1, StartedAt: t0, Outcome: "permanent", FailureClass: "blocked_destination", Error: "refused", NotCalled: true},
				Status: Failed}, wantResult: CanceledMeanwhile,
			check: func(t *testing.T, got state) {
				h := got[k0.req(tid)].(map[string]string)
				if h[fStatus] != "canceled" || h[fAttemptCount] != "0" || h[fBudgetUsed] != "0" || len(got[k0.attempts(tid)].([]string)) != 1 {
					t.Errorf("state %v; want canceled, attemptCount and budgetUsed 0, the entry recorded", got)
				}
			},
		},
		{
			name:    "a QStash message with only a failure callback has no callback due on success",
			initial: state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms, fHasCallback, "1", fCallbackOn, "f"), d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("success", ""), Status: Completed}, wantResult: Recorded,
			check: func(t *testing.T, got state) {
				if h := got[k0.req(tid)].(map[string]string); h[fCbStatus] != "" || got[k0.callbackDue()] != nil {
					t.Errorf("cbStatus %q, callbacks due %v; want none", h[fCbStatus], got[k0.callbackDue()])
				}
			},
		},
		{
			name:    "a QStash message with only a failure callback has it due on failure",
			initial: state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms, fHasCallback, "1", fCallbackOn, "f"), d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("permanent", "client_error"), Status: Failed}, wantResult: RecordedCallback,
			check: func(t *testing.T, got state) {
				if h := got[k0.req(tid)].(map[string]string); h[fCbStatus] != "pending" {
					t.Errorf("cbStatus %q; want pending", h[fCbStatus])
				}
			},
		},
		{
			name:    "a QStash message with only a callback has none due on failure",
			initial: state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms, fHasCallback, "1", fCallbackOn, "c"), d0.index(Pending): zset{tid}},
			outcome: Outcome{Attempt: attempt("permanent", "client_error"), Status: Failed}, wantResult: Recorded,
			check: func(t *testing.T, got state) {},
		},
		{
			name:    "a request canceled meanwhile keeps its status and gains the attempt",
			initial: state{k0.req(tid): reqHash(Canceled, fAttemptCount, "1", "inflightN", "1"), d0.index(Canceled): zset{tid}},
			outcome: Outcome{Attempt: attempt("success", ""), Status: Completed, Result: &body}, wantResult: CanceledMeanwhile,
			check: func(t *testing.T, got state) {
				h := got[k0.req(tid)].(map[string]string)
				if h[fStatus] != "canceled" || len(got[k0.attempts(tid)].([]string)) != 1 || got[d0.index(Completed)] != nil {
					t.Errorf("state %v", got)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			res, err := s.Finish(context.Background(), tid, c.outcome, t0)
			if err != nil {
				t.Fatal(err)
			}
			if res != c.wantResult {
				t.Errorf("Finish = %v, want %v", res, c.wantResult)
			}
			c.check(t, dump(t, rdb, k0.req(tid), k0.attempts(tid), k0.result(tid), k0.callbackDue(),
				d0.index(Pending), d0.index(Retrying), d0.index(Completed), d0.index(Canceled), k0.stats()))
			if c.wantResult == RecordedCallback {
				// The sweeper's trim ends it, from its finished entry.
				if ttl := rdb.PTTL(context.Background(), k0.req(tid)).Val(); ttl != -1 {
					t.Errorf("a finished record's PTTL is %v, want -1 (no TTL)", ttl)
				}
			}
		})
	}
}

// A finished request's keys get no TTL, whatever it had (a record an
// earlier version finished, then redriven, may still carry one from its
// first finish; redrive persists it): the sweeper's trim deletes them all
// once the retention has passed. Its redrives and its result exist only
// when it has them.
func TestFinishGivesNoKeyATTL(t *testing.T) {
	t.Parallel()
	dur := int64(7)
	body := strings.Repeat("r", inlineResultMax+1) // kept in its own key
	redriven := state{
		k0.req(tid):      reqHash(Pending, fAttemptCount, "2", "inflightN", "2", "inflightAt", t0ms, fRedriveCount, "1", fHasResult, "1"),
		k0.spec(tid):     specJSON,
		k0.attempts(tid): []string{`{"n":1}`},
		k0.redrives(tid): []string{`{"n":1}`},
		k0.result(tid):   "earlier",
	}
	fresh := state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms), k0.spec(tid): specJSON}
	for _, c := range []struct {
		name    string
		initial state
		n       int
		result  *string
		want    []string // keys there, with no TTL
		without []string // keys that do not exist
	}{
		{"redriven, with an earlier result", redriven, 2, nil,
			[]string{k0.req(tid), k0.spec(tid), k0.attempts(tid), k0.redrives(tid), k0.result(tid)}, nil},
		{"first run, keeping its result", fresh, 1, &body,
			[]string{k0.req(tid), k0.spec(tid), k0.attempts(tid), k0.result(tid)}, []string{k0.redrives(tid)}},
		{"first run, no result", fresh, 1, nil,
			[]string{k0.req(tid), k0.spec(tid), k0.attempts(tid)}, []string{k0.redrives(tid), k0.result(tid)}},
		{"redriven, with an earlier result and a new one", redriven, 2, &body,
			[]string{k0.req(tid), k0.spec(tid), k0.attempts(tid), k0.redrives(tid), k0.result(tid)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			res, err := s.Finish(context.Background(), tid, Outcome{Attempt: Attempt{N: c.n, StartedAt: t0, DurationMs: &dur, Outcome: "success"},
				Status: Completed, Result: c.result}, t0)
			if err != nil || res != Recorded {
				t.Fatalf("Finish = %v, %v", res, err)
			}
			if c.result != nil {
				if v := rdb.Get(context.Background(), k0.result(tid)).Val(); v != *c.result {
					t.Errorf("result %q, want %q", v, *c.result)
				}
			}
			for _, k := range c.want {
				if ttl := rdb.PTTL(context.Background(), k).Val(); ttl != -1 {
					t.Errorf("%s: PTTL %v, want -1 (there, no TTL)", k, ttl)
				}
			}
			for _, k := range c.without {
				if n := rdb.Exists(context.Background(), k).Val(); n != 0 {
					t.Errorf("%s exists", k)
				}
			}
		})
	}
}

// A result kept by an attempt the request goes on after has no TTL: the
// request is not finished, and nothing of it may expire yet.
func TestFinishKeepsAnUnfinishedRequestsResultWithoutTTL(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	seed(t, rdb, state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms), k0.spec(tid): specJSON})
	dur, body := int64(7), strings.Repeat("p", inlineResultMax+1) // kept in its own key
	res, err := s.Finish(context.Background(), tid, Outcome{Attempt: Attempt{N: 1, StartedAt: t0, DurationMs: &dur, Outcome: "failure"},
		Status: Retrying, Result: &body}, t0)
	if err != nil || res != Recorded {
		t.Fatalf("Finish = %v, %v", res, err)
	}
	for _, k := range []string{k0.req(tid), k0.result(tid), k0.attempts(tid)} {
		if ttl := rdb.PTTL(context.Background(), k).Val(); ttl != -1 {
			t.Errorf("%s: PTTL %v, want -1 (kept, no TTL)", k, ttl)
		}
	}
}

func TestCancelScript(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		initial   state
		wantDue   bool
		wantErr   error
		wantState Status
	}{
		{"pending", state{k0.req(tid): reqHash(Pending), d0.index(Pending): zset{tid}}, false, nil, Canceled},
		{"retrying with a callback", state{k0.req(tid): reqHash(Retrying, fHasCallback, "1"), d0.index(Retrying): zset{tid}}, true, nil, Canceled},
		{"a QStash message with callbacks (none on a cancel)", state{k0.req(tid): reqHash(Retrying, fHasCallback, "1", fCallbackOn, "cf"), d0.index(Retrying): zset{tid}}, false, nil, Canceled},
		{"completed", state{k0.req(tid): reqHash(Completed), d0.index(Completed): zset{tid}}, false, ErrConflict, Completed},
		{"missing", state{}, false, ErrNotFound, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			due, err := s.Cancel(context.Background(), tenant.All, tid, "api", t0)
			if !errors.Is(err, c.wantErr) || due != c.wantDue {
				t.Fatalf("Cancel = %v, %v; want %v, %v", due, err, c.wantDue, c.wantErr)
			}
			got := dump(t, rdb, k0.req(tid), d0.index(Pending), d0.index(Retrying), d0.index(Canceled), k0.callbackDue())
			if c.wantState == "" {
				if len(got) != 0 {
					t.Errorf("state %v, want empty", got)
				}
				return
			}
			if st := got[k0.req(tid)].(map[string]string)[fStatus]; st != string(c.wantState) {
				t.Errorf("status %s, want %s", st, c.wantState)
			}
			if c.wantState == Canceled {
				want := zset{tid}
				if diff := cmp.Diff(want, got[d0.index(Canceled)]); diff != "" || got[d0.index(Pending)] != nil || got[d0.index(Retrying)] != nil {
					t.Errorf("indexes %v", got)
				}
				if (got[k0.callbackDue()] != nil) != c.wantDue {
					t.Errorf("callback due %v, want %v", got[k0.callbackDue()], c.wantDue)
				}
			}
		})
	}
}

func TestRedriveScript(t *testing.T) {
	t.Parallel()
	failed := reqHash(Failed, fAttemptCount, "3", fBudgetUsed, "3", fFailureClass, "interrupted", fLastError, "boom", "completedAt", t0ms,
		"interrupted", "2")
	cases := []struct {
		name    string
		initial state
		in      RedriveInput
		wantErr error
		check   func(t *testing.T, got state)
	}{
		{
			name:    "a failed request goes back to pending with a fresh budget, a fresh interruption allowance and an audit entry",
			initial: state{k0.req(tid): failed, d0.index(Failed): zset{tid}},
			in:      RedriveInput{Scope: tenant.All, Actor: "erin", Reason: "fixed", Limit: 3, Now: t0},
			check: func(t *testing.T, got state) {
				want := reqHash(Pending, fAttemptCount, "3", fRedriveCount, "1", "redriveOpen", "1", fNextAttemptAt, t0ms)
				if diff := cmp.Diff(want, got[k0.req(tid)]); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(zset{tid}, got[d0.index(Pending)]); diff != "" || got[d0.index(Failed)] != nil {
					t.Errorf("indexes %v", got)
				}
				if n := len(got[k0.redrives(tid)].([]string)); n != 1 {
					t.Errorf("%d audit entries, want 1", n)
				}
			},
		},
		{
			name:    "at the limit: refused, nothing changes",
			initial: state{k0.req(tid): reqHash(Failed, fRedriveCount, "3"), d0.index(Failed): zset{tid}},
			in:      RedriveInput{Scope: tenant.All, Actor: "erin", Limit: 3, Now: t0}, wantErr: ErrRedriveLimit,
			check: func(t *testing.T, got state) {
				if diff := cmp.Diff(state{k0.req(tid): reqHash(Failed, fRedriveCount, "3"), d0.index(Failed): zset{tid}}, got); diff != "" {
					t.Errorf("state (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "expunged: refused, nothing changes",
			initial: state{k0.req(tid): reqHash(Failed, fExpunged, "1"), d0.index(Failed): zset{tid}},
			in:      RedriveInput{Scope: tenant.All, Actor: "erin", Limit: 3, Now: t0}, wantErr: ErrRedriveExpunged,
			check: func(t *testing.T, got state) {
				if diff := cmp.Diff(state{k0.req(tid): reqHash(Failed, fExpunged, "1"), d0.index(Failed): zset{tid}}, got); diff != "" {
					t.Errorf("state (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "not failed: refused",
			initial: state{k0.req(tid): reqHash(Retrying), d0.index(Retrying): zset{tid}},
			in:      RedriveInput{Scope: tenant.All, Actor: "erin", Limit: 3, Now: t0}, wantErr: ErrNotFailed,
			check: func(*testing.T, state) {},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			_, err := s.Redrive(context.Background(), tid, c.in)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Redrive = %v, want %v", err, c.wantErr)
			}
			c.check(t, dump(t, rdb, k0.req(tid), k0.redrives(tid), d0.index(Pending), d0.index(Failed), d0.index(Retrying)))
		})
	}
}

// A request an earlier version finished carries its retention as a TTL on
// its keys: redriven, it runs again, and none of them may expire meanwhile.
func TestRedrivePersistsTheTTLOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	seed(t, rdb, state{
		k0.req(tid):      reqHash(Failed, fAttemptCount, "1", fFailureClass, "server_error", "completedAt", t0ms),
		k0.spec(tid):     specJSON,
		k0.attempts(tid): []string{`{"n":1}`},
		k0.result(tid):   "earlier",
		d0.index(Failed): zset{tid},
	})
	keys := []string{k0.req(tid), k0.spec(tid), k0.attempts(tid), k0.result(tid)}
	for _, k := range keys {
		rdb.PExpire(ctx, k, time.Hour)
	}
	if _, err := s.Redrive(ctx, tid, RedriveInput{Scope: tenant.All, Actor: "erin", Limit: 3, Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl != -1 {
			t.Errorf("%s: PTTL %v after the redrive, want -1 (no TTL)", k, ttl)
		}
	}
}

func TestScheduleScripts(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	const sid = "01m8mhyychtfy2pdj6g9"
	seed(t, rdb, state{k0.schedule(sid): map[string]string{"nextFireAt": t0ms, "paused": "0"}, k0.scheduleDue(): zset{sid}})
	next := t0.Add(time.Minute)
	nextMs := strconv.FormatInt(next.UnixMilli(), 10)

	// Two replicas advance the same tick: only the first does.
	for i, want := range []bool{true, false} {
		ok, err := s.AdvanceSchedule(ctx, sid, t0, next, []Fire{{FireTime: t0, RequestID: tid}})
		if err != nil || ok != want {
			t.Fatalf("advance %d = %v, %v; want %v", i+1, ok, err, want)
		}
	}
	got := dump(t, rdb, k0.schedule(sid), k0.scheduleDue())
	want := state{k0.schedule(sid): map[string]string{"nextFireAt": nextMs, "paused": "0"}, k0.scheduleDue(): zset{sid}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after advance (-want +got):\n%s", diff)
	}
	if fires := rdb.LLen(ctx, k0.scheduleFires(sid)).Val(); fires != 1 {
		t.Errorf("%d fires kept, want 1", fires)
	}

	if err := s.SetPaused(ctx, sid, true, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got = dump(t, rdb, k0.schedule(sid), k0.scheduleDue())
	want = state{k0.schedule(sid): map[string]string{"nextFireAt": nextMs, "paused": "1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after pause (-want +got):\n%s", diff)
	}
	if ok, _ := s.AdvanceSchedule(ctx, sid, next, next.Add(time.Minute), nil); ok {
		t.Error("a paused schedule advanced")
	}
	later := next.Add(time.Hour)
	if err := s.SetPaused(ctx, sid, false, later); err != nil {
		t.Fatal(err)
	}
	got = dump(t, rdb, k0.schedule(sid), k0.scheduleDue())
	laterMs := strconv.FormatInt(later.UnixMilli(), 10)
	want = state{k0.schedule(sid): map[string]string{"nextFireAt": laterMs, "paused": "0"}, k0.scheduleDue(): zset{sid}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after resume (-want +got):\n%s", diff)
	}
	if err := s.SetPaused(ctx, "01nosuchschedule0000", true, time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("pausing a missing schedule: %v", err)
	}
}

// Every script file starts with its contract; every Go wrapper's script
// exists (script panics at package load otherwise).
func TestEveryScriptHasItsContract(t *testing.T) {
	t.Parallel()
	entries, err := scripts.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		src, _ := scripts.ReadFile("scripts/" + e.Name())
		text := string(src)
		for _, part := range []string{"-- KEYS[1]", "-- ARGV[1]", "-- Returns"} {
			if !containsLine(text, part) {
				t.Errorf("%s does not list %q at its top", e.Name(), part)
			}
		}
	}
	sort.Strings(names)
	if len(names) < 8 {
		t.Errorf("only %d scripts: %v", len(names), names)
	}
}

func containsLine(text, prefix string) bool {
	return strings.HasPrefix(text, prefix) || strings.Contains(text, "\n"+prefix)
}
