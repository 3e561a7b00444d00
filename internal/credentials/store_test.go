package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// everyType is one credential of each type, each secret distinctive; an
// oauth2 one points at tokenURL.
func everyType(t testing.TB, tokenURL string) map[string]*Spec {
	t.Helper()
	c, m := issue(t, "bearer-client.example"), issue(t, "mtls-client.example")
	return map[string]*Spec{
		"oauth":   {Type: OAuth2, TokenURL: tokenURL, ClientID: "client-id-1", ClientSecret: "OAUTH-CLIENT-SECRET-x81", Scopes: []string{"read"}, Audience: "aud"},
		"basic":   {Type: Basic, Username: "user-1", Password: "BASIC-PASSWORD-x82"},
		"bearer":  {Type: Bearer, Token: "BEARER-TOKEN-x83", ClientCertificate: &CertPair{Certificate: c.cert, PrivateKey: c.key}},
		"headers": {Type: Headers, Headers: map[string]string{"X-Api-Key": "HEADER-VALUE-x84", "X-Other": "HEADER-VALUE-x85"}},
		"mtls":    {Type: MTLS, Certificate: m.cert, PrivateKey: m.key, CACertificates: m.ca},
		"proxy":   {Type: Proxy, URL: "http://proxy.example:3128", Username: "proxy-user", Password: "PROXY-PASSWORD-x86"},
	}
}

func TestStorePutGetListDelete(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	specs := everyType(t, "https://auth.example/token")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, spec := range specs {
		v, created, err := s.Put(ctx, "acme", name, spec, t0)
		if err != nil || !created {
			t.Fatalf("Put %s = created %v, %v; want created", name, created, err)
		}
		if v.Name != name || v.Tenant != "acme" || v.Type != spec.Type || !v.CreatedAt.Equal(t0) {
			t.Errorf("Put %s view = %+v", name, v)
		}
	}
	list, err := s.List(ctx, "acme")
	if err != nil || len(list) != len(specs) {
		t.Fatalf("List = %d views, %v; want %d", len(list), err, len(specs))
	}
	for i := 1; i < len(list); i++ {
		if list[i-1].Name >= list[i].Name {
			t.Errorf("List not by name: %s before %s", list[i-1].Name, list[i].Name)
		}
	}
	if other, _ := s.List(ctx, "globex"); len(other) != 0 {
		t.Errorf("another tenant lists %d credentials, want 0", len(other))
	}
	if _, err := s.Get(ctx, "globex", "basic"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's Get: %v, want ErrNotFound", err)
	}
	v, err := s.Get(ctx, "acme", "mtls")
	if err != nil || v.Certificate == nil || v.Certificate.Subject != "CN=mtls-client.example" || len(v.Certificate.Fingerprint) != 64 {
		t.Errorf("Get mtls = %+v, %v; want its certificate's subject and fingerprint", v.Certificate, err)
	}
	if v, _ := s.Get(ctx, "acme", "headers"); strings.Join(v.HeaderNames, ",") != "X-Api-Key,X-Other" {
		t.Errorf("headers view names %v", v.HeaderNames)
	}
	if typ, err := s.TypeOf(ctx, "acme", "oauth"); typ != OAuth2 || err != nil {
		t.Errorf("TypeOf oauth = %q, %v", typ, err)
	}

	t1 := t0.Add(time.Hour)
	v, created, err := s.Put(ctx, "acme", "basic", &Spec{Type: Basic, Username: "user-2", Password: "p2"}, t1)
	if err != nil || created {
		t.Fatalf("Put again = created %v, %v; want a replacement", created, err)
	}
	if !v.CreatedAt.Equal(t0) || !v.UpdatedAt.Equal(t1) || v.Username != "user-2" {
		t.Errorf("replaced view created %v updated %v user %q; want created %v kept, updated %v, user-2", v.CreatedAt, v.UpdatedAt, v.Username, t0, t1)
	}
	if got, _ := s.Get(ctx, "acme", "basic"); !got.CreatedAt.Equal(t0) {
		t.Errorf("Get after replace: createdAt %v, want %v", got.CreatedAt, t0)
	}

	if ok, err := s.Delete(ctx, "acme", "basic"); !ok || err != nil {
		t.Errorf("Delete = %v, %v; want true", ok, err)
	}
	if ok, _ := s.Delete(ctx, "acme", "basic"); ok {
		t.Error("second Delete = true, want false")
	}
	if _, err := s.Get(ctx, "acme", "basic"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
}

func TestViewHoldsNoSecret(t *testing.T) {
	s := newStore(t)
	for name, spec := range everyType(t, "https://auth.example/token") {
		secrets := spec.secrets()
		if len(secrets) == 0 {
			t.Fatalf("%s: no secrets to look for", name)
		}
		put, _, err := s.Put(t.Context(), "acme", name, spec, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(t.Context(), "acme", name)
		list, _ := s.List(t.Context(), "acme")
		for _, v := range []any{put, got, list, spec.view()} {
			raw, _ := json.Marshal(v)
			for _, secret := range secrets {
				for _, part := range append([]string{secret}, secretParts(t, secret)...) {
					if strings.Contains(string(raw), part) {
						t.Errorf("%s: view %s holds secret %q", name, raw, part)
					}
				}
			}
		}
	}
}

// secretParts are the forms of a secret worth looking for besides itself:
// a PEM's decoded body and base64 lines.
func secretParts(t testing.TB, secret string) []string {
	if !strings.HasPrefix(secret, "-----BEGIN") {
		return nil
	}
	return pemBody(t, secret)
}

func TestRekeyResealsUnderTheFirstKey(t *testing.T) {
	a, b := testKey(1), testKey(100)
	s := newStore(t)
	s.Keys = keyring(t, a)
	ctx := t.Context()
	specs := everyType(t, "https://auth.example/token")
	for name, spec := range specs {
		for _, tn := range []string{"acme", "globex"} {
			if _, _, err := s.Put(ctx, tn, name, spec, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	hmac, _, err := s.CreateSigningSecret(ctx, "acme", HMAC, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ed, _, err := s.CreateSigningSecret(ctx, "acme", Ed25519, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	rotated := &Store{RDB: s.RDB, Keys: keyring(t, b, a)}
	n, err := rotated.Rekey(ctx)
	if err != nil || n != 2*len(specs)+2 {
		t.Fatalf("Rekey = %d, %v; want %d resealed", n, err, 2*len(specs)+2)
	}
	if n, err := rotated.Rekey(ctx); n != 0 || err != nil {
		t.Errorf("second Rekey = %d, %v; want nothing to do", n, err)
	}
	onlyB := &Store{RDB: s.RDB, Keys: keyring(t, b)}
	for _, tn := range []string{"acme", "globex"} {
		for name, want := range specs {
			st, err := onlyB.read(ctx, tn, name)
			if err != nil {
				t.Fatal(err)
			}
			if KeyOf(st.Sealed) != onlyB.Keys.SealID() {
				t.Errorf("%s/%s sealed under %s after rekey, want %s", tn, name, KeyOf(st.Sealed), onlyB.Keys.SealID())
			}
			got, err := onlyB.open(tn, name, st)
			if err != nil {
				t.Errorf("%s/%s does not open with [B] alone: %v", tn, name, err)
				continue
			}
			if got.Type != want.Type || !slices.Equal(sorted(got.secrets()), sorted(want.secrets())) {
				t.Errorf("%s/%s opened to another credential", tn, name)
			}
		}
	}
	secrets, _ := onlyB.readSecrets(ctx, "acme")
	if len(secrets) != 2 {
		t.Fatalf("%d signing secrets, want 2", len(secrets))
	}
	for _, st := range secrets {
		if _, err := onlyB.openSecret("acme", st); err != nil || KeyOf(st.Sealed) != onlyB.Keys.SealID() {
			t.Errorf("signing secret %s (%s, want %s or %s) under %s: open %v", st.ID, st.Type, hmac.ID, ed.ID, KeyOf(st.Sealed), err)
		}
	}
	if _, err := (&Store{RDB: s.RDB}).Rekey(ctx); !errors.Is(err, ErrNoKeys) {
		t.Errorf("Rekey without keys: %v, want ErrNoKeys", err)
	}
}

func TestSigningSecretsCreateListDelete(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	t0 := time.Now()
	var ids []string
	for i := range MaxSigningSecrets {
		kind := HMAC
		if i%2 == 1 {
			kind = Ed25519
		}
		sec, shown, err := s.CreateSigningSecret(ctx, "acme", kind, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatalf("secret %d: %v", i+1, err)
		}
		wantPrefix := map[string]string{HMAC: "whsec_", Ed25519: "whpk_"}[kind]
		if !strings.HasPrefix(shown, wantPrefix) || sec.Type != kind || sec.Fingerprint == "" {
			t.Errorf("secret %d (%s): shown %q, %+v", i+1, kind, shown, sec)
		}
		if kind == Ed25519 && sec.PublicKey != shown {
			t.Errorf("ed25519 secret shows %q, its public key is %q", shown, sec.PublicKey)
		}
		ids = append(ids, sec.ID)
	}
	if _, _, err := s.CreateSigningSecret(ctx, "acme", HMAC, t0); !errors.Is(err, ErrTooManySecrets) {
		t.Errorf("secret %d: %v, want ErrTooManySecrets", MaxSigningSecrets+1, err)
	}
	var e *Error
	if _, _, err := s.CreateSigningSecret(ctx, "acme", "rsa", t0); !errors.As(err, &e) || e.Field != "type" {
		t.Errorf("kind rsa: %v, want a refusal of type", err)
	}
	list, err := s.ListSigningSecrets(ctx, "acme")
	if err != nil || len(list) != MaxSigningSecrets {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	for i, sec := range list {
		if want := ids[len(ids)-1-i]; sec.ID != want {
			t.Errorf("list[%d] = %s, want %s (newest first)", i, sec.ID, want)
		}
	}
	if ok, err := s.DeleteSigningSecret(ctx, "acme", ids[0]); !ok || err != nil {
		t.Errorf("Delete = %v, %v", ok, err)
	}
	if ok, _ := s.DeleteSigningSecret(ctx, "acme", ids[0]); ok {
		t.Error("second Delete = true")
	}
	if _, _, err := s.CreateSigningSecret(ctx, "acme", "", t0); err != nil {
		t.Errorf("a secret after a delete: %v", err)
	}
	if other, _ := s.ListSigningSecrets(context.Background(), "globex"); len(other) != 0 {
		t.Errorf("another tenant has %d secrets", len(other))
	}
}

func sorted(v []string) []string {
	slices.Sort(v)
	return v
}

func TestSigningSecretsStayWithinTheLimitWhenCreatedAtOnce(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	for range 2 * MaxSigningSecrets {
		wg.Go(func() { _, _, _ = s.CreateSigningSecret(t.Context(), "acme", HMAC, time.Now()) })
	}
	wg.Wait()
	if n := s.RDB.HLen(t.Context(), keysOf("acme").signing()).Val(); n > MaxSigningSecrets {
		t.Errorf("%d concurrent creates left %d secrets, over the limit of %d", 2*MaxSigningSecrets, n, MaxSigningSecrets)
	}
}

// A tenant holds at most MaxCredentials credentials and MaxSettings
// endpoint defaults: one more is refused, a replacement is not, and
// another tenant is not counted.
func TestATenantsCredentialsAreCapped(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	spec := &Spec{Type: Bearer, Token: "t"}
	for i := range MaxCredentials {
		if _, _, err := s.Put(ctx, "acme", fmt.Sprintf("c%d", i), spec, time.Now()); err != nil {
			t.Fatalf("credential %d: %v", i, err)
		}
	}
	if _, _, err := s.Put(ctx, "acme", "one-more", spec, time.Now()); !errors.Is(err, ErrTooManyCredentials) {
		t.Errorf("credential %d: %v, want ErrTooManyCredentials", MaxCredentials+1, err)
	}
	if _, _, err := s.Put(ctx, "acme", "c0", spec, time.Now()); err != nil {
		t.Errorf("a replacement at the cap: %v", err)
	}
	if _, _, err := s.Put(ctx, "globex", "c0", spec, time.Now()); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	if n, _ := s.RDB.HLen(ctx, keysOf("acme").creds()).Result(); n != MaxCredentials {
		t.Errorf("acme holds %d credentials, want %d", n, MaxCredentials)
	}
}
