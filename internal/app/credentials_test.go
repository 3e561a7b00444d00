package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/sign"
)

// put stores credential name (tenant of k1) and fails the test unless it
// was created.
func (s *credStack) put(t *testing.T, name, body string) {
	t.Helper()
	if code, out := s.call(t, "k1", "PUT", "/credentials/"+name, body); code != http.StatusCreated {
		t.Fatalf("PUT /credentials/%s: %d %s", name, code, out)
	}
}

// settle waits until request id is finished and returns its document.
func (s *credStack) settle(t *testing.T, id string) map[string]any {
	t.Helper()
	var doc map[string]any
	eventually(t, 30*time.Second, "request "+id+" finished", func() bool {
		doc = s.request(t, "k1", id)
		st := doc["status"]
		return st == "completed" || st == "failed"
	})
	return doc
}

// firstAttempt is a request document's first attempt.
func firstAttempt(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	atts, _ := doc["attempts"].([]any)
	if len(atts) == 0 {
		t.Fatalf("no attempts in %v", doc)
	}
	return atts[0].(map[string]any)
}

func jsonString(v string) string { b, _ := json.Marshal(v); return string(b) }

// Each credential type reaches a destination that wants it, the attempt
// names what it used, and afterwards no secret is anywhere in Redis in
// clear: not the credentials', the tokens', the proxy's or a signing
// secret's.
func TestEveryCredentialTypeDeliversAndNoSecretIsInRedis(t *testing.T) {
	t.Parallel()
	ts := startTokenServer(t)
	d := startGuardedDest(t, ts)
	m := startMTLSDest(t)
	p := startConnectProxy(t, "egress", proxyPass)
	s := startCredStack(t, nil)

	s.put(t, "partner-oauth", `{"type":"oauth2_client_credentials","tokenUrl":"`+ts.URL+`","clientId":"client-1","clientSecret":"`+clientSecret+`","scopes":["deliveries:write"]}`)
	s.put(t, "partner-basic", `{"type":"basic","username":"retryd","password":"`+basicPass+`"}`)
	s.put(t, "partner-bearer", `{"type":"bearer","token":"`+bearerTok+`"}`)
	s.put(t, "partner-headers", `{"type":"headers","headers":{"X-Api-Key":"`+headerKey+`"}}`)
	s.put(t, "bank", `{"type":"mtls","certificate":`+jsonString(string(m.client.Cert))+`,"privateKey":`+jsonString(string(m.client.Key))+
		`,"caCertificates":`+jsonString(string(m.serverCA))+`}`)
	s.put(t, "fixed-ip", `{"type":"proxy","url":"`+p.URL+`","username":"egress","password":"`+proxyPass+`"}`)
	code, out := s.call(t, "k1", "POST", "/signing-secrets", `{}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /signing-secrets: %d %s", code, out)
	}
	whsec := jsonField(t, out, "secret")

	cases := []struct{ name, url, extra, credential, proxy string }{
		{"oauth2", d.URL + "/oauth", `,"credential":"partner-oauth"`, "partner-oauth", ""},
		{"basic", d.URL + "/basic", `,"credential":"partner-basic"`, "partner-basic", ""},
		{"bearer", d.URL + "/bearer", `,"credential":"partner-bearer"`, "partner-bearer", ""},
		{"headers", d.URL + "/headers", `,"credential":"partner-headers"`, "partner-headers", ""},
		{"mtls", m.URL + "/hook", `,"credential":"bank"`, "bank", ""},
		{"proxy", d.URL + "/open", `,"proxy":"fixed-ip"`, "", "fixed-ip"},
		{"bearer through a proxy", d.URL + "/bearer", `,"credential":"partner-bearer","proxy":"fixed-ip"`, "partner-bearer", "fixed-ip"},
	}
	for _, c := range cases {
		code, out := s.call(t, "k1", "POST", "/requests", `{"url":"`+c.url+`","body":"{}"`+c.extra+`}`)
		if code != http.StatusAccepted {
			t.Fatalf("%s: submit: %d %s", c.name, code, out)
		}
		id := jsonField(t, out, "id")
		doc := s.settle(t, id)
		a := firstAttempt(t, doc)
		if doc["status"] != "completed" || a["called"] != true {
			t.Errorf("%s: %v after %v; want completed on its first attempt", c.name, doc["status"], doc["attempts"])
		}
		if got, _ := a["credential"].(string); got != c.credential {
			t.Errorf("%s: attempt credential %q, want %q", c.name, got, c.credential)
		}
		if got, _ := a["proxy"].(string); got != c.proxy {
			t.Errorf("%s: attempt proxy %q, want %q", c.name, got, c.proxy)
		}
		if c.url != m.URL+"/hook" {
			hs := d.headersOf(id)
			if len(hs) != 1 {
				t.Fatalf("%s: the destination saw %d calls, want 1", c.name, len(hs))
			}
			if err := sign.Verify(hs[0], []byte("{}"), []string{whsec}, time.Now(), time.Minute); err != nil {
				t.Errorf("%s: the tenant's own signing secret does not verify the delivery: %v", c.name, err)
			}
		}
	}
	u, _ := url.Parse(d.URL)
	if got := p.connects(); len(got) != 2 || got[0] != u.Host {
		t.Errorf("the proxy was asked to CONNECT to %v; want twice %s (the checked address)", got, u.Host)
	}
	if n := d.refused.Load(); n != 0 {
		t.Errorf("the destination refused %d calls", n)
	}
	for _, name := range []string{"partner-oauth", "bank", "fixed-ip"} {
		if code, out := s.call(t, "k1", "GET", "/credentials/"+name, ""); code != http.StatusOK || strings.Contains(out, `"lastUsedAt":null`) {
			t.Errorf("GET /credentials/%s after a delivery: %d %s; want lastUsedAt set", name, code, out)
		}
	}

	secrets := []string{clientSecret, basicPass, bearerTok, headerKey, proxyPass, whsec, strings.TrimPrefix(whsec, "whsec_")}
	secrets = append(secrets, ts.tokens()...)
	secrets = append(secrets, keyBody(string(m.client.Key)))
	for _, v := range allValues(t, s.rdb) {
		for _, sec := range secrets {
			if sec != "" && strings.Contains(v, sec) {
				t.Errorf("Redis holds a secret in clear: %.40q… in %.80q", sec, v)
			}
		}
	}
}

// keyBody is the middle of a PEM key's base64: what a key in clear holds.
func keyBody(pem string) string {
	lines := strings.Split(strings.TrimSpace(pem), "\n")
	return lines[len(lines)/2]
}

// Ten requests to a destination behind OAuth2, delivered by two workers,
// ask the token endpoint once.
func TestTwoWorkersShareOneOAuth2Token(t *testing.T) {
	t.Parallel()
	ts := startTokenServer(t)
	d := startGuardedDest(t, ts)
	s := startCredStack(t, nil)
	s.put(t, "partner", `{"type":"oauth2_client_credentials","tokenUrl":"`+ts.URL+`","clientId":"client-1","clientSecret":"`+clientSecret+`","authStyle":"body"}`)
	var ids []string
	for range 10 {
		ids = append(ids, s.submit(t, "k1", "", `,"url":"`+d.URL+`/oauth","credential":"partner"`))
	}
	for _, id := range ids {
		if doc := s.settle(t, id); doc["status"] != "completed" {
			t.Errorf("%s: %v %v", id, doc["status"], doc["lastError"])
		}
	}
	if n := ts.requests.Load(); n != 1 {
		t.Errorf("10 requests on two workers asked the token endpoint %d times, want 1", n)
	}
	t.Logf("10 requests on two workers: %d token request(s)", ts.requests.Load())
}

// A token that expires while requests keep coming is renewed before it
// expires: no attempt fails.
func TestATokenExpiringMidRunFailsNoAttempt(t *testing.T) {
	t.Parallel()
	ts := startTokenServer(t)
	ts.expiresIn.Store(2)
	d := startGuardedDest(t, ts)
	s := startCredStack(t, nil)
	s.put(t, "partner", `{"type":"oauth2_client_credentials","tokenUrl":"`+ts.URL+`","clientId":"client-1","clientSecret":"`+clientSecret+`"}`)
	var ids []string
	for range 12 {
		// Paced, not synchronised: the run spans three lifetimes of a token.
		ids = append(ids, s.submit(t, "k1", "", `,"url":"`+d.URL+`/oauth","credential":"partner"`))
		time.Sleep(500 * time.Millisecond)
	}
	for _, id := range ids {
		doc := s.settle(t, id)
		if doc["status"] != "completed" || doc["attemptCount"] != float64(1) {
			t.Errorf("%s: %v after %v attempts (%v)", id, doc["status"], doc["attemptCount"], doc["lastError"])
		}
	}
	if n := d.refused.Load(); n != 0 {
		t.Errorf("the destination refused %d calls with an expired token", n)
	}
	if n := ts.requests.Load(); n < 2 {
		t.Errorf("the token endpoint was asked %d times over three token lifetimes, want at least 2", n)
	}
	t.Logf("12 requests over 6 s with 2-second tokens: %d token requests, %d calls refused", ts.requests.Load(), d.refused.Load())
}

// A token endpoint that refuses the client fails the request at once as
// credential_error, quoting the endpoint's error, with no call made; one
// that answers 503 is retried.
func TestATokenEndpointsFailureIsClassified(t *testing.T) {
	t.Parallel()
	ts := startTokenServer(t)
	d := startGuardedDest(t, ts)
	s := startCredStack(t, nil)
	s.put(t, "partner", `{"type":"oauth2_client_credentials","tokenUrl":"`+ts.URL+`","clientId":"client-1","clientSecret":"`+clientSecret+`"}`)

	ts.failWith.Store(http.StatusUnauthorized)
	id := s.submit(t, "k1", "", `,"url":"`+d.URL+`/oauth","credential":"partner"`)
	doc := s.settle(t, id)
	a := firstAttempt(t, doc)
	if doc["status"] != "failed" || doc["failureClass"] != "credential_error" || a["called"] != false ||
		!strings.Contains(fmt.Sprint(doc["lastError"]), "invalid_client") || !strings.Contains(fmt.Sprint(doc["lastError"]), "client is disabled") {
		t.Errorf("a token endpoint answering 401 invalid_client: %v %v called=%v %q; want failed, credential_error, no call, the endpoint's error",
			doc["status"], doc["failureClass"], a["called"], doc["lastError"])
	}
	if strings.Contains(fmt.Sprint(doc), clientSecret) {
		t.Error("the request's document shows the client secret")
	}
	if n := len(d.headersOf(id)); n != 0 {
		t.Errorf("the destination was called %d times", n)
	}

	ts.failWith.Store(http.StatusServiceUnavailable)
	id = s.submit(t, "k1", "", `,"url":"`+d.URL+`/oauth","credential":"partner","maxRetries":20,"backoffMs":1000`)
	eventually(t, 30*time.Second, "a retry after the token endpoint's 503", func() bool {
		doc = s.request(t, "k1", id)
		return doc["status"] == "retrying" && doc["failureClass"] == "credential_error"
	})
	ts.failWith.Store(0)
	if doc = s.settle(t, id); doc["status"] != "completed" {
		t.Errorf("once the token endpoint is back: %v %v (attempts %v)", doc["status"], doc["lastError"], doc["attempts"])
	}
}

// A tenant's defaults for an endpoint serve requests that name no
// credential, and an ed25519 signing secret signs v1a.
func TestEndpointDefaultsAndEd25519Signing(t *testing.T) {
	t.Parallel()
	ts := startTokenServer(t)
	d := startGuardedDest(t, ts)
	s := startCredStack(t, nil)
	s.put(t, "partner-bearer", `{"type":"bearer","token":"`+bearerTok+`"}`)
	u, _ := url.Parse(d.URL)
	if code, out := s.call(t, "k1", "PUT", "/endpoints/http:"+u.Host+"/settings", `{"credential":"partner-bearer"}`); code != http.StatusOK {
		t.Fatalf("PUT settings: %d %s", code, out)
	}
	code, out := s.call(t, "k1", "POST", "/signing-secrets", `{"type":"ed25519"}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /signing-secrets: %d %s", code, out)
	}
	whpk := jsonField(t, out, "publicKey")
	if strings.Contains(out, "whsk_") {
		t.Errorf("an ed25519 secret's private key was returned: %s", out)
	}
	id := s.submit(t, "k1", "", `,"url":"`+d.URL+`/bearer","body":"hi"`)
	doc := s.settle(t, id)
	if doc["status"] != "completed" || firstAttempt(t, doc)["credential"] != "partner-bearer" {
		t.Fatalf("a request naming no credential to an endpoint with a default: %v %v", doc["status"], doc["attempts"])
	}
	hs := d.headersOf(id)
	if len(hs) != 1 || !strings.HasPrefix(hs[0].Get("webhook-signature"), "v1a,") {
		t.Fatalf("signature %v, want v1a", hs)
	}
	if err := sign.Verify(hs[0], []byte("hi"), []string{whpk}, time.Now(), time.Minute); err != nil {
		t.Errorf("the public key does not verify the delivery: %v", err)
	}
}

// A /v2 message names its credential with Retryd-Credential and is
// delivered with it; a credential deleted after a request named it fails
// that request's attempt as credential_error, saying so, with no call.
func TestV2MessagesNameCredentialsAndADeletedOneFailsTheAttempt(t *testing.T) {
	t.Parallel()
	ts := startTokenServer(t)
	d := startGuardedDest(t, ts)
	s := startCredStack(t, nil)
	s.put(t, "partner-bearer", `{"type":"bearer","token":"`+bearerTok+`"}`)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.api+"/v2/publish/"+d.URL+"/bearer", strings.NewReader("hi"))
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Retryd-Credential", "partner-bearer")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("/v2/publish with Retryd-Credential: %d %s", resp.StatusCode, raw)
	}
	id := jsonField(t, string(raw), "messageId")
	if doc := s.settle(t, id); doc["status"] != "completed" || firstAttempt(t, doc)["credential"] != "partner-bearer" {
		t.Errorf("a /v2 message naming its credential: %v %v", doc["status"], doc["attempts"])
	}

	id = s.submit(t, "k1", "", `,"url":"`+d.URL+`/bearer","credential":"partner-bearer","delayMs":5000`)
	if code, out := s.call(t, "k1", "DELETE", "/credentials/partner-bearer", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, out)
	}
	doc := s.settle(t, id)
	a := firstAttempt(t, doc)
	if doc["status"] != "failed" || doc["failureClass"] != "credential_error" || a["called"] != false ||
		!strings.Contains(fmt.Sprint(doc["lastError"]), `"partner-bearer" does not exist`) {
		t.Errorf("a request whose credential was deleted: %v %v called=%v %q; want failed, credential_error, no call, saying it does not exist",
			doc["status"], doc["failureClass"], a["called"], doc["lastError"])
	}
	if n := len(d.headersOf(id)); n != 0 {
		t.Errorf("the destination was called %d times", n)
	}
}
