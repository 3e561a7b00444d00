package credentials

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tokenServer is an OAuth2 token endpoint as RFC 6749 §4.4 describes it:
// the client credentials grant, the client authenticated by HTTP Basic or
// by client_id and client_secret in the body.
type tokenServer struct {
	*httptest.Server
	clientID, clientSecret string
	// expiresIn is the life of the tokens it issues, in seconds.
	expiresIn atomic.Int64
	// fail, when set, is the status and error code it answers instead.
	fail     atomic.Pointer[tokenFailure]
	requests atomic.Int64

	mu     sync.Mutex
	issued map[string]time.Time
	forms  []url.Values
	basic  []bool
}

type tokenFailure struct {
	status            int
	code, description string
}

func startTokenServer(t *testing.T, clientID, clientSecret string) *tokenServer {
	t.Helper()
	ts := &tokenServer{clientID: clientID, clientSecret: clientSecret, issued: map[string]time.Time{}}
	ts.expiresIn.Store(3600)
	ts.Server = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) url() string { return ts.URL + "/oauth/token" }

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	ts.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
		ts.refuse(w, http.StatusBadRequest, "invalid_request", "POST /oauth/token only")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		ts.refuse(w, http.StatusBadRequest, "invalid_request", "form body expected")
		return
	}
	if err := r.ParseForm(); err != nil {
		ts.refuse(w, http.StatusBadRequest, "invalid_request", "form does not parse")
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		// RFC 6749 §2.3.1: the id and secret are form-encoded first.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	ts.mu.Lock()
	ts.forms = append(ts.forms, r.PostForm)
	ts.basic = append(ts.basic, basic)
	ts.mu.Unlock()
	if r.PostForm.Get("grant_type") != "client_credentials" {
		ts.refuse(w, http.StatusBadRequest, "unsupported_grant_type", "client_credentials only")
		return
	}
	if id != ts.clientID || secret != ts.clientSecret {
		ts.refuse(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if f := ts.fail.Load(); f != nil {
		ts.refuse(w, f.status, f.code, f.description)
		return
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tok := "ACCESS-TOKEN-" + hex.EncodeToString(b)
	ts.mu.Lock()
	ts.issued[tok] = time.Now()
	ts.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": ts.expiresIn.Load()})
}

func (ts *tokenServer) refuse(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

// valid reports whether tok was issued here and has not expired, by the
// server's clock, with a second's tolerance (as a real API allows clock
// skew): a call slowed by busy cores between its token and its arrival is
// not the token's fault, and a token never renewed still fails.
func (ts *tokenServer) valid(tok string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	at, ok := ts.issued[tok]
	return ok && time.Since(at) < time.Duration(ts.expiresIn.Load())*time.Second+time.Second
}

func (ts *tokenServer) tokens() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for tok := range ts.issued {
		out = append(out, tok)
	}
	return out
}

func (ts *tokenServer) lastRequest() (url.Values, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.forms) == 0 {
		return nil, false
	}
	return ts.forms[len(ts.forms)-1], ts.basic[len(ts.basic)-1]
}

// apiServer is a destination that takes only the token server's valid
// tokens, and counts the calls it refused.
type apiServer struct {
	*httptest.Server
	ok, refused atomic.Int64
}

func startAPI(t *testing.T, ts *tokenServer) *apiServer {
	t.Helper()
	a := &apiServer{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !found || !ts.valid(tok) {
			a.refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		a.ok.Add(1)
	}))
	t.Cleanup(a.Close)
	return a
}
