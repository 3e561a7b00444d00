package credentials

// OAuth2 client credentials: the grant is golang.org/x/oauth2's; what is
// retryd's is sharing the token between workers. A token lives sealed in
// Redis until shortly before it expires; a worker that finds none takes a
// short lock and asks the token endpoint, and the others wait for what it
// stores: one token request per credential at a time, whatever the
// number of workers or attempts. Redis is asked on every use (one GET), so
// a token dropped after a 401 on any worker is used by none again.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/retry"
)

// Token sharing bounds.
const (
	// tokenLock is how long a worker holds the right to ask the token
	// endpoint; a worker that dies holding it delays the others this long.
	tokenLock = 15 * time.Second
	// tokenTimeout bounds a token request, well inside the lock, so a
	// hung token endpoint never has two workers asking at once.
	tokenTimeout = 10 * time.Second
	// maxEarly is the most a token is renewed ahead of its expiry (a fifth
	// of its life when that is less).
	maxEarly = 30 * time.Second
	// noExpiry is how long a token without expires_in is trusted (a 401
	// drops it sooner).
	noExpiry = time.Hour
	// tokenPoll is how often a waiting worker looks for the token another
	// is getting.
	tokenPoll = 25 * time.Millisecond
)

// tokenCache is one worker's copy of a credential's token and the sealed
// value it was opened from: while Redis holds that same value, the copy
// is used without opening it again.
type tokenCache struct {
	mu  sync.Mutex
	raw string
	tok *oauth2.Token
}

// sharedToken is the token as Redis holds it (sealed).
type sharedToken struct {
	Access  string `json:"a"`
	Type    string `json:"t,omitempty"`
	UntilMs int64  `json:"u"` // trusted until: the expiry less the margin
}

func (b *Book) tokenCacheOf(u *Use) *tokenCache {
	key := u.Tenant + "\x00" + u.Credential
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens == nil {
		b.tokens = map[string]slot[*tokenCache]{}
	}
	kept := b.tokens[key]
	if kept.value == nil || kept.version != u.version {
		kept = slot[*tokenCache]{u.version, &tokenCache{}}
		b.tokens[key] = kept
	}
	return kept.value
}

// token is a valid access token of u's OAuth2 credential: the shared one.
// The worker keeps no token Redis no longer holds: a copy of its own,
// trusted until it expires, would be sent again after another worker's
// 401 dropped it.
func (b *Book) token(ctx context.Context, u *Use) (string, error) {
	c := b.tokenCacheOf(u)
	c.mu.Lock()
	defer c.mu.Unlock()
	tok, err := (&sharedSource{ctx: ctx, b: b, u: u, cache: c}).Token()
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// dropToken forgets the token sent in authorization (a "Bearer …" header)
// here and in Redis, unless another already replaced it there.
func (b *Book) dropToken(ctx context.Context, u *Use, authorization string) {
	access := strings.TrimPrefix(authorization, "Bearer ")
	c := b.tokenCacheOf(u)
	c.mu.Lock()
	if c.tok != nil && c.tok.AccessToken == access {
		c.raw, c.tok = "", nil
	}
	c.mu.Unlock()
	key := keysOf(u.Tenant).token(u.Credential)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	raw, err := b.Store.RDB.Get(ctx, key).Result()
	if err != nil {
		return
	}
	if st, ok := b.openToken(u, raw); ok && st.Access == access {
		_, _ = dropScript.Run(ctx, b.Store.RDB, []string{key}, raw).Result()
	}
}

func tokenContext(u *Use) string {
	return sealContext(u.Tenant, "token", u.Credential+"\x00"+u.version)
}

func (b *Book) openToken(u *Use, raw string) (sharedToken, bool) {
	var st sharedToken
	plain, err := b.Store.Keys.Open(raw, tokenContext(u))
	if err != nil || json.Unmarshal(plain, &st) != nil {
		return st, false
	}
	return st, true
}

// sharedSource gets a token through Redis: the one stored, else one it
// asks for under the lock, else the one another worker stores.
type sharedSource struct {
	ctx context.Context
	b   *Book
	u   *Use
	// cache is the worker's copy, locked by the caller.
	cache *tokenCache
}

func (s *sharedSource) Token() (*oauth2.Token, error) {
	b, u := s.b, s.u
	k := keysOf(u.Tenant)
	ctx, cancel := context.WithTimeout(s.ctx, tokenLock+5*time.Second)
	defer cancel()
	for {
		// The token and a failure remembered, in one read (one slot).
		vals, err := b.Store.RDB.MGet(ctx, k.token(u.Credential), k.tokenFailed(u.Credential)).Result()
		if err != nil {
			return nil, &retry.CredentialError{Err: fmt.Errorf("read the shared token: %w", err)}
		}
		if raw, ok := vals[0].(string); ok {
			if tok := s.usable(raw); tok != nil {
				return tok, nil
			}
		}
		if failed, ok := vals[1].(string); ok {
			return nil, failedBefore(failed)
		}
		owner := make([]byte, 8)
		_, _ = rand.Read(owner)
		mine := hex.EncodeToString(owner)
		got, err := b.Store.RDB.SetNX(ctx, k.lock(u.Credential), mine, tokenLock).Result()
		if err != nil {
			return nil, &retry.CredentialError{Err: fmt.Errorf("take the token lock: %w", err)}
		}
		if got {
			tok, err := s.underLock(ctx)
			_, _ = dropScript.Run(context.WithoutCancel(ctx), b.Store.RDB, []string{k.lock(u.Credential)}, mine).Result()
			return tok, err
		}
		// Another worker is asking: wait for what it stores (or for its
		// lock to go, to ask ourselves).
		select {
		case <-ctx.Done():
			return nil, &retry.CredentialError{Err: fmt.Errorf("waited for another worker's token request: %w", ctx.Err())}
		case <-time.After(tokenPoll):
		}
	}
}

// usable is the stored token raw when it is still trusted, else nil.
func (s *sharedSource) usable(raw string) *oauth2.Token {
	b, u := s.b, s.u
	if c := s.cache; c.tok != nil && raw == c.raw && c.tok.Expiry.After(b.now()) {
		return c.tok
	}
	if st, ok := b.openToken(u, raw); ok && time.UnixMilli(st.UntilMs).After(b.now()) {
		tok := &oauth2.Token{AccessToken: st.Access, TokenType: st.Type, Expiry: time.UnixMilli(st.UntilMs)}
		s.cache.raw, s.cache.tok = raw, tok
		return tok
	}
	return nil
}

// underLock asks the token endpoint, holding the lock: unless a worker
// stored a token between our read and our lock. A failure to be retried
// is remembered for failMemory, so the attempts that follow it, on every
// worker, do not each ask a failing endpoint again.
func (s *sharedSource) underLock(ctx context.Context) (*oauth2.Token, error) {
	k, name := keysOf(s.u.Tenant), s.u.Credential
	if raw, err := s.b.Store.RDB.Get(ctx, k.token(name)).Result(); err == nil {
		if tok := s.usable(raw); tok != nil {
			return tok, nil
		}
	}
	tok, err := s.fetch(ctx)
	var cerr *retry.CredentialError
	if errors.As(err, &cerr) && !cerr.Permanent {
		// A refusal (4xx) ends its request; the next request may ask
		// again (its credential may have been fixed meanwhile).
		raw, _ := json.Marshal(rememberedFailure{Error: cerr.Err.Error()})
		_ = s.b.Store.RDB.Set(context.WithoutCancel(ctx), k.tokenFailed(name), raw, failMemory).Err()
	}
	return tok, err
}

// failMemory is how long a failed token request is answered for: its
// error, without asking again.
const failMemory = 2 * time.Second

// rememberedFailure is a failed token request, as Redis keeps it for
// failMemory (its error quotes the endpoint, never a secret).
type rememberedFailure struct {
	Error string `json:"error"`
}

func failedBefore(raw string) error {
	var f rememberedFailure
	if json.Unmarshal([]byte(raw), &f) != nil {
		return &retry.CredentialError{Err: errors.New("the token endpoint failed a moment ago")}
	}
	return &retry.CredentialError{Err: errors.New(f.Error + " (a moment ago; asked again in a few seconds)")}
}

// fetch asks the token endpoint (RFC 6749 §4.4, through the credential's
// client: the destination rules, its certificate and proxy) and stores
// the token sealed, trusted until shortly before it expires.
func (s *sharedSource) fetch(ctx context.Context) (*oauth2.Token, error) {
	b, u, spec := s.b, s.u, s.u.spec
	cfg := clientcredentials.Config{ClientID: spec.ClientID, ClientSecret: spec.ClientSecret, TokenURL: spec.TokenURL, Scopes: spec.Scopes,
		AuthStyle: oauth2.AuthStyleInHeader}
	if spec.AuthStyle == "body" {
		cfg.AuthStyle = oauth2.AuthStyleInParams
	}
	if spec.Audience != "" || len(spec.ExtraParams) > 0 {
		cfg.EndpointParams = url.Values{}
		for k, v := range spec.ExtraParams {
			cfg.EndpointParams.Set(k, v)
		}
		if spec.Audience != "" {
			cfg.EndpointParams.Set("audience", spec.Audience)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	start := b.now()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, u.Client))
	if err != nil {
		return nil, tokenError(err)
	}
	until := start.Add(noExpiry)
	if !tok.Expiry.IsZero() {
		life := tok.Expiry.Sub(start)
		until = tok.Expiry.Add(-min(maxEarly, life/5))
	}
	if !until.After(b.now()) {
		// Already as good as expired: use it once, share nothing.
		return &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, Expiry: tok.Expiry}, nil
	}
	plain, _ := json.Marshal(sharedToken{Access: tok.AccessToken, Type: tok.TokenType, UntilMs: until.UnixMilli()})
	if sealed, err := b.Store.Keys.Seal(plain, tokenContext(u)); err == nil {
		if err := b.Store.RDB.Set(ctx, keysOf(u.Tenant).token(u.Credential), sealed, until.Sub(b.now())).Err(); err != nil && b.Log != nil {
			b.Log.Warn("could not share a token; other workers will ask for their own", "tenant", u.Tenant, "credential", u.Credential, "err", err)
		}
	}
	return &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, Expiry: until}, nil
}

// tokenError classifies a failed token request: a 4xx answer (a wrong
// client, scope or audience) is permanent and quotes the endpoint's error;
// no answer or a 5xx is retried. The credential's secret is never in it.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		code := re.Response.StatusCode
		msg := fmt.Sprintf("token endpoint answered %d", code)
		if re.ErrorCode != "" {
			msg += " " + re.ErrorCode
		}
		if re.ErrorDescription != "" {
			msg += ": " + re.ErrorDescription
		}
		return &retry.CredentialError{Permanent: code >= 400 && code < 500 && code != 408 && code != 429, Err: errors.New(msg)}
	}
	if errors.Is(err, retry.ErrBlocked) {
		return &retry.CredentialError{Permanent: true, Err: fmt.Errorf("token endpoint refused: %w", err)}
	}
	var perr *egress.ProxyError
	if errors.As(err, &perr) && perr.StatusCode == http.StatusProxyAuthRequired {
		return &retry.CredentialError{Permanent: true, Err: fmt.Errorf("token endpoint unreachable: %w", perr)}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return &retry.CredentialError{Err: fmt.Errorf("token endpoint unreachable: %w", err)}
	}
	// A 2xx answer the library could not use (no access_token, not JSON).
	return &retry.CredentialError{Err: fmt.Errorf("token endpoint answered without a usable token: %w", err)}
}
