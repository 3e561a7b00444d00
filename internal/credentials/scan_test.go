package credentials

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRedisHoldsNoSecretInClear stores every kind of secret retryd keeps,
// uses them, then reads every value of every key in Redis.
func TestRedisHoldsNoSecretInClear(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	ts := startTokenServer(t, "client-id-1", "OAUTH-CLIENT-SECRET-x81")
	specs := everyType(t, ts.url())
	for name, spec := range specs {
		if _, _, err := s.Put(ctx, "acme", name, spec, time.Now()); err != nil {
			t.Fatalf("Put %s: %v", name, err)
		}
	}
	if err := s.PutSettings(ctx, "acme", Settings{Endpoint: "https://api.partner.example:443", Credential: "oauth", Proxy: "proxy"}); err != nil {
		t.Fatal(err)
	}
	hmac, whsec, err := s.CreateSigningSecret(ctx, "acme", HMAC, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ed, _, err := s.CreateSigningSecret(ctx, "acme", Ed25519, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	b := newBook(s, nil)
	for _, name := range []string{"oauth", "basic", "bearer", "headers", "mtls"} {
		u, err := b.For(ctx, "acme", "https://other.example:443", name, "")
		if err != nil {
			t.Fatalf("For %s: %v", name, err)
		}
		if err := u.Authorize(ctx, map[string][]string{}); err != nil {
			t.Fatalf("Authorize %s: %v", name, err)
		}
	}
	if _, err := b.Signer(ctx, "acme", nil); err != nil {
		t.Fatal(err)
	}
	issued := ts.tokens()
	if len(issued) != 1 {
		t.Fatalf("token server issued %v, want one token", issued)
	}

	var secrets []string
	for _, spec := range specs {
		for _, v := range spec.secrets() {
			secrets = append(secrets, v, url.QueryEscape(v))
			secrets = append(secrets, secretParts(t, v)...)
		}
	}
	secrets = append(secrets, issued[0])
	secrets = append(secrets, whsec, strings.TrimPrefix(whsec, "whsec_"))
	for _, st := range []storedSecret{{SigningSecret: hmac}, {SigningSecret: ed}} {
		all, _ := s.readSecrets(ctx, "acme")
		for _, a := range all {
			if a.ID == st.ID {
				st = a
			}
		}
		key, err := s.openSecret("acme", st)
		if err != nil {
			t.Fatalf("open signing secret %s: %v", st.ID, err)
		}
		secrets = append(secrets, string(key), base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key))
		if st.Type == Ed25519 {
			seed := key[:32]
			secrets = append(secrets, "whsk_", string(seed), base64.StdEncoding.EncodeToString(seed))
		}
	}

	values := everyValue(t, s.RDB)
	k := keysOf("acme")
	for _, want := range []string{k.creds(), k.token("oauth"), k.signing(), k.settings(), k.use(), tenantsKey} {
		if _, ok := values[want]; !ok {
			t.Errorf("Redis has no %s: the scan does not cover what it should", want)
		}
	}
	for key, vals := range values {
		for _, v := range vals {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(v, secret) {
					t.Errorf("Redis key %s holds the secret %.24q… in clear", key, secret)
				}
			}
		}
	}
}
