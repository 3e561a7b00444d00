package handlers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/retryd/retryd/internal/redistest"
)

// Every endpoint a caller names, to open or to close, goes through one
// validator: each malformed one is 400 naming the field and why, and
// nothing is stored of it.
func TestEndpointNamesAreValidatedOnEveryRoute(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	for _, tc := range []struct{ name, path, why string }{
		{"600 KB host", "http:" + strings.Repeat("a", 600_000) + ":80", "at most 300 bytes"},
		{"NUL", "http:a%00b:80", "control characters"},
		{"unit separator", "http:a%1Fb:80", "control characters"},
		{"newline", "http:a%0Ab:80", "control characters"},
		{"spaces", "http:x%20(tenant%20alice)%20open:80", "must not hold spaces"},
		{"port -1", "http:h:-1", "port from 1 to 65535"},
		{"port 0", "http:h:0", "port from 1 to 65535"},
		{"port 99999", "http:h:99999", "port from 1 to 65535"},
		{"port 1e3", "http:h:1e3", "port from 1 to 65535"},
		{"no port", "http:h", "host:port"},
		{"scheme", "ftp:h:21", "http or https"},
		{"host", "http:a..b:80", "invalid host"},
	} {
		for _, action := range []string{"open", "close"} {
			a := do(t, "POST", ts.URL+"/endpoints/"+tc.path+"/"+action, "", "", bearer("acme-key")...)
			if a.status != 400 {
				t.Errorf("%s of %s: %d %.200s, want 400", action, tc.name, a.status, a.raw)
				continue
			}
			code, field := errorOf(t, a)
			msg, _ := a.body["error"].(map[string]any)["message"].(string)
			if code != "invalid_request" || field != "endpoint" || !strings.Contains(msg, tc.why) || len(a.raw) > 1000 {
				t.Errorf("%s of %s: %.300s, want invalid_request naming endpoint and saying %q, short", action, tc.name, a.raw, tc.why)
			}
		}
	}
	if a := do(t, "GET", ts.URL+"/endpoints", "", "", bearer("admin-key")...); a.status != 200 || strings.TrimSpace(a.raw) != `{"data":[]}` {
		t.Errorf("after the refused opens: %d %.300s, want no endpoint", a.status, a.raw)
	}
	// Well formed: kept in lower case.
	for _, path := range []string{"https:API.example.com:443"} {
		a := do(t, "POST", ts.URL+"/endpoints/"+path+"/open", "", "", bearer("acme-key")...)
		if a.status != 200 || a.body["endpoint"] != "https://api.example.com:443" {
			t.Errorf("open %s: %d %s, want https://api.example.com:443 open", path, a.status, a.raw)
		}
		// An endpoint opened by hand is never probed: it shows no probe
		// time.
		if v, ok := a.body["nextProbeAt"]; !ok || v != nil {
			t.Errorf("an endpoint opened by hand shows nextProbeAt %v, want null", v)
		}
	}
}

// A tenant has at most ENDPOINT_LIMIT endpoints opened by hand: one more
// is 409 naming the limit; opening one it has again is not one more;
// another tenant's are its own count; closing one makes room.
func TestEndpointsOpenedByHandHaveAPerTenantLimit(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ENDPOINT_LIMIT": "3"}
	for k, v := range limitsEnv {
		env[k] = v
	}
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), env)
	act := func(key, action string, i int) answer {
		return do(t, "POST", ts.URL+fmt.Sprintf("/endpoints/https:h%d.example.com:443/%s", i, action), "", "", bearer(key)...)
	}
	for i := range 3 {
		if a := act("acme-key", "open", i); a.status != 200 {
			t.Fatalf("open %d of 3: %d %s", i, a.status, a.raw)
		}
	}
	if a := act("acme-key", "open", 0); a.status != 200 {
		t.Errorf("opening again an endpoint acme opened, at its limit: %d %s", a.status, a.raw)
	}
	a := act("acme-key", "open", 3)
	if code, field := errorOf(t, a); a.status != 409 || code != "conflict" || field != "endpoint" ||
		!strings.Contains(a.raw, "ENDPOINT_LIMIT") || !strings.Contains(a.raw, "3 endpoints opened by hand") {
		t.Errorf("open past the limit: %d %s, want 409 naming ENDPOINT_LIMIT and 3 endpoints", a.status, a.raw)
	}
	if a := do(t, "GET", ts.URL+"/endpoints", "", "", bearer("acme-key")...); strings.Contains(a.raw, "h3.example.com") {
		t.Errorf("the refused endpoint is listed: %s", a.raw)
	}
	if a := act("beta-key", "open", 3); a.status != 200 {
		t.Errorf("another tenant's open: %d %s", a.status, a.raw)
	}
	if a := act("acme-key", "close", 1); a.status != 200 {
		t.Fatalf("close: %d %s", a.status, a.raw)
	}
	if a := act("acme-key", "open", 3); a.status != 200 {
		t.Errorf("open after closing one: %d %s, want 200", a.status, a.raw)
	}
}
