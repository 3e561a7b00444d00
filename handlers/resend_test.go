package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/tasks"
)

// canceledRequest submits a request due in an hour and cancels it: a
// finished request that no worker touches.
func canceledRequest(t *testing.T, ts string, body string) string {
	t.Helper()
	a := do(t, "POST", ts+"/requests", "application/json", body)
	if a.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	if c := do(t, "DELETE", ts+"/requests/"+id, "", ""); c.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.status, c.raw)
	}
	return id
}

func TestResendMakesALinkedNewRequest(t *testing.T) {
	t.Parallel()
	ts, b := setup(t, nil)
	orig := canceledRequest(t, ts.URL, `{"url":"https://example.com/x","method":"PUT","headers":{"X-Trace":"7"},"body":"hi","maxRetries":4,"backoffMs":500,"delayMs":3600000,"flowControl":{"key":"acme","parallelism":2}}`)

	a := do(t, "POST", ts.URL+"/requests/"+orig+"/resend", "application/json", `{"actor":"erin","reason":"partner lost it"}`, "Idempotency-Key", "r1")
	if a.status != http.StatusAccepted {
		t.Fatalf("resend: %d %s", a.status, a.raw)
	}
	id, _ := a.body["id"].(string)
	if id == "" || id == orig || a.header.Get("Location") != "/requests/"+id {
		t.Fatalf("resend answered id %q, Location %q", id, a.header.Get("Location"))
	}
	if a.body["status"] != "pending" || a.body["method"] != "PUT" || a.body["maxRetries"] != 4.0 || a.body["backoffMs"] != 500.0 ||
		a.body["attemptCount"] != 0.0 || a.body["redriveCount"] != 0.0 {
		t.Errorf("new request %s", a.raw)
	}
	if h, _ := a.body["headers"].(map[string]any); h["X-Trace"] != "7" {
		t.Errorf("headers not kept: %s", a.raw)
	}
	if fc, _ := a.body["flowControl"].(map[string]any); fc["key"] != "acme" {
		t.Errorf("flowControl not kept: %s", a.raw)
	}
	rf, _ := a.body["resentFrom"].(map[string]any)
	if rf["id"] != orig || rf["actor"] != "erin" || rf["reason"] != "partner lost it" || rf["at"] == nil {
		t.Errorf("resentFrom = %v", a.body["resentFrom"])
	}
	if _, err := b.inspector.GetTaskInfo(tasks.Queue, id); err != nil {
		t.Errorf("no asynq task for the resend %s: %v", id, err)
	}
	o := do(t, "GET", ts.URL+"/requests/"+orig, "", "")
	if rs, _ := o.body["resends"].([]any); len(rs) != 1 || rs[0] != id || o.body["status"] != "canceled" {
		t.Errorf("original after the resend: %s", o.raw)
	}

	// The same key returns the same new request and makes no other.
	again := do(t, "POST", ts.URL+"/requests/"+orig+"/resend", "application/json", `{"actor":"erin"}`, "Idempotency-Key", "r1")
	if again.status != http.StatusOK || again.body["id"] != id || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %v %s", again.status, again.header, again.raw)
	}
	if o := do(t, "GET", ts.URL+"/requests/"+orig, "", ""); len(o.body["resends"].([]any)) != 1 {
		t.Errorf("a replay resent again: %s", o.raw)
	}
	// Without a key, each call is a resend of its own.
	if x := do(t, "POST", ts.URL+"/requests/"+orig+"/resend", "", ""); x.status != http.StatusAccepted || x.body["id"] == id {
		t.Errorf("resend without a key or body: %d %s", x.status, x.raw)
	} else if rf, _ := x.body["resentFrom"].(map[string]any); rf["actor"] != "api" {
		t.Errorf("default actor: %v", x.body["resentFrom"])
	}
}

func TestResendRejections(t *testing.T) {
	t.Parallel()
	ts, _ := setup(t, nil)
	const sub = `{"url":"https://example.com/x","delayMs":3600000}`
	orig := canceledRequest(t, ts.URL, sub)
	other := canceledRequest(t, ts.URL, sub)
	first := do(t, "POST", ts.URL+"/requests/"+orig+"/resend", "", "", "Idempotency-Key", "k")
	if first.status != http.StatusAccepted {
		t.Fatalf("resend: %d %s", first.status, first.raw)
	}
	pending := first.body["id"].(string)
	cases := []struct {
		name, id, body string
		headers        []string
		status         int
		code, field    string
		says           string
	}{
		{"an unfinished request", pending, "", nil, 409, "conflict", "", "DELETE /requests/" + pending},
		{"the key used to resend another request", other, "", []string{"Idempotency-Key", "k"}, 409, "conflict", "", "another request"},
		{"an actor too long", orig, `{"actor":"` + strings.Repeat("a", 201) + `"}`, nil, 400, "invalid_request", "actor", "200"},
		{"a reason too long", orig, `{"reason":"` + strings.Repeat("a", 2001) + `"}`, nil, 400, "invalid_request", "reason", "2000"},
		{"a body that is not JSON", orig, `actor=erin`, nil, 400, "invalid_request", "", "JSON"},
		{"an Idempotency-Key too long", orig, "", []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "invalid_request", "Idempotency-Key", "255"},
		{"an unknown id", "01m8mg842n8nbsaee7cq", "", nil, 404, "not_found", "", ""},
		{"a malformed id", "nope", "", nil, 404, "not_found", "", ""},
	}
	for _, c := range cases {
		a := do(t, "POST", ts.URL+"/requests/"+c.id+"/resend", "application/json", c.body, c.headers...)
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, a.status, c.status, a.raw)
			continue
		}
		code, field := errorOf(t, a)
		if code != c.code || field != c.field || !strings.Contains(a.raw, c.says) {
			t.Errorf("%s: error %s, want code %s field %q saying %q", c.name, a.raw, c.code, c.field, c.says)
		}
	}
	if o := do(t, "GET", ts.URL+"/requests/"+other, "", ""); len(o.body["resends"].([]any)) != 0 {
		t.Errorf("a refused resend was made: %s", o.raw)
	}
}

// A resend is its tenant's: another tenant's resend or expunge of it is
// 404 and changes nothing; the new request is the original's tenant's,
// counts among its unfinished requests and is capped with them.
func TestResendAndExpungeStayWithinTheTenant(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), map[string]string{
		"API_KEYS": "team-a:a,team-b:b", "MAX_UNFINISHED_PER_KEY": "2"})
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }
	sub := do(t, "POST", ts.URL+"/requests", "application/json", `{"url":"https://example.com","body":"x","delayMs":600000}`, as("a")...)
	if sub.status != 202 {
		t.Fatalf("submit: %d %s", sub.status, sub.raw)
	}
	orig := sub.body["id"].(string)
	if c := do(t, "DELETE", ts.URL+"/requests/"+orig, "", "", as("a")...); c.status != 200 {
		t.Fatalf("cancel: %d %s", c.status, c.raw)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/requests/" + orig + "/resend"}, {"DELETE", "/requests/" + orig + "/payload"}} {
		if a := do(t, c.method, ts.URL+c.path, "application/json", "", as("b")...); a.status != 404 {
			t.Errorf("team-b's %s %s: %d %s, want 404", c.method, c.path, a.status, a.raw)
		}
	}
	if o := do(t, "GET", ts.URL+"/requests/"+orig, "", "", as("a")...); o.body["expunged"] != false || len(o.body["resends"].([]any)) != 0 {
		t.Errorf("team-b's calls changed team-a's request: %s", o.raw)
	}
	for i := range 2 {
		a := do(t, "POST", ts.URL+"/requests/"+orig+"/resend", "", "", as("a")...)
		if a.status != 202 || a.body["tenant"] != "team-a" {
			t.Fatalf("resend %d: %d %s", i+1, a.status, a.raw)
		}
		if b := do(t, "GET", ts.URL+"/requests/"+a.body["id"].(string), "", "", as("b")...); b.status != 404 {
			t.Errorf("team-b reads team-a's resend: %d", b.status)
		}
	}
	a := do(t, "POST", ts.URL+"/requests/"+orig+"/resend", "", "", as("a")...)
	if code, _ := errorOf(t, a); a.status != 429 || code != "rate_limited" || !strings.Contains(a.raw, "unfinished") {
		t.Errorf("a third unfinished request by resend: %d %s, want 429", a.status, a.raw)
	}
}

// A resend meets the destination rules in force now: a destination the
// API accepted under other rules is refused with 422 naming the setting,
// and nothing is made. A body over 64 KiB is 413, on resend and expunge.
func TestResendMeetsTodaysDestinationRules(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := srv.Client()
	serve := func(guard *egress.Guard) string {
		api := &handlers.API{
			Store:        record.NewStore(rdb, time.Hour),
			Queue:        &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)},
			Destinations: guard,
			Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now:          time.Now,
		}
		ts := httptest.NewServer(app.NewEngine(api, app.Access{}, api.Log))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	open, strict := serve(&egress.Guard{AllowPrivate: true}), serve(&egress.Guard{})
	orig := canceledRequest(t, open, `{"url":"http://10.1.2.3:8080/hook","delayMs":3600000}`)
	a := do(t, "POST", strict+"/requests/"+orig+"/resend", "", "")
	if code, field := errorOf(t, a); a.status != http.StatusUnprocessableEntity || code != "blocked_destination" || field != "url" ||
		!strings.Contains(a.raw, "ALLOWED_CIDRS") {
		t.Errorf("resend to a destination refused now: %d %s", a.status, a.raw)
	}
	if o := do(t, "GET", open+"/requests/"+orig, "", ""); len(o.body["resends"].([]any)) != 0 {
		t.Errorf("a refused resend was made: %s", o.raw)
	}
	big := `{"actor":"` + strings.Repeat("a", 65<<10) + `"}`
	for _, c := range []struct{ method, path string }{{"POST", "/requests/" + orig + "/resend"}, {"DELETE", "/requests/" + orig + "/payload"}} {
		if a := do(t, c.method, open+c.path, "application/json", big); a.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with a 65 KiB body: %d %s, want 413", c.method, c.path, a.status, a.raw)
		}
	}
}

// resendRace is the real store with a hook run inside a resend, after the
// handler read the original and before the store's script runs.
type resendRace struct {
	*record.Store
	before func()
}

func (s *resendRace) Resend(ctx context.Context, orig *record.Request, in record.ResendInput) (*record.ResendResult, error) {
	if s.before != nil {
		s.before()
	}
	return s.Store.Resend(ctx, orig, in)
}

// A resend racing a redrive of the same failed request, through the API:
// both answer the truth and agree with what is stored. The redrive always
// goes (the resend leaves the original failed); the resend either went
// first (202, linked once both ways) or found the request back in
// delivery (409, no new request, no link). Three ways: the resend's
// script runs after the redrive though its handler read the request
// failed; the redrive after the resend; and both at once.
func TestResendRacingARedriveAnswersTruthfully(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t, redistest.Options{}).Client()
	store := record.NewStore(rdb, time.Hour)
	enq := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)}
	hooked := &resendRace{Store: store}
	api := &handlers.API{Store: hooked, Queue: enq, Destinations: &egress.Guard{AllowPrivate: true},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	race := &raceStore{Store: store}
	ts := httptest.NewServer(app.NewEngine(api, app.Access{}, api.Log, &handlers.DLQ{Store: race, Queue: enq, RedriveLimit: 3, API: api}))
	t.Cleanup(ts.Close)
	b := &dlqBundle{ts: ts, store: store, race: race}

	for i, order := range []string{"redrive first", "resend first", "together", "together", "together", "together", "together", "together"} {
		id := b.failed(t, 0)
		redrove := make(chan struct{})
		resent := make(chan struct{})
		hooked.before, race.beforeRedrive = nil, nil
		switch order {
		case "redrive first":
			hooked.before = func() { <-redrove }
		case "resend first":
			race.beforeRedrive = func(string) { <-resent }
		}
		var rs answer
		go func() {
			defer close(resent)
			rs = do(t, "POST", ts.URL+"/requests/"+id+"/resend", "application/json", `{"actor":"erin"}`)
		}()
		rd := do(t, "POST", ts.URL+"/dlq/"+id+"/redrive", "application/json", `{"actor":"bob"}`)
		close(redrove)
		<-resent

		if rd.status != http.StatusAccepted {
			t.Fatalf("%d (%s): redrive %d %s", i, order, rd.status, rd.raw)
		}
		o := do(t, "GET", ts.URL+"/requests/"+id, "", "")
		resends, _ := o.body["resends"].([]any)
		redrives, _ := o.body["redrives"].([]any)
		if o.body["status"] != "pending" || len(redrives) != 1 || o.body["redriveCount"] != 1.0 {
			t.Errorf("%d (%s): the original after both: %s", i, order, o.raw)
		}
		var made []string
		for _, r := range do(t, "GET", ts.URL+"/requests?limit=100", "", "").body["data"].([]any) {
			if rf, _ := r.(map[string]any)["resentFrom"].(map[string]any); rf != nil && rf["id"] == id {
				made = append(made, r.(map[string]any)["id"].(string))
			}
		}
		switch rs.status {
		case http.StatusAccepted:
			if order == "redrive first" {
				t.Errorf("%d: a resend of a request already redriven went: %s", i, rs.raw)
			}
			if len(resends) != 1 || resends[0] != rs.body["id"] || len(made) != 1 || made[0] != rs.body["id"] {
				t.Errorf("%d (%s): resend answered %v; the original lists %v, requests resent from it %v", i, order, rs.body["id"], resends, made)
			}
		case http.StatusConflict:
			if order == "resend first" {
				t.Errorf("%d: a resend before the redrive was refused: %s", i, rs.raw)
			}
			if !strings.Contains(rs.raw, "pending") || len(resends) != 0 || len(made) != 0 {
				t.Errorf("%d (%s): refused resend %s; the original lists %v, requests resent from it %v", i, order, rs.raw, resends, made)
			}
		default:
			t.Errorf("%d (%s): resend %d %s", i, order, rs.status, rs.raw)
		}
	}
}
