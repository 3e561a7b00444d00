package handlers_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/testca"
)

// credentialsEnv is limitsEnv (tenants acme and beta, an admin) with a
// key to seal credentials under.
func credentialsEnv() map[string]string {
	env := map[string]string{"SECRETS_KEYS": base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))}
	for k, v := range limitsEnv {
		env[k] = v
	}
	return env
}

// credentialsServer is the whole API on a Redis of its own, with
// SECRETS_KEYS.
func credentialsServer(t *testing.T) (*httptest.Server, *redistest.Server) {
	t.Helper()
	srv := redistest.StartServer(t, redistest.Options{})
	return engineServer(t, srv, credentialsEnv()), srv
}

func putCredential(t *testing.T, ts *httptest.Server, key, name, body string) answer {
	t.Helper()
	return do(t, "PUT", ts.URL+"/credentials/"+name, "application/json", body, bearer(key)...)
}

// certPEM makes a self-signed certificate valid from notBefore to
// notAfter, and its key.
func certPEM(t *testing.T, notBefore, notAfter time.Time) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "partner client"},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every credential the rules refuse is refused with the member at fault
// named, and nothing of it is stored.
func TestCredentialRefusalsNameTheFieldAndStoreNothing(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	good, err := testca.Issue("client.example")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testca.Issue("other.example")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	expiredCert, expiredKey := certPEM(t, now.Add(-48*time.Hour), now.Add(-time.Hour))
	oauth := func(tokenURL string) map[string]any {
		return map[string]any{"type": "oauth2_client_credentials", "tokenUrl": tokenURL, "clientId": "id", "clientSecret": "s3cret"}
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
		field  string
		why    string
	}{
		{"not JSON", `{"type":`, 400, "", "JSON object"},
		{"no type", `{"token":"t"}`, 400, "type", "must be one of"},
		{"an unknown type", `{"type":"kerberos"}`, 400, "type", "kerberos"},
		{"a missing member", `{"type":"basic","username":"u"}`, 400, "password", "is required"},
		{"an extra member", `{"type":"bearer","token":"t","password":"p"}`, 400, "password", "not a member of a bearer credential"},
		{"a member of the wrong JSON type", `{"type":"bearer","token":7}`, 400, "token", "must be a string"},
		{"a PEM that does not parse", jsonBody(t, map[string]any{"type": "mtls", "certificate": "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "privateKey": string(good.Key)}), 400, "certificate", "PEM"},
		{"a key that is not PEM", jsonBody(t, map[string]any{"type": "mtls", "certificate": string(good.Cert), "privateKey": "hunter2"}), 400, "privateKey", "PEM private key"},
		{"a key not matching the certificate", jsonBody(t, map[string]any{"type": "mtls", "certificate": string(good.Cert), "privateKey": string(other.Key)}), 400, "privateKey", "does not match"},
		{"an expired certificate", jsonBody(t, map[string]any{"type": "mtls", "certificate": expiredCert, "privateKey": expiredKey}), 400, "certificate", "expired"},
		{"an expired client certificate", jsonBody(t, map[string]any{"type": "bearer", "token": "t", "clientCertificate": map[string]any{"certificate": expiredCert, "privateKey": expiredKey}}), 400, "clientCertificate.certificate", "expired"},
		{"a token URL that is not http(s)", jsonBody(t, oauth("ftp://auth.example/token")), 400, "tokenUrl", ""},
		{"a token URL the rules refuse", jsonBody(t, oauth("http://169.254.169.254/token")), 422, "tokenUrl", "destination rules"},
		{"a proxy the rules refuse", `{"type":"proxy","url":"http://169.254.169.254:3128"}`, 422, "url", "destination rules"},
		{"a proxy with user:password in its URL", `{"type":"proxy","url":"http://u:p@proxy.example:3128"}`, 400, "url", "give username and password separately"},
		{"a header retryd sets", `{"type":"headers","headers":{"Webhook-Signature":"x"}}`, 400, "headers", "Webhook-Signature"},
		{"a control character", `{"type":"basic","username":"u\u0001","password":"p"}`, 400, "username", "control characters"},
	} {
		a := putCredential(t, ts, "acme-key", "partner", tc.body)
		code, field := errorOf(t, a)
		msg, _ := a.body["error"].(map[string]any)["message"].(string)
		if a.status != tc.status || field != tc.field || !strings.Contains(msg, tc.why) {
			t.Errorf("%s: %d %s %q %q, want %d naming %q and saying %q", tc.name, a.status, code, field, msg, tc.status, tc.field, tc.why)
		}
		if tc.status == 422 && code != "blocked_destination" {
			t.Errorf("%s: code %s, want blocked_destination", tc.name, code)
		}
		if got := do(t, "GET", ts.URL+"/credentials/partner", "", "", bearer("acme-key")...); got.status != 404 {
			t.Fatalf("after %s: GET %d %s, want 404: it was stored", tc.name, got.status, got.raw)
		}
	}
	if a := do(t, "GET", ts.URL+"/credentials", "", "", bearer("acme-key")...); strings.TrimSpace(a.raw) != `{"data":[]}` {
		t.Errorf("after the refusals: %s, want no credential", a.raw)
	}
}

// A credential's name goes through the one validator of credential
// names: too long or with a control character is 400 naming "name".
func TestCredentialNamesAreValidated(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	for _, tc := range []struct{ name, path, why string }{
		{"too long", strings.Repeat("n", 129), "at most 128 bytes"},
		{"a newline", "a%0Ab", "control characters"},
		{"a NUL", "a%00b", "control characters"},
	} {
		for _, method := range []string{"PUT", "GET", "DELETE"} {
			a := do(t, method, ts.URL+"/credentials/"+tc.path, "application/json", `{"type":"bearer","token":"t"}`, bearer("acme-key")...)
			code, field := errorOf(t, a)
			if a.status != 400 || code != "invalid_request" || field != "name" || !strings.Contains(a.raw, tc.why) {
				t.Errorf("%s %s: %d %.300s, want 400 naming name and saying %q", method, tc.name, a.status, a.raw, tc.why)
			}
		}
	}
	if a := do(t, "GET", ts.URL+"/credentials", "", "", bearer("acme-key")...); strings.TrimSpace(a.raw) != `{"data":[]}` {
		t.Errorf("after the refusals: %s, want no credential", a.raw)
	}
}

// Without SECRETS_KEYS nothing secret can be stored: 501 saying which
// variable to set, and nothing is.
func TestCredentialsWithoutSecretsKeysAre501(t *testing.T) {
	t.Parallel()
	ts := engineServer(t, redistest.StartServer(t, redistest.Options{}), limitsEnv)
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/credentials/partner", `{"type":"bearer","token":"t0ken"}`},
		{"POST", "/signing-secrets", ``},
		{"POST", "/credentials/rekey", ``},
	} {
		key := "acme-key"
		if strings.HasSuffix(c.path, "rekey") {
			key = "admin-key"
		}
		a := do(t, c.method, ts.URL+c.path, "application/json", c.body, bearer(key)...)
		if code, _ := errorOf(t, a); a.status != 501 || code != "not_implemented" || !strings.Contains(a.raw, "SECRETS_KEYS") {
			t.Errorf("%s %s: %d %s, want 501 naming SECRETS_KEYS", c.method, c.path, a.status, a.raw)
		}
	}
	for _, path := range []string{"/credentials", "/signing-secrets"} {
		if a := do(t, "GET", ts.URL+path, "", "", bearer("acme-key")...); a.status != 200 || strings.TrimSpace(a.raw) != `{"data":[]}` {
			t.Errorf("GET %s: %d %s, want nothing stored", path, a.status, a.raw)
		}
	}
}

// Every type is stored (201, then 200 when replaced) and shown, and no
// answer, nor any value in Redis, holds one of its secrets.
func TestCredentialsNeverShowASecret(t *testing.T) {
	t.Parallel()
	ts, srv := credentialsServer(t)
	client, err := testca.Issue("client.example")
	if err != nil {
		t.Fatal(err)
	}
	// The private key is looked for by a line of its base64, which JSON
	// does not escape.
	keyLine := strings.Split(string(client.Key), "\n")[1]
	secrets := []string{"cl1ent-s3cret", "passw0rd-basic", "bearer-t0ken", "api-key-v4lue", "proxy-passw0rd", "the-new-t0ken", keyLine}
	bodies := map[string]any{
		"oauth": map[string]any{"type": "oauth2_client_credentials", "tokenUrl": "https://auth.example/token", "clientId": "retryd",
			"clientSecret": secrets[0], "scopes": []string{"orders:write"}, "authStyle": "body"},
		"basic":   map[string]any{"type": "basic", "username": "retryd", "password": secrets[1]},
		"bearer":  map[string]any{"type": "bearer", "token": secrets[2], "clientCertificate": map[string]any{"certificate": string(client.Cert), "privateKey": string(client.Key)}},
		"headers": map[string]any{"type": "headers", "headers": map[string]string{"X-Api-Key": secrets[3]}},
		"mtls":    map[string]any{"type": "mtls", "certificate": string(client.Cert), "privateKey": string(client.Key), "caCertificates": string(client.CA)},
		"egress":  map[string]any{"type": "proxy", "url": "http://proxy.example:3128", "username": "retryd", "password": secrets[4]},
	}
	var answers []answer
	for name, body := range bodies {
		a := putCredential(t, ts, "acme-key", name, jsonBody(t, body))
		if a.status != 201 || a.body["name"] != name || a.body["tenant"] != "acme" {
			t.Fatalf("PUT %s: %d %s, want 201 with its name and tenant", name, a.status, a.raw)
		}
		answers = append(answers, a)
	}
	replaced := putCredential(t, ts, "acme-key", "bearer", jsonBody(t, map[string]any{"type": "bearer", "token": secrets[5]}))
	if replaced.status != 200 || replaced.body["type"] != "bearer" || replaced.body["certificate"] != nil {
		t.Errorf("replace: %d %s, want 200", replaced.status, replaced.raw)
	}
	answers = append(answers, replaced)
	mtls := do(t, "GET", ts.URL+"/credentials/mtls", "", "", bearer("acme-key")...)
	cert, _ := mtls.body["certificate"].(map[string]any)
	if mtls.status != 200 || cert["subject"] != "CN=client.example" || cert["fingerprint"] == "" || cert["notAfter"] == "" {
		t.Errorf("GET mtls: %d %s, want the certificate's subject, notAfter and fingerprint", mtls.status, mtls.raw)
	}
	oauth := do(t, "GET", ts.URL+"/credentials/oauth", "", "", bearer("acme-key")...)
	if oauth.body["tokenUrl"] != "https://auth.example/token" || oauth.body["clientId"] != "retryd" || oauth.body["authStyle"] != "body" {
		t.Errorf("GET oauth: %s, want its tokenUrl, clientId and authStyle", oauth.raw)
	}
	answers = append(answers, mtls, oauth, do(t, "GET", ts.URL+"/credentials", "", "", bearer("acme-key")...))
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(answers[len(answers)-1].raw), &list); err != nil || len(list.Data) != len(bodies) {
		t.Errorf("GET /credentials: %v, %d listed, want %d", err, len(list.Data), len(bodies))
	}
	for name := range bodies {
		answers = append(answers, do(t, "GET", ts.URL+"/credentials/"+name, "", "", bearer("acme-key")...))
	}
	answers = append(answers, do(t, "DELETE", ts.URL+"/credentials/headers", "", "", bearer("acme-key")...))
	for _, a := range answers {
		for _, s := range secrets {
			if strings.Contains(a.raw, s) {
				t.Errorf("an answer shows the secret %.20q: %.300s", s, a.raw)
			}
		}
	}
	ctx := context.Background()
	rdb := srv.Client()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var vals []string
		switch rdb.Type(ctx, k).Val() {
		case "hash":
			for _, v := range rdb.HGetAll(ctx, k).Val() {
				vals = append(vals, v)
			}
		case "string":
			vals = append(vals, rdb.Get(ctx, k).Val())
		}
		for _, v := range vals {
			for _, s := range secrets {
				if strings.Contains(v, s) {
					t.Errorf("Redis key %s holds the secret %.20q in clear", k, s)
				}
			}
		}
	}
}

// A tenant's credentials are its own: another tenant neither reads nor
// deletes them, and an admin reaches them with ?tenant=.
func TestCredentialsOfOneTenantAreApartFromAnothers(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	if a := putCredential(t, ts, "acme-key", "partner", `{"type":"bearer","token":"acme-t0ken"}`); a.status != 201 {
		t.Fatalf("PUT: %d %s", a.status, a.raw)
	}
	for _, method := range []string{"GET", "DELETE"} {
		if a := do(t, method, ts.URL+"/credentials/partner", "", "", bearer("beta-key")...); a.status != 404 {
			t.Errorf("beta %s acme's credential: %d %s, want 404", method, a.status, a.raw)
		}
		if a := do(t, method, ts.URL+"/credentials/partner?tenant=acme", "", "", bearer("beta-key")...); a.status != 403 {
			t.Errorf("beta %s ?tenant=acme: %d %s, want 403", method, a.status, a.raw)
		}
	}
	if a := do(t, "GET", ts.URL+"/credentials", "", "", bearer("beta-key")...); strings.TrimSpace(a.raw) != `{"data":[]}` {
		t.Errorf("beta's list: %s, want empty", a.raw)
	}
	if a := do(t, "GET", ts.URL+"/credentials/partner", "", "", bearer("admin-key")...); a.status != 404 {
		t.Errorf("admin without ?tenant= (the default tenant's): %d %s, want 404", a.status, a.raw)
	}
	if a := do(t, "GET", ts.URL+"/credentials/partner?tenant=acme", "", "", bearer("admin-key")...); a.status != 200 || a.body["tenant"] != "acme" {
		t.Errorf("admin ?tenant=acme: %d %s, want acme's credential", a.status, a.raw)
	}
	if a := do(t, "DELETE", ts.URL+"/credentials/partner", "", "", bearer("acme-key")...); a.status != 200 || a.body["name"] != "partner" {
		t.Errorf("acme deletes its own: %d %s, want 200 with what it was", a.status, a.raw)
	}
	if a := do(t, "DELETE", ts.URL+"/credentials/partner", "", "", bearer("acme-key")...); a.status != 404 {
		t.Errorf("delete again: %d %s, want 404", a.status, a.raw)
	}
}

// Rekey is an admin's: a tenant's key is refused; an admin's reseals
// what the first key did not seal (here nothing).
func TestCredentialRekeyIsAnAdmins(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	if a := putCredential(t, ts, "acme-key", "partner", `{"type":"bearer","token":"t0ken"}`); a.status != 201 {
		t.Fatalf("PUT: %d %s", a.status, a.raw)
	}
	if a := do(t, "POST", ts.URL+"/credentials/rekey", "", "", bearer("acme-key")...); a.status != 403 {
		t.Errorf("a tenant's rekey: %d %s, want 403", a.status, a.raw)
	}
	if a := do(t, "POST", ts.URL+"/credentials/rekey", "", "", bearer("admin-key")...); a.status != 200 || strings.TrimSpace(a.raw) != `{"resealed":0}` {
		t.Errorf("an admin's rekey: %d %s, want {\"resealed\":0}", a.status, a.raw)
	}
}
