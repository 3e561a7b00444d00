package handlers_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// retentionServer is an API with an admin key and the keys of tenants
// acme and beta, over a store keeping records 30 days and payloads as
// long.
func retentionServer(t *testing.T) (*httptest.Server, *record.Store) {
	t.Helper()
	store := record.NewStore(redistest.Start(t).Client(), 30*24*time.Hour)
	api := &handlers.API{Store: store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	keys := []handlers.Key{{Secret: "admin-key", Tenant: tenant.Default, Admin: true}, {Secret: "acme-key", Tenant: "acme"},
		{Secret: "beta-key", Tenant: "beta"}}
	tenants := &handlers.Tenants{Store: store, Keys: keys, API: api}
	ts := httptest.NewServer(app.NewEngine(api, app.Access{Keys: keys}, api.Log, &handlers.Retention{Store: store, Tenants: tenants, API: api}, tenants))
	t.Cleanup(ts.Close)
	return ts, store
}

func asKey(key string) []string { return []string{"Authorization", "Bearer " + key} }

// An admin sets a tenant's retention and payload retention; the tenant
// reads its own (not another's) and cannot change it; DELETE gives it the
// defaults again.
func TestAnAdminSetsATenantsRetention(t *testing.T) {
	t.Parallel()
	ts, store := retentionServer(t)
	url := ts.URL + "/tenants/acme/retention"
	want := func(a answer, doc string) {
		t.Helper()
		var w, got map[string]any
		if err := json.Unmarshal([]byte(doc), &w); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(a.raw), &got)
		if a.status != http.StatusOK || !jsonEqual(w, got) {
			t.Errorf("answer %d %s, want 200 %s", a.status, a.raw, doc)
		}
	}
	want(do(t, "GET", url, "", "", asKey("admin-key")...),
		`{"tenant":"acme","retention":"30d","payloadRetention":null,"set":{"retention":null,"payloadRetention":null}}`)
	want(do(t, "PUT", url, "application/json", `{"retention":"7d","payloadRetention":"36h"}`, asKey("admin-key")...),
		`{"tenant":"acme","retention":"7d","payloadRetention":"36h0m0s","set":{"retention":"7d","payloadRetention":"36h0m0s"}}`)
	want(do(t, "GET", url, "", "", asKey("acme-key")...),
		`{"tenant":"acme","retention":"7d","payloadRetention":"36h0m0s","set":{"retention":"7d","payloadRetention":"36h0m0s"}}`)
	if got, err := store.TenantRetention(t.Context(), "acme"); err != nil || got != (record.Retention{Records: 7 * 24 * time.Hour, Payload: 36 * time.Hour}) {
		t.Errorf("stored %+v, %v", got, err)
	}
	// Only the payload retention: the records keep the default.
	want(do(t, "PUT", url, "application/json", `{"payloadRetention":"1d"}`, asKey("admin-key")...),
		`{"tenant":"acme","retention":"30d","payloadRetention":"1d","set":{"retention":null,"payloadRetention":"1d"}}`)
	want(do(t, "DELETE", url, "", "", asKey("admin-key")...),
		`{"tenant":"acme","retention":"30d","payloadRetention":null,"set":{"retention":null,"payloadRetention":null}}`)

	for _, c := range []struct{ method, url, key, body, field, msg string }{
		{"PUT", url, "acme-key", `{"retention":"1d"}`, "", "this needs an admin key (ADMIN_KEYS)"},
		{"DELETE", url, "acme-key", "", "", "this needs an admin key (ADMIN_KEYS)"},
		{"GET", ts.URL + "/tenants/beta/retention", "acme-key", "", "tenant", "this API key sees its own tenant only"},
	} {
		a := do(t, c.method, c.url, "application/json", c.body, asKey(c.key)...)
		code, field := errorOf(t, a)
		if a.status != http.StatusForbidden || code != "forbidden" || field != c.field || !strings.Contains(a.raw, c.msg) {
			t.Errorf("%s %s by %s: %d %s, want 403 naming %q", c.method, c.url, c.key, a.status, a.raw, c.msg)
		}
	}
	if got, _ := store.TenantRetention(t.Context(), "acme"); got != (record.Retention{}) {
		t.Errorf("a refused change was stored: %+v", got)
	}
}

// Every bad retention is refused with 400 naming the field and the
// remedy, and nothing is stored.
func TestTenantRetentionRejections(t *testing.T) {
	t.Parallel()
	ts, store := retentionServer(t)
	url := ts.URL + "/tenants/acme/retention"
	for _, c := range []struct{ name, url, body, field, msg string }{
		{"not a duration", url, `{"retention":"soon"}`, "retention", `retention must be a duration from 1m to 3650d such as 30d or 720h, or null for the default, got "soon"`},
		{"under a minute", url, `{"payloadRetention":"30s"}`, "payloadRetention", `payloadRetention must be a duration from 1m to 3650d`},
		{"over ten years", url, `{"retention":"3651d"}`, "retention", `got "3651d"`},
		{"negative", url, `{"retention":"-1d"}`, "retention", `got "-1d"`},
		{"a number", url, `{"retention":30}`, "", `body must be a JSON object like {"retention": "30d", "payloadRetention": "7d"}`},
		{"an unknown field", url, `{"retention":"7d","ttl":"1d"}`, "", `body must be a JSON object`},
		{"no body", url, ``, "", `body must be a JSON object`},
		{"payload outlives its records", url, `{"retention":"7d","payloadRetention":"8d"}`, "payloadRetention",
			"payloadRetention 8d is longer than the tenant's retention (7d): a payload cannot outlive its record; shorten payloadRetention or lengthen retention"},
		{"payload outlives the default retention", url, `{"payloadRetention":"31d"}`, "payloadRetention",
			"payloadRetention 31d is longer than RETENTION, the default the tenant has (30d)"},
		{"not a tenant name", ts.URL + "/tenants/Acme!/retention", `{"retention":"7d"}`, "tenant", "tenant must be 1 to 64 of a-z, 0-9, _ and -"},
	} {
		a := do(t, "PUT", c.url, "application/json", c.body, asKey("admin-key")...)
		code, field := errorOf(t, a)
		msg, _ := a.body["error"].(map[string]any)["message"].(string)
		if a.status != http.StatusBadRequest || code != "invalid_request" || field != c.field || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s, want 400 field %q saying %q", c.name, a.status, a.raw, c.field, c.msg)
		}
	}
	if got, _ := store.TenantRetention(t.Context(), "acme"); got != (record.Retention{}) {
		t.Errorf("a refused retention was stored: %+v", got)
	}
}

func jsonEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// A tenant exists when an API key names it or it has stored a request:
// the retention of any other is 404 naming it (nothing is stored), and
// GET /tenants (an admin's) lists those that exist.
func TestRetentionOfAnUnknownTenantIs404AndTenantsListsThem(t *testing.T) {
	t.Parallel()
	ts, store := retentionServer(t)
	for _, c := range []struct{ method, body string }{{"PUT", `{"retention":"7d"}`}, {"GET", ""}} {
		a := do(t, c.method, ts.URL+"/tenants/nosuch/retention", "application/json", c.body, asKey("admin-key")...)
		if code, field := errorOf(t, a); a.status != http.StatusNotFound || code != "not_found" || field != "tenant" ||
			!strings.Contains(a.raw, `no tenant \"nosuch\"`) {
			t.Errorf("%s the retention of an unknown tenant: %d %s, want 404 naming it", c.method, a.status, a.raw)
		}
	}
	if set, err := store.TenantRetention(t.Context(), "nosuch"); err != nil || set != (record.Retention{}) {
		t.Errorf("the refused PUT stored %+v %v", set, err)
	}
	// A tenant with no key here that stored a request exists.
	now := time.Now()
	r := &record.Request{ID: "01m8mg842n8nbsaee7cq", Tenant: "gamma", URL: "https://e.com/x", Host: "e.com", Method: "POST",
		Headers: map[string]string{}, Status: record.Pending, CreatedAt: now, NextAttemptAt: now}
	if _, err := store.Create(t.Context(), r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if a := do(t, "PUT", ts.URL+"/tenants/gamma/retention", "application/json", `{"retention":"7d"}`, asKey("admin-key")...); a.status != 200 {
		t.Errorf("PUT the retention of a tenant with requests: %d %s", a.status, a.raw)
	}
	a := do(t, "GET", ts.URL+"/tenants", "", "", asKey("admin-key")...)
	var got struct {
		Tenants []handlers.TenantInfo `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(a.raw), &got); err != nil || a.status != 200 {
		t.Fatalf("GET /tenants: %d %s", a.status, a.raw)
	}
	want := []handlers.TenantInfo{{Tenant: "acme", Keys: 1}, {Tenant: "beta", Keys: 1}, {Tenant: "default", Keys: 1}, {Tenant: "gamma"}}
	if len(got.Tenants) != len(want) {
		t.Fatalf("GET /tenants: %s, want %v", a.raw, want)
	}
	for i := range want {
		if got.Tenants[i] != want[i] {
			t.Errorf("GET /tenants: %s, want %v", a.raw, want)
			break
		}
	}
	if a := do(t, "GET", ts.URL+"/tenants", "", "", asKey("acme-key")...); a.status != http.StatusForbidden {
		t.Errorf("GET /tenants with a tenant's key: %d %s, want 403", a.status, a.raw)
	}
}
