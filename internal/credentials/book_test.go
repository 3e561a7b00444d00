package credentials

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/sign"
)

func putBearer(t *testing.T, s *Store, name, token string) {
	t.Helper()
	if _, _, err := s.Put(t.Context(), "acme", name, &Spec{Type: Bearer, Token: token}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// sent is what u's Authorize sets as Authorization.
func sent(t *testing.T, u *Use) string {
	t.Helper()
	h := http.Header{}
	if err := u.Authorize(t.Context(), h); err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	return h.Get("Authorization")
}

func permanent(err error) bool {
	var cerr *retry.CredentialError
	return errors.As(err, &cerr) && cerr.Permanent
}

func TestBookForNamesAndDefaults(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	b := newBook(s, nil)
	const endpoint = "https://example.com:443"

	u, err := b.For(ctx, "acme", endpoint, "", "")
	if err != nil || u.Credential != "" || u.Client != b.Base || sent(t, u) != "" {
		t.Fatalf("For with nothing stored = %+v, %v; want no credential and the base client", u, err)
	}
	_, err = b.For(ctx, "acme", endpoint, "missing", "")
	if !permanent(err) || !strings.Contains(err.Error(), `"missing" does not exist`) {
		t.Errorf("For a credential that does not exist: %v, want a permanent CredentialError saying so", err)
	}

	// Created after the book read acme: found by the read again.
	putBearer(t, s, "late", "BEARER-LATE")
	if u, err := b.For(ctx, "acme", endpoint, "late", ""); err != nil || sent(t, u) != "Bearer BEARER-LATE" {
		t.Errorf("For a credential created after the book's read: %v", err)
	}

	putBearer(t, s, "default", "BEARER-DEFAULT")
	if err := s.PutSettings(ctx, "acme", Settings{Endpoint: endpoint, Credential: "default"}); err != nil {
		t.Fatal(err)
	}
	fresh := newBook(s, nil)
	if u, err := fresh.For(ctx, "acme", endpoint, "", ""); err != nil || u.Credential != "default" || sent(t, u) != "Bearer BEARER-DEFAULT" {
		t.Errorf("For an endpoint with defaults, naming none: %+v, %v; want the default credential", u, err)
	}
	if u, err := fresh.For(ctx, "acme", endpoint, "late", ""); err != nil || sent(t, u) != "Bearer BEARER-LATE" {
		t.Errorf("a request's own credential lost to the endpoint's default: %v", err)
	}
	if u, err := fresh.For(ctx, "acme", "https://example.com:8443", "", ""); err != nil || u.Credential != "" {
		t.Errorf("another endpoint got %+v, %v; want no credential", u, err)
	}
	if u, err := fresh.For(ctx, "globex", endpoint, "", ""); err != nil || u.Credential != "" {
		t.Errorf("another tenant got %+v, %v; want no credential", u, err)
	}

	if _, _, err := s.Put(ctx, "acme", "egress", &Spec{Type: Proxy, URL: "http://127.0.0.1:1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.For(ctx, "acme", endpoint, "egress", ""); !permanent(err) {
		t.Errorf("a proxy named as the credential: %v, want permanent", err)
	}
	if _, err := fresh.For(ctx, "acme", endpoint, "", "late"); !permanent(err) {
		t.Errorf("a bearer named as the proxy: %v, want permanent", err)
	}
	// A request naming only a proxy keeps the endpoint's credential.
	if u, err := fresh.For(ctx, "acme", endpoint, "", "egress"); err != nil || u.Credential != "default" || u.Proxy != "egress" {
		t.Errorf("a request naming only a proxy: %+v, %v; want the endpoint's credential and its own proxy", u, err)
	}
}

func TestBookSeesAPublishedChange(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	putBearer(t, s, "partner", "BEARER-OLD")
	b := newBook(s, nil)
	b.Refresh = time.Hour
	b.Start(ctx)
	// The subscription is the book's; wait until Redis has it.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if n := s.RDB.PubSubNumSub(ctx, Changed).Val()[Changed]; n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the book never subscribed to the change notices")
		}
		time.Sleep(10 * time.Millisecond)
	}
	u, err := b.For(ctx, "acme", "https://example.com:443", "partner", "")
	if err != nil || sent(t, u) != "Bearer BEARER-OLD" {
		t.Fatalf("For = %v", err)
	}
	putBearer(t, s, "partner", "BEARER-NEW")
	for deadline := time.Now().Add(5 * time.Second); ; {
		u, err := b.For(ctx, "acme", "https://example.com:443", "partner", "")
		if err != nil {
			t.Fatal(err)
		}
		if sent(t, u) == "Bearer BEARER-NEW" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the book still uses the old credential 5s after the change was published")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if _, err := s.Delete(ctx, "acme", "partner"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := b.For(ctx, "acme", "https://example.com:443", "partner", "")
		if permanent(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a deleted credential: %v, want a permanent CredentialError", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBookSignerSignsWithTheTenantsSecretsNewestFirst(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	t0 := time.Now().Add(-time.Hour)
	var shown []string
	for i, kind := range []string{HMAC, Ed25519, HMAC} {
		_, text, err := s.CreateSigningSecret(ctx, "acme", kind, t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, text)
	}
	fallback, err := sign.ParseSecrets([]string{"whsec_" + strings.Repeat("QUJD", 8)})
	if err != nil {
		t.Fatal(err)
	}
	b := newBook(s, nil)
	w, err := b.Signer(ctx, "acme", fallback)
	if err != nil || w == nil || w == fallback {
		t.Fatalf("Signer(acme) = %v, %v; want acme's own", w, err)
	}
	h, body, now := http.Header{}, []byte(`{"event":"x"}`), time.Now()
	w.Sign(h, "msg_1", now, body)
	for i, key := range shown {
		if err := sign.Verify(h, body, []string{key}, now, 0); err != nil {
			t.Errorf("secret %d (%s…) does not verify: %v", i+1, key[:8], err)
		}
	}
	if err := sign.Verify(h, body, []string{"whsec_" + strings.Repeat("QUJD", 8)}, now, 0); err == nil {
		t.Error("the fallback secret verifies a tenant with secrets of its own")
	}
	var kinds []string
	for _, sig := range strings.Fields(h.Get(sign.HeaderSignature)) {
		kinds = append(kinds, strings.SplitN(sig, ",", 2)[0])
	}
	if strings.Join(kinds, " ") != "v1 v1a v1" {
		t.Errorf("signatures %v, want v1 v1a v1", kinds)
	}
	newest, _ := sign.ParseSecret(shown[2])
	first := strings.Fields(h.Get(sign.HeaderSignature))[0]
	if want := sign.FromSecrets([]sign.Secret{newest}).Signature("msg_1", now.Unix(), body); first != want {
		t.Errorf("first signature %q is not the newest secret's %q", first, want)
	}
	if again, _ := b.Signer(ctx, "acme", fallback); again != w {
		t.Error("the signer is built again on every delivery")
	}
	if w, err := b.Signer(ctx, "globex", fallback); err != nil || w != fallback {
		t.Errorf("Signer(globex) = %p, %v; want the fallback %p", w, err, fallback)
	}
}

func TestBookMTLSClientReachesTheDestination(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	srvCert, client := issue(t, "127.0.0.1"), issue(t, "retryd tenant client")
	pair, err := tls.X509KeyPair([]byte(srvCert.cert), []byte(srvCert.key))
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM([]byte(client.ca))
	peers := make(chan string, 10)
	dest := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peers <- r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	dest.Config.ErrorLog = log.New(io.Discard, "", 0)
	dest.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
	dest.StartTLS()
	t.Cleanup(dest.Close)

	spec := &Spec{Type: MTLS, Certificate: client.cert, PrivateKey: client.key, CACertificates: srvCert.ca}
	if _, _, err := s.Put(ctx, "acme", "partner", spec, time.Now()); err != nil {
		t.Fatal(err)
	}
	b := newBook(s, nil)
	u, err := b.For(ctx, "acme", "https://127.0.0.1:443", "partner", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Client.CloseIdleConnections)
	resp, err := u.Client.Get(dest.URL)
	if err != nil {
		t.Fatalf("GET with the mtls credential: %v", err)
	}
	resp.Body.Close()
	if got := <-peers; got != "retryd tenant client" {
		t.Errorf("destination saw client %q", got)
	}
	if _, err := b.Base.Get(dest.URL); err == nil {
		t.Error("the base client reached a destination that asks for a client certificate")
	}
	again, err := b.For(ctx, "acme", "https://127.0.0.1:443", "partner", "")
	if err != nil || again.Client != u.Client {
		t.Errorf("For again gave another client (%v): connections are not kept", err)
	}

	if _, _, err := s.Put(ctx, "acme", "partner", spec, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.forget("acme")
	if next, err := b.For(ctx, "acme", "https://127.0.0.1:443", "partner", ""); err != nil || next.Client == u.Client {
		t.Errorf("a new version of the credential kept the old client (%v)", err)
	}
}

func TestBookSeesAReplacementPutAtTheSameInstant(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if _, _, err := s.Put(ctx, "acme", "partner", &Spec{Type: Bearer, Token: "BEARER-1"}, at); err != nil {
		t.Fatal(err)
	}
	b := newBook(s, nil)
	if u, err := b.For(ctx, "acme", "https://example.com:443", "partner", ""); err != nil || sent(t, u) != "Bearer BEARER-1" {
		t.Fatalf("For = %v", err)
	}
	// A clock that did not move (a coarse or a test clock): still a new version.
	if _, _, err := s.Put(ctx, "acme", "partner", &Spec{Type: Bearer, Token: "BEARER-2"}, at); err != nil {
		t.Fatal(err)
	}
	b.forget("acme")
	if u, err := b.For(ctx, "acme", "https://example.com:443", "partner", ""); err != nil || sent(t, u) != "Bearer BEARER-2" {
		t.Errorf("after a replacement put at the same instant the book sends %q (%v), want Bearer BEARER-2", sent(t, u), err)
	}
}
