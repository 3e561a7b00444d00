package handlers_test

import (
	"context"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// filterBed is a deployment with two tenants and an admin key whose
// requests the test submits through the API (due in an hour, so no
// worker takes them) and then finishes as a worker would.
type filterBed struct {
	t     *testing.T
	ts    string
	store *record.Store
	start time.Time
}

func newFilterBed(t *testing.T) *filterBed {
	t.Helper()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := engineServer(t, srv, limitsEnv)
	return &filterBed{t: t, ts: ts.URL, store: record.NewStore(srv.Client(), time.Hour), start: time.Now().Add(-time.Second)}
}

// submit submits url with method as key's tenant and, with tries, puts
// it through attempts answered with those status codes (0: a timeout),
// the last one deciding its end.
func (b *filterBed) submit(key, tenantName, method, u string, codes ...int) string {
	b.t.Helper()
	a := do(b.t, "POST", b.ts+"/requests", "application/json", `{"url":"`+u+`","method":"`+method+`","delayMs":3600000}`, bearer(key)...)
	id, _ := a.body["id"].(string)
	if a.status != 202 || id == "" {
		b.t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	ctx, now := context.Background(), time.Now().Add(2*time.Hour)
	for i, code := range codes {
		at, err := b.store.Begin(ctx, id, now)
		if err != nil || at.State != record.Started {
			b.t.Fatalf("begin %s: %+v %v", id, at, err)
		}
		o := record.Outcome{Attempt: record.Attempt{N: at.N, StartedAt: now, StatusCode: code, Outcome: "success"},
			Status: record.Completed, Host: hostOf(u), Tenant: tenantName}
		switch {
		case code == 0:
			o.Attempt.Outcome, o.Attempt.FailureClass, o.Status = "retryable", "timeout", record.Failed
		case code >= 500:
			o.Attempt.Outcome, o.Attempt.FailureClass, o.Status = "retryable", "server_error", record.Failed
		}
		if i < len(codes)-1 && o.Status == record.Failed {
			o.Status, o.NextAttemptAt = record.Retrying, now
		}
		if _, err := b.store.Finish(ctx, id, o, now); err != nil {
			b.t.Fatal(err)
		}
	}
	return id
}

func hostOf(u string) string {
	p, _ := url.Parse(u)
	return p.Hostname()
}

// list reads every page of GET /requests?query as key.
func (b *filterBed) list(key, query string) []string {
	b.t.Helper()
	var out []string
	cursor := ""
	for {
		q := query + "&limit=1"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		a := do(b.t, "GET", b.ts+"/requests?"+q, "", "", bearer(key)...)
		data, ok := a.body["data"].([]any)
		if a.status != 200 || !ok {
			b.t.Fatalf("GET /requests?%s: %d %s", q, a.status, a.raw)
		}
		for _, d := range data {
			out = append(out, d.(map[string]any)["id"].(string))
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func rfc(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339Nano)) }

func TestListFiltersOverTheAPI(t *testing.T) {
	t.Parallel()
	b := newFilterBed(t)
	failed := b.submit("acme-key", "acme", "POST", "http://127.0.0.1:9/orders", 503, 503)
	done := b.submit("acme-key", "acme", "PUT", "http://localhost:9/refunds?token=abc", 200)
	pending := b.submit("acme-key", "acme", "DELETE", "http://localhost:9/orders")
	beta := b.submit("beta-key", "beta", "POST", "http://127.0.0.1:9/orders", 0)

	for _, tt := range []struct {
		key, query string
		want       []string
	}{
		{"acme-key", "host=127.0.0.1", []string{failed}},
		{"acme-key", "host=LOCALHOST:9", []string{pending, done}},
		{"acme-key", "status=failed", []string{failed}},
		{"acme-key", "failureClass=server_error", []string{failed}},
		{"acme-key", "statusCode=503", []string{failed}},
		{"acme-key", "statusCode=200", []string{done}},
		{"acme-key", "createdFrom=" + rfc(b.start) + "&createdTo=" + rfc(time.Now()), []string{pending, done, failed}},
		{"acme-key", "finishedFrom=" + rfc(b.start), []string{done, failed}},
		{"acme-key", "host=localhost&method=put", []string{done}},
		{"acme-key", "host=localhost&urlContains=ORDERS", []string{pending}},
		{"acme-key", "host=localhost&urlContains=abc", nil}, // the token is masked
		{"acme-key", "label=none", nil},
		// A tenant never sees another's, whatever it filters on.
		{"beta-key", "host=127.0.0.1", []string{beta}},
		{"beta-key", "failureClass=server_error", nil},
		{"beta-key", "finishedFrom=" + rfc(b.start), []string{beta}},
		// An admin sees every tenant's, or the one it names.
		{"admin-key", "host=127.0.0.1", []string{beta, failed}},
		{"admin-key", "host=127.0.0.1&tenant=acme", []string{failed}},
		{"admin-key", "failureClass=timeout&tenant=beta", []string{beta}},
	} {
		if got := b.list(tt.key, tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("%s GET /requests?%s: got %v, want %v", tt.key, tt.query, got, tt.want)
		}
	}
	if a := do(t, "GET", b.ts+"/requests?host=127.0.0.1&tenant=acme", "", "", bearer("beta-key")...); a.status != 403 {
		t.Errorf("beta names acme: %d %s", a.status, a.raw)
	}
}

func TestListFilterRejections(t *testing.T) {
	t.Parallel()
	b := newFilterBed(t)
	for _, tt := range []struct{ query, field, says string }{
		{"createdFrom=yesterday", "createdFrom", "createdFrom must be an RFC 3339 time"},
		{"finishedTo=2025-13-01T00:00:00Z", "finishedTo", "RFC 3339"},
		{"createdTo=1718000000000", "createdTo", "RFC 3339"},
		{"colour=red", "colour", "unknown parameter"},
		{"urlContains=orders", "urlContains", "add host or label"},
		{"urlContains=orders&status=failed", "urlContains", "add host or label"},
		{"method=POST", "method", "add host, label, failureClass, statusCode, createdFrom/createdTo or finishedFrom/finishedTo"},
		{"method=P%20ST&host=a.com", "method", "HTTP method"},
		{"statusCode=999", "statusCode", "100 to 599"},
		{"statusCode=abc", "statusCode", "100 to 599"},
		{"failureClass=oops", "failureClass", "server_error"},
		{"host=a.com/x", "host", "host name or host:port"},
		{"host=a.com:", "host", "host name or host:port"},
		{"host=a.com:99999", "host", "host name or host:port"},
		{"host=a.com&host=b.com", "host", "more than once"},
		{"label=a%01b", "label", "control characters"},
		{"createdFrom=2025-06-02T00:00:00Z&createdTo=2025-06-01T00:00:00Z", "createdFrom", "createdFrom is after createdTo"},
		{"finishedFrom=2025-06-02T00:00:00Z&finishedTo=2025-06-01T00:00:00Z", "finishedFrom", "finishedFrom is after finishedTo"},
		{"cursor=zz", "cursor", "cursor is not one this list returned"},
		{"finishedFrom=2025-06-01T00:00:00Z&cursor=01m8mhyychtfy2pdj6g7", "cursor", "keep the filters"},
		{"status=done", "status", "pending, retrying, completed, failed, canceled"},
		{"limit=0", "limit", "between 1 and 500"},
		{"tenant=Not+A+Tenant", "tenant", "tenant must be"},
	} {
		a := do(t, "GET", b.ts+"/requests?"+tt.query, "", "", bearer("admin-key")...)
		if a.status != 400 {
			t.Errorf("GET /requests?%s: %d %s, want 400", tt.query, a.status, a.raw)
			continue
		}
		if code, field := errorOf(t, a); code != "invalid_request" || field != tt.field || !strings.Contains(message(a), tt.says) {
			t.Errorf("GET /requests?%s: %s on %q: %q; want invalid_request on %q saying %q", tt.query, code, field, message(a), tt.field, tt.says)
		}
	}
}

// bulkResult is a bulk call's answer: what it did (or would do), and
// what it skipped, by id.
type bulkResult struct {
	did     []string
	skipped map[string]string
	next    string
	count   int
}

func (b *filterBed) bulk(method, path, body, doneKey string) bulkResult {
	b.t.Helper()
	a := do(b.t, method, b.ts+path, "application/json", body, bearer("acme-key")...)
	list, ok := a.body[doneKey].([]any)
	if a.status != 200 || !ok {
		b.t.Fatalf("%s %s %s: %d %s", method, path, body, a.status, a.raw)
	}
	out := bulkResult{skipped: map[string]string{}}
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			x = m["id"]
		}
		out.did = append(out.did, x.(string))
	}
	sort.Strings(out.did)
	for _, s := range a.body["skipped"].([]any) {
		m := s.(map[string]any)
		out.skipped[m["id"].(string)] = m["reason"].(string)
	}
	out.next, _ = a.body["nextCursor"].(string)
	n, _ := a.body["count"].(float64)
	out.count = int(n)
	return out
}

// A bulk resend's dry run names exactly what the real call then resends,
// and skips the same requests for the same reasons.
func TestBulkResendDryRunCountsWhatTheRealCallSends(t *testing.T) {
	t.Parallel()
	b := newFilterBed(t)
	const u = "http://127.0.0.1:9/x"
	finished := []string{b.submit("acme-key", "acme", "POST", u, 200), b.submit("acme-key", "acme", "POST", u, 503),
		b.submit("acme-key", "acme", "POST", u, 0)}
	canceled := b.submit("acme-key", "acme", "POST", u)
	if a := do(t, "DELETE", b.ts+"/requests/"+canceled, "", "", bearer("acme-key")...); a.status != 200 {
		t.Fatalf("cancel: %d %s", a.status, a.raw)
	}
	finished = append(finished, canceled)
	pending := b.submit("acme-key", "acme", "POST", u)
	expunged := b.submit("acme-key", "acme", "POST", u, 503)
	if a := do(t, "DELETE", b.ts+"/requests/"+expunged+"/payload", "", "", bearer("acme-key")...); a.status != 200 {
		t.Fatalf("expunge: %d %s", a.status, a.raw)
	}
	b.submit("acme-key", "acme", "POST", "http://localhost:9/other", 200) // another host: not selected

	dry := b.bulk("POST", "/requests/resend", `{"host":"127.0.0.1","dryRun":true}`, "wouldResend")
	real := b.bulk("POST", "/requests/resend", `{"host":"127.0.0.1","actor":"erin","reason":"partner lost them"}`, "resent")
	if want := sorted(finished...); !slices.Equal(dry.did, want) || !slices.Equal(real.did, want) || dry.count != 4 || real.count != 4 {
		t.Errorf("dry run %v (count %d), real run %v (count %d); want %v both", dry.did, dry.count, real.did, real.count, want)
	}
	for _, run := range []bulkResult{dry, real} {
		if len(run.skipped) != 2 || !strings.Contains(run.skipped[pending], "only a finished request") ||
			!strings.Contains(run.skipped[expunged], "expunged") {
			t.Errorf("skipped %v; want %s as unfinished and %s as expunged", run.skipped, pending, expunged)
		}
	}
	if !mapsEqual(dry.skipped, real.skipped) {
		t.Errorf("the dry run skipped %v, the real one %v", dry.skipped, real.skipped)
	}
	// Each resend is a new pending request linked to its original.
	for _, id := range finished {
		a := do(t, "GET", b.ts+"/requests/"+id, "", "", bearer("acme-key")...)
		if rs, _ := a.body["resends"].([]any); len(rs) != 1 {
			t.Errorf("%s has resends %v", id, a.body["resends"])
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A limit pages a bulk call: each call looks at that many, and the
// cursor goes on where the last stopped, until every one was looked at.
func TestBulkCallsPageWithTheirCursor(t *testing.T) {
	t.Parallel()
	b := newFilterBed(t)
	var want []string
	for i := 0; i < 5; i++ {
		want = append(want, b.submit("acme-key", "acme", "POST", "http://127.0.0.1:9/p", 503))
	}
	var got []string
	cursor := ""
	for calls := 0; ; calls++ {
		if calls > 5 {
			t.Fatal("more than 5 calls for 5 requests in pages of 2")
		}
		body := `{"failureClass":"server_error","limit":2`
		if cursor != "" {
			body += `,"cursor":"` + cursor + `"`
		}
		res := b.bulk("DELETE", "/requests/payload", body+`}`, "expunged")
		if len(res.did) > 2 {
			t.Fatalf("a call with limit 2 expunged %v", res.did)
		}
		got = append(got, res.did...)
		if res.next == "" {
			break
		}
		cursor = res.next
	}
	if !slices.Equal(sorted(got...), sorted(want...)) {
		t.Errorf("expunged %v over the pages; want %v", got, want)
	}
}

func TestBulkExpungeDryRunCountsWhatTheRealCallErases(t *testing.T) {
	t.Parallel()
	b := newFilterBed(t)
	const u = "http://127.0.0.1:9/e"
	finished := []string{b.submit("acme-key", "acme", "POST", u, 200), b.submit("acme-key", "acme", "POST", u, 0)}
	pending := b.submit("acme-key", "acme", "POST", u)
	before := b.submit("acme-key", "acme", "POST", u, 503)
	if a := do(t, "DELETE", b.ts+"/requests/"+before+"/payload", "", "", bearer("acme-key")...); a.status != 200 {
		t.Fatalf("expunge: %d %s", a.status, a.raw)
	}
	dry := b.bulk("DELETE", "/requests/payload?host=127.0.0.1&dryRun=true", "", "wouldExpunge")
	real := b.bulk("DELETE", "/requests/payload?host=127.0.0.1", `{"actor":"dpo"}`, "expunged")
	if want := sorted(finished...); !slices.Equal(dry.did, want) || !slices.Equal(real.did, want) || dry.count != real.count {
		t.Errorf("dry run %v, real run %v; want %v both", dry.did, real.did, want)
	}
	if !mapsEqual(dry.skipped, real.skipped) || !strings.Contains(real.skipped[pending], "cancel it first") ||
		!strings.Contains(real.skipped[before], "expunged already") {
		t.Errorf("skipped: dry %v, real %v", dry.skipped, real.skipped)
	}
	for _, id := range finished {
		a := do(t, "GET", b.ts+"/requests/"+id, "", "", bearer("acme-key")...)
		if a.body["expunged"] != true || a.body["expungedBy"] != "dpo" {
			t.Errorf("%s after the bulk expunge: %s", id, a.raw)
		}
	}
	again := b.bulk("DELETE", "/requests/payload?host=127.0.0.1", "", "expunged")
	if len(again.did) != 0 || len(again.skipped) != 4 {
		t.Errorf("a second run expunged %v and skipped %v; want nothing expunged, all 4 skipped", again.did, again.skipped)
	}
}

func TestBulkCallsByFilterRejections(t *testing.T) {
	t.Parallel()
	b := newFilterBed(t)
	for _, tt := range []struct{ method, path, body, field, says string }{
		{"POST", "/requests/resend", "", "", "name at least one filter"},
		{"POST", "/requests/resend", `{"dryRun":true}`, "", "name at least one filter"},
		{"DELETE", "/requests/payload", `{"limit":5}`, "", "name at least one filter"},
		{"POST", "/requests/resend", `{"host":"a.com","dryRun":"maybe"}`, "dryRun", "true or false"},
		{"POST", "/requests/resend", `{"host":"a.com","ids":["x"]}`, "ids", "unknown parameter"},
		{"DELETE", "/requests/payload", `{"host":"a.com","reason":"x"}`, "reason", "unknown parameter"},
		{"POST", "/requests/resend?host=a.com", `{"host":"b.com"}`, "host", "both in the query and in the body"},
		{"POST", "/requests/resend", `{"host":"a.com","limit":1001}`, "limit", "between 1 and 1000"},
		{"POST", "/requests/resend", `{"urlContains":"x"}`, "urlContains", "add host or label"},
		{"POST", "/requests/resend", `{"host":["a.com"]}`, "host", "a string, a number or a boolean"},
		{"DELETE", "/requests/payload", `[1]`, "", "body must be a JSON object"},
	} {
		a := do(t, tt.method, b.ts+tt.path, "application/json", tt.body, bearer("acme-key")...)
		if a.status != 400 {
			t.Errorf("%s %s %s: %d %s, want 400", tt.method, tt.path, tt.body, a.status, a.raw)
			continue
		}
		if _, field := errorOf(t, a); field != tt.field || !strings.Contains(message(a), tt.says) {
			t.Errorf("%s %s %s: on %q: %q; want on %q saying %q", tt.method, tt.path, tt.body, field, message(a), tt.field, tt.says)
		}
	}
}
