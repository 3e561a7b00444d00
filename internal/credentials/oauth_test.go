package credentials

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/retry"
)

const (
	testClientID     = "retryd client/1"
	testClientSecret = "OAUTH-CLIENT-SECRET-x81:&="
)

// putOAuth stores acme's oauth credential "partner" for ts.
func putOAuth(t *testing.T, s *Store, tokenURL string, mod func(*Spec)) {
	t.Helper()
	spec := &Spec{Type: OAuth2, TokenURL: tokenURL, ClientID: testClientID, ClientSecret: testClientSecret,
		Scopes: []string{"events:write", "events:read"}, Audience: "https://api.partner.example", ExtraParams: map[string]string{"resource": "r-1"}}
	if mod != nil {
		mod(spec)
	}
	if _, _, err := s.Put(t.Context(), "acme", "partner", spec, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// authorize is one delivery's worth: For, then Authorize.
func authorize(ctx context.Context, b *Book) (http.Header, *Use, error) {
	u, err := b.For(ctx, "acme", "https://api.partner.example:443", "partner", "")
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	return h, u, u.Authorize(ctx, h)
}

func TestOAuth2OneTokenRequestForTwoWorkers(t *testing.T) {
	for _, style := range []string{"header", "body"} {
		t.Run(style, func(t *testing.T) {
			s := newStore(t)
			ts := startTokenServer(t, testClientID, testClientSecret)
			putOAuth(t, s, ts.url(), func(spec *Spec) { spec.AuthStyle = style })
			workers := []*Book{newBook(s, nil), newBook(s, nil)}

			var wg sync.WaitGroup
			got := make(chan string, 10)
			for _, b := range workers {
				for range 5 {
					wg.Go(func() {
						h, _, err := authorize(t.Context(), b)
						if err != nil {
							t.Errorf("Authorize: %v", err)
						}
						got <- h.Get("Authorization")
					})
				}
			}
			wg.Wait()
			close(got)
			seen := map[string]int{}
			for h := range got {
				seen[h]++
			}
			if n := ts.requests.Load(); n != 1 {
				t.Errorf("%d token requests for 10 deliveries on 2 workers, want 1", n)
			}
			toks := ts.tokens()
			if len(toks) != 1 || seen["Bearer "+toks[0]] != 10 {
				t.Errorf("deliveries sent %v, want the one token issued (%v) 10 times", seen, toks)
			}
			form, basic := ts.lastRequest()
			if basic != (style == "header") {
				t.Errorf("authStyle %s: HTTP Basic used = %v", style, basic)
			}
			if style == "header" && (form.Has("client_id") || form.Has("client_secret")) {
				t.Errorf("authStyle header also sent the client in the body: %v", form)
			}
			if form.Get("scope") != "events:write events:read" || form.Get("audience") != "https://api.partner.example" || form.Get("resource") != "r-1" {
				t.Errorf("token request form %v: want scope, audience and the extra parameter", form)
			}
		})
	}
}

func TestOAuth2RenewsAnExpiredToken(t *testing.T) {
	s := newStore(t)
	ts := startTokenServer(t, testClientID, testClientSecret)
	ts.expiresIn.Store(2)
	api := startAPI(t, ts)
	putOAuth(t, s, ts.url(), nil)
	workers := []*Book{newBook(s, nil), newBook(s, nil)}

	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		h, u, err := authorize(t.Context(), workers[i%2])
		if err != nil {
			t.Fatalf("delivery %d: Authorize: %v", i, err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, api.URL, nil)
		req.Header = h
		resp, err := u.Client.Do(req)
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("delivery %d sent a token the server no longer takes (%s)", i, h.Get("Authorization"))
		}
		time.Sleep(50 * time.Millisecond) // a steady load, not a synchronisation
	}
	if n := ts.requests.Load(); n < 2 || n > 4 {
		t.Errorf("%d token requests over 4s of 2s tokens, want 2 to 4", n)
	}
	if api.ok.Load() == 0 || api.refused.Load() != 0 {
		t.Errorf("destination took %d calls and refused %d, want none refused", api.ok.Load(), api.refused.Load())
	}
}

func TestOAuth2UnauthorizedDropsTheTokenForEveryWorker(t *testing.T) {
	s := newStore(t)
	ts := startTokenServer(t, testClientID, testClientSecret)
	putOAuth(t, s, ts.url(), nil)
	one, two := newBook(s, nil), newBook(s, nil)

	h1, u1, err := authorize(t.Context(), one)
	if err != nil {
		t.Fatal(err)
	}
	if h2, _, err := authorize(t.Context(), two); err != nil || h2.Get("Authorization") != h1.Get("Authorization") {
		t.Fatalf("second worker sent %q (%v), want the shared %q", h2.Get("Authorization"), err, h1.Get("Authorization"))
	}
	u1.Unauthorized(t.Context(), h1)

	h2, u2, err := authorize(t.Context(), two)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Get("Authorization") == h1.Get("Authorization") {
		t.Fatal("the other worker sent the token a destination refused")
	}
	if n := ts.requests.Load(); n != 2 {
		t.Errorf("%d token requests, want 2 (the first, the one after the 401)", n)
	}
	if h, _, _ := authorize(t.Context(), one); h.Get("Authorization") != h2.Get("Authorization") {
		t.Errorf("first worker sent %q after the drop, want the new %q", h.Get("Authorization"), h2.Get("Authorization"))
	}
	// A late 401 for the old token must not drop the new one.
	u2.Unauthorized(t.Context(), h1)
	if h, _, _ := authorize(t.Context(), two); h.Get("Authorization") != h2.Get("Authorization") || ts.requests.Load() != 2 {
		t.Errorf("a 401 for the old token dropped the new one: sent %q, %d token requests", h.Get("Authorization"), ts.requests.Load())
	}
}

func TestOAuth2TokenEndpointFailures(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/oauth/token"
	closed.Close()
	for _, tc := range []struct {
		name      string
		fail      *tokenFailure
		secret    string
		url       string
		guard     *egress.Guard
		permanent bool
		want      []string
		requests  int64
	}{
		{name: "invalid_scope", fail: &tokenFailure{http.StatusBadRequest, "invalid_scope", "scope events:write is not granted"}, permanent: true,
			want: []string{"400", "invalid_scope", "scope events:write is not granted"}, requests: 1},
		{name: "invalid_client", secret: "WRONG-SECRET", permanent: true, want: []string{"401", "invalid_client", "wrong secret"}, requests: 1},
		{name: "unavailable", fail: &tokenFailure{http.StatusServiceUnavailable, "temporarily_unavailable", "try later"}, want: []string{"503"}, requests: 1},
		{name: "too many requests", fail: &tokenFailure{http.StatusTooManyRequests, "slow_down", ""}, want: []string{"429"}, requests: 1},
		{name: "unreachable", url: closedURL, want: []string{"unreachable"}},
		{name: "refused by the rules", guard: &egress.Guard{}, permanent: true, want: []string{"refused", "127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			ts := startTokenServer(t, testClientID, testClientSecret)
			ts.fail.Store(tc.fail)
			tokenURL := ts.url()
			if tc.url != "" {
				tokenURL = tc.url
			}
			putOAuth(t, s, tokenURL, func(spec *Spec) {
				if tc.secret != "" {
					spec.ClientSecret = tc.secret
				}
			})
			_, _, err := authorize(t.Context(), newBook(s, tc.guard))
			var cerr *retry.CredentialError
			if !errors.As(err, &cerr) {
				t.Fatalf("Authorize = %v, want a CredentialError", err)
			}
			if cerr.Permanent != tc.permanent {
				t.Errorf("Permanent = %v, want %v (%v)", cerr.Permanent, tc.permanent, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, secret := range []string{testClientSecret, "WRONG-SECRET"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q quotes the client secret", err)
				}
			}
			if n := ts.requests.Load(); n != tc.requests {
				t.Errorf("token server saw %d requests, want %d", n, tc.requests)
			}
		})
	}
}

func TestOAuth2KeepsFailingRaisesFailingOnce(t *testing.T) {
	s := newStore(t)
	ts := startTokenServer(t, testClientID, testClientSecret)
	ts.fail.Store(&tokenFailure{http.StatusServiceUnavailable, "temporarily_unavailable", "down for maintenance"})
	putOAuth(t, s, ts.url(), nil)
	b := newBook(s, nil)
	var mu sync.Mutex
	var calls []string
	b.Failing = func(tn, name, lastError string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, tn+"/"+name+": "+lastError)
	}
	for i := range 5 {
		if _, _, err := authorize(t.Context(), b); err == nil {
			t.Fatalf("attempt %d succeeded against a failing token endpoint", i+1)
		}
	}
	// Remembered a moment: the attempts that follow a failure do not each
	// ask the failing endpoint again.
	if n := ts.requests.Load(); n >= 5 {
		t.Errorf("5 attempts against a failing token endpoint asked it %d times; want the failure remembered", n)
	}
	mu.Lock()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "acme/partner: ") || !strings.Contains(calls[0], "down for maintenance") {
		t.Errorf("Failing called %d times: %q; want once, naming acme/partner and the endpoint's error", len(calls), calls)
	}
	mu.Unlock()
	v, err := s.Get(t.Context(), "acme", "partner")
	if err != nil || !strings.Contains(v.LastError, "503") || !strings.Contains(v.LastError, "down for maintenance") {
		t.Errorf("Get: lastError %q (%v), want the token endpoint's 503", v.LastError, err)
	}
	troubles, err := s.Troubles(t.Context(), time.Now())
	if err != nil || len(troubles) != 1 || !troubles[0].Failing {
		t.Errorf("Troubles = %+v, %v; want partner failing", troubles, err)
	}

	ts.fail.Store(nil)
	// The failure is remembered a moment (failMemory), then asked again.
	for deadline := time.Now().Add(failMemory + 5*time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, _, err := authorize(t.Context(), b)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the endpoint recovered: %v", err)
		}
	}
	if v, _ := s.Get(t.Context(), "acme", "partner"); v.LastError != "" || v.LastUsedAt == nil {
		t.Errorf("after a success: lastError %q, lastUsedAt %v; want cleared and set", v.LastError, v.LastUsedAt)
	}
}
