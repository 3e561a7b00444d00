package handlers_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// seedCanceled stores n canceled requests of tenant t straight through the
// store (quicker than the API), each to host.
func seedCanceled(t *testing.T, store *record.Store, tn, host string, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		now := time.Now()
		r := &record.Request{ID: ids.New(now), Tenant: tn, URL: "http://" + host + ":1/x", Host: host, Method: "POST",
			Headers: map[string]string{}, MaxRetries: 0, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000,
			Status: record.Pending, CreatedAt: now, NextAttemptAt: now.Add(time.Hour)}
		if _, err := store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Cancel(ctx, tenant.All, r.ID, "test", now); err != nil {
			t.Fatal(err)
		}
	}
}

// rateLimited is an engine with RATE_LIMIT_RPS=rps and the settings kv
// (name, value pairs) on a Redis of its own, and a store on that Redis.
func rateLimited(t *testing.T, rps int, kv ...string) (*httptest.Server, *record.Store) {
	t.Helper()
	env := map[string]string{"RATE_LIMIT_RPS": fmt.Sprint(rps)}
	for k, v := range limitsEnv {
		env[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	srv := redistest.StartServer(t, redistest.Options{})
	return engineServer(t, srv, env), record.NewStore(srv.Client(), time.Hour)
}

// RATE_LIMIT_RPS is paid once per request made, wherever it is made: five
// bulk resends of up to 1,000 make no more than the limit allows in the
// time they take, and say where they stopped; what they made is all they
// report, each request once.
func TestBulkResendsPayTheRateLimitPerRequestMade(t *testing.T) {
	t.Parallel()
	const rps, seeded = 20, 300
	ts, store := rateLimited(t, rps)
	seedCanceled(t, store, "acme", "127.0.0.1", seeded)

	start := time.Now()
	made, seen, stopped := 0, map[string]bool{}, 0
	cursor := ""
	for range 5 {
		body := `{"host":"127.0.0.1","limit":1000}`
		if cursor != "" {
			body = `{"host":"127.0.0.1","limit":1000,"cursor":"` + cursor + `"}`
		}
		a := do(t, "POST", ts.URL+"/requests/resend", "application/json", body, bearer("acme-key")...)
		switch {
		case a.status == 429 && a.header.Get("Retry-After") != "":
			stopped++
			continue // nothing made; the same cursor goes on
		case a.status != 200:
			t.Fatalf("bulk resend: %d %s", a.status, a.raw)
		}
		resent, _ := a.body["resent"].([]any)
		for _, x := range resent {
			id := x.(map[string]any)["id"].(string)
			if seen[id] {
				t.Errorf("%s resent twice", id)
			}
			seen[id] = true
		}
		made += len(resent)
		if st, _ := a.body["stopped"].(map[string]any); st != nil {
			if st["code"] != "rate_limited" || a.header.Get("Retry-After") == "" || a.body["nextCursor"] == nil {
				t.Errorf("a bulk resend stopped by the limit: %s (Retry-After %q), want stopped rate_limited, Retry-After and a cursor",
					a.raw, a.header.Get("Retry-After"))
			}
			stopped++
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	elapsed := time.Since(start)
	allowed := rps + int(float64(rps)*elapsed.Seconds()) + 1 // the burst, and what refilled meanwhile
	if made > allowed {
		t.Errorf("five bulk resends made %d requests in %v at %d a second; at most %d are allowed", made, elapsed, rps, allowed)
	}
	if made < seeded && stopped == 0 {
		t.Errorf("the resends made %d of %d and never said the limit stopped them", made, seeded)
	}
	// Every request made is one reported: the pending ones are the resends.
	page, err := store.List(context.Background(), tenant.All, record.Pending, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Requests) != made {
		t.Errorf("%d requests were made and %d reported", len(page.Requests), made)
	}
}

// A bulk call and single calls pay the same: from a full bucket of rps
// tokens, a bulk resend of 2×rps and 2×rps single resends each make about
// rps (no fewer, and no more than the refill allows meanwhile).
func TestABulkCallPaysWhatSingleCallsPay(t *testing.T) {
	t.Parallel()
	const rps = 10
	ts, store := rateLimited(t, rps)
	seedCanceled(t, store, "acme", "127.0.0.1", 2*rps)
	seedCanceled(t, store, "beta", "127.0.0.1", 2*rps)

	start := time.Now()
	a := do(t, "POST", ts.URL+"/requests/resend", "application/json", `{"host":"127.0.0.1","limit":1000}`, bearer("acme-key")...)
	if a.status != 200 {
		t.Fatalf("bulk resend: %d %s", a.status, a.raw)
	}
	bulk := len(a.body["resent"].([]any))
	bulkTook := time.Since(start)

	page, err := store.List(context.Background(), tenant.Only("beta"), record.Canceled, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	start, single := time.Now(), 0
	for _, r := range page.Requests {
		a := do(t, "POST", ts.URL+"/requests/"+r.ID+"/resend", "application/json", "", bearer("beta-key")...)
		if a.status == 429 {
			break
		}
		if a.status != 202 {
			t.Fatalf("resend: %d %s", a.status, a.raw)
		}
		single++
	}
	singleTook := time.Since(start)
	for _, c := range []struct {
		name string
		made int
		took time.Duration
	}{{"bulk", bulk, bulkTook}, {"single", single, singleTook}} {
		most := rps + int(rps*c.took.Seconds()) + 1
		if c.made < rps || c.made > most {
			t.Errorf("%s resends made %d in %v, want %d to %d", c.name, c.made, c.took, rps, most)
		}
	}
}

// Every route that submits counts in retryd_submissions_total, one per
// request it was asked to make: /v2/publish, /v2/enqueue and /v2/batch as
// POST /requests does.
func TestEverySubmittingRouteCountsItsSubmissions(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	for _, c := range []struct{ path, ctype, body string }{
		{"/requests", "application/json", `{"url":"http://127.0.0.1:1/a","delayMs":3600000}`},
		{"/v2/publish/http://127.0.0.1:1/b", "text/plain", "x"},
		{"/v2/enqueue/q1/http://127.0.0.1:1/c", "text/plain", "x"},
		{"/v2/batch", "application/json", `[{"destination":"http://127.0.0.1:1/d"},{"destination":"http://127.0.0.1:1/e"}]`},
	} {
		if a := do(t, "POST", ts.URL+c.path, c.ctype, c.body, bearer("acme-key")...); a.status/100 != 2 {
			t.Fatalf("POST %s: %d %s", c.path, a.status, a.raw)
		}
	}
	if a := do(t, "POST", ts.URL+"/v2/publish/http://127.0.0.1:1/f", "text/plain", "x",
		append(bearer("acme-key"), "Upstash-Retries", "many")...); a.status != 400 {
		t.Fatalf("a bad publish: %d %s", a.status, a.raw)
	}
	m := do(t, "GET", ts.URL+"/metrics", "", "", bearer("admin-key")...)
	for result, want := range map[string]string{"accepted": "5", "rejected": "1"} {
		line := `retryd_submissions_total{result="` + result + `"} ` + want + "\n"
		if !strings.Contains(m.raw, line) {
			t.Errorf("metrics lack %q:\n%s", line, grepLines(m.raw, "retryd_submissions_total"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A bulk redrive pays one token per request it redrives, as single
// redrives do, and says where the limit stopped it; the requests it did
// not reach are still failed, for the next call.
func TestBulkRedrivePaysTheRateLimitPerRequest(t *testing.T) {
	t.Parallel()
	const rps, seeded = 10, 40
	ts, store := rateLimited(t, rps)
	b := &dlqBundle{store: store}
	for range seeded {
		b.failed(t, 0)
	}
	start := time.Now()
	a := do(t, "POST", ts.URL+"/dlq/redrive", "application/json", `{"limit":1000}`, bearer("admin-key")...)
	took := time.Since(start)
	redriven, _ := a.body["redriven"].([]any)
	if most := rps + int(rps*took.Seconds()) + 1; a.status != 200 || len(redriven) > most {
		t.Fatalf("bulk redrive of %d at %d a second: %d, %d redriven in %v (at most %d allowed) %s", seeded, rps, a.status, len(redriven), took, most, a.raw)
	}
	if len(redriven) < seeded {
		if st, _ := a.body["stopped"].(map[string]any); st["code"] != "rate_limited" || a.header.Get("Retry-After") == "" {
			t.Errorf("a bulk redrive cut short by the limit: %s (Retry-After %q), want stopped rate_limited", a.raw, a.header.Get("Retry-After"))
		}
	}
	page, err := b.store.ListFailed(context.Background(), tenant.All, record.DLQFilter{}, "", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Requests)+len(redriven) != seeded {
		t.Errorf("%d redriven and %d still failed, of %d", len(redriven), len(page.Requests), seeded)
	}
}

// A request a bulk redrive skips (at its redrive limit) was not made and
// pays nothing: a DLQ full of such entries does not spend the caller's
// budget before the ones that can go.
func TestBulkRedrivePaysNothingForWhatItSkips(t *testing.T) {
	t.Parallel()
	const rps = 5
	ts, store := rateLimited(t, rps, "REDRIVE_LIMIT", "1")
	b := &dlqBundle{store: store}
	var fresh []string
	for i := range 36 {
		if i%9 == 4 {
			fresh = append(fresh, b.failed(t, 0))
		} else {
			b.failed(t, 1) // at the redrive limit
		}
	}
	a := do(t, "POST", ts.URL+"/dlq/redrive", "application/json", `{"limit":1000}`, bearer("admin-key")...)
	redriven, _ := a.body["redriven"].([]any)
	skipped, _ := a.body["skipped"].([]any)
	if a.status != 200 || len(redriven) != len(fresh) || len(skipped) != 36-len(fresh) || a.body["stopped"] != nil {
		t.Fatalf("bulk redrive of %d redrivable among 36: %d %s, want all %d redriven, the rest skipped, not stopped",
			len(fresh), a.status, a.raw, len(fresh))
	}
}
