package handlers_test

import (
	"strings"
	"testing"
)

// A tenant's defaults for an endpoint name credentials it has, of the
// right types; a body of other members is refused; GET shows them (empty
// when none), the list shows every endpoint's, DELETE removes them. They
// are the tenant's own.
func TestEndpointSettingsNameCredentialsTheTenantHas(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	for name, body := range map[string]string{
		"partner": `{"type":"bearer","token":"t0ken"}`,
		"egress":  `{"type":"proxy","url":"http://127.0.0.1:3128"}`,
	} {
		if a := putCredential(t, ts, "acme-key", name, body); a.status != 201 {
			t.Fatalf("PUT %s: %d %s", name, a.status, a.raw)
		}
	}
	path := ts.URL + "/endpoints/https:API.example.com:443/settings"
	put := func(key, body string) answer { return do(t, "PUT", path, "application/json", body, bearer(key)...) }
	for _, tc := range []struct {
		name, body string
		status     int
		field, why string
	}{
		{"an unknown member", `{"credential":"partner","proxies":"egress"}`, 400, "", "JSON object"},
		{"not an object", `["partner"]`, 400, "", "JSON object"},
		{"a name with a control character", `{"credential":"a\u0007b"}`, 400, "credential", "control characters"},
		{"a name too long", `{"proxy":"` + strings.Repeat("p", 129) + `"}`, 400, "proxy", "at most 128 bytes"},
		{"a credential that does not exist", `{"credential":"nope"}`, 422, "credential", "does not exist"},
		{"a proxy that does not exist", `{"credential":"partner","proxy":"nope"}`, 422, "proxy", "does not exist"},
		{"a proxy as the credential", `{"credential":"egress"}`, 422, "credential", "a proxy"},
		{"a bearer as the proxy", `{"proxy":"partner"}`, 422, "proxy", "not a proxy"},
	} {
		a := put("acme-key", tc.body)
		if _, field := errorOf(t, a); a.status != tc.status || field != tc.field || !strings.Contains(a.raw, tc.why) {
			t.Errorf("%s: %d %s, want %d naming %q and saying %q", tc.name, a.status, a.raw, tc.status, tc.field, tc.why)
		}
	}
	if a := do(t, "GET", path, "", "", bearer("acme-key")...); a.status != 200 || strings.TrimSpace(a.raw) != `{"endpoint":"https://api.example.com:443"}` {
		t.Errorf("after the refusals: %d %s, want no settings", a.status, a.raw)
	}
	if a := do(t, "PUT", ts.URL+"/endpoints/ftp:h:21/settings", "application/json", `{}`, bearer("acme-key")...); a.status != 400 {
		t.Errorf("a malformed endpoint: %d %s, want 400", a.status, a.raw)
	}

	a := put("acme-key", `{"credential":"partner","proxy":"egress"}`)
	if a.status != 200 || a.body["credential"] != "partner" || a.body["proxy"] != "egress" || a.body["endpoint"] != "https://api.example.com:443" {
		t.Fatalf("PUT: %d %s", a.status, a.raw)
	}
	if a := do(t, "GET", path, "", "", bearer("acme-key")...); a.body["credential"] != "partner" || a.body["proxy"] != "egress" {
		t.Errorf("GET: %s", a.raw)
	}
	if a := do(t, "GET", ts.URL+"/endpoints/settings", "", "", bearer("acme-key")...); a.status != 200 ||
		!strings.Contains(a.raw, `"endpoint":"https://api.example.com:443","credential":"partner"`) {
		t.Errorf("GET /endpoints/settings: %d %s", a.status, a.raw)
	}
	if a := do(t, "GET", path, "", "", bearer("beta-key")...); strings.Contains(a.raw, "partner") {
		t.Errorf("beta sees acme's settings: %s", a.raw)
	}
	if a := do(t, "GET", ts.URL+"/endpoints/settings?tenant=acme", "", "", bearer("admin-key")...); !strings.Contains(a.raw, "partner") {
		t.Errorf("an admin's ?tenant=acme: %s", a.raw)
	}
	if a := do(t, "DELETE", path, "", "", bearer("acme-key")...); a.status != 200 || a.body["credential"] != "partner" {
		t.Errorf("DELETE: %d %s, want 200 with what they were", a.status, a.raw)
	}
	if a := do(t, "GET", ts.URL+"/endpoints/settings", "", "", bearer("acme-key")...); strings.TrimSpace(a.raw) != `{"data":[]}` {
		t.Errorf("after DELETE: %s", a.raw)
	}
	// The breaker's routes beside them still answer.
	if a := do(t, "GET", ts.URL+"/endpoints", "", "", bearer("acme-key")...); a.status != 200 {
		t.Errorf("GET /endpoints: %d %s", a.status, a.raw)
	}
}

// A signing secret is made (hmac by default, shown once as whsec_…; or
// ed25519, its public key whpk_…), listed without its text, and deleted;
// a tenant holds a bounded number, and another tenant's are not its own.
func TestSigningSecretsRoundTrip(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	hmac := do(t, "POST", ts.URL+"/signing-secrets", "", "", bearer("acme-key")...)
	secret, _ := hmac.body["secret"].(string)
	id, _ := hmac.body["id"].(string)
	if hmac.status != 201 || hmac.body["type"] != "hmac" || !strings.HasPrefix(secret, "whsec_") || id == "" || hmac.body["fingerprint"] == "" {
		t.Fatalf("POST: %d %s, want 201 with an hmac whsec_ secret", hmac.status, hmac.raw)
	}
	ed := do(t, "POST", ts.URL+"/signing-secrets", "application/json", `{"type":"ed25519"}`, bearer("acme-key")...)
	pub, _ := ed.body["publicKey"].(string)
	if ed.status != 201 || ed.body["type"] != "ed25519" || !strings.HasPrefix(pub, "whpk_") {
		t.Fatalf("POST ed25519: %d %s, want 201 with a whpk_ public key", ed.status, ed.raw)
	}
	for _, body := range []string{`{"type":"rsa"}`, `{"kind":"hmac"}`, `[]`} {
		a := do(t, "POST", ts.URL+"/signing-secrets", "application/json", body, bearer("acme-key")...)
		if a.status != 400 {
			t.Errorf("POST %s: %d %s, want 400", body, a.status, a.raw)
		}
	}
	list := do(t, "GET", ts.URL+"/signing-secrets", "", "", bearer("acme-key")...)
	if list.status != 200 || strings.Contains(list.raw, secret) || strings.Count(list.raw, `"id"`) != 2 || !strings.Contains(list.raw, id) {
		t.Errorf("GET: %d %s, want both listed and no secret", list.status, list.raw)
	}
	if a := do(t, "GET", ts.URL+"/signing-secrets", "", "", bearer("beta-key")...); strings.TrimSpace(a.raw) != `{"data":[]}` {
		t.Errorf("beta's list: %s", a.raw)
	}
	if a := do(t, "DELETE", ts.URL+"/signing-secrets/"+id, "", "", bearer("beta-key")...); a.status != 404 {
		t.Errorf("beta deletes acme's: %d %s, want 404", a.status, a.raw)
	}
	if a := do(t, "DELETE", ts.URL+"/signing-secrets/"+id, "", "", bearer("acme-key")...); a.status != 200 || a.body["id"] != id || strings.Contains(a.raw, secret) {
		t.Errorf("DELETE: %d %s, want 200 with it and no secret", a.status, a.raw)
	}
	if a := do(t, "DELETE", ts.URL+"/signing-secrets/"+id, "", "", bearer("acme-key")...); a.status != 404 {
		t.Errorf("DELETE again: %d %s, want 404", a.status, a.raw)
	}
	for i := 1; i < 10; i++ {
		if a := do(t, "POST", ts.URL+"/signing-secrets", "", "", bearer("acme-key")...); a.status != 201 {
			t.Fatalf("secret %d: %d %s", i+1, a.status, a.raw)
		}
	}
	if a := do(t, "POST", ts.URL+"/signing-secrets", "", "", bearer("acme-key")...); a.status != 409 || !strings.Contains(a.raw, "at most 10") {
		t.Errorf("an 11th: %d %s, want 409", a.status, a.raw)
	}
}
