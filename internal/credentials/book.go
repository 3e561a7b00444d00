package credentials

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/sign"
	"github.com/retryd/retryd/internal/tenant"
)

// DefaultRefresh is how old a worker's copy of a tenant's credentials may
// grow before it is read again, should a change's notice be missed.
const DefaultRefresh = 5 * time.Second

// Book is a worker's copy of the tenants' credentials, endpoint defaults
// and signing secrets: read once per tenant, and again when the API
// publishes a change (Changed) or after Refresh. A delivery that needs
// nothing costs no Redis command; one that names a credential the copy
// lacks reads again before it says the credential is gone.
type Book struct {
	Store *Store
	// Guard builds the clients (the destination rules on every dial).
	Guard *egress.Guard
	// EgressProxy is every delivery's proxy (EGRESS_PROXY) where no proxy
	// credential applies; nil for none.
	EgressProxy *egress.Proxy
	// Base is the client of a delivery with no certificate and no proxy
	// credential: the worker's own (through EgressProxy when set).
	Base *http.Client
	// Refresh: see DefaultRefresh (zero means it).
	Refresh time.Duration
	Now     func() time.Time
	Log     *slog.Logger
	// Failing, when set, is told of a credential whose token endpoint
	// failed failingAfter times in a row (the operator's event).
	Failing func(t, name, lastError string)

	mu      sync.Mutex
	tenants map[string]*snapshot
	gen     uint64
	// Kept per name, of one version each: a credential put again
	// replaces its copies (and closes its old client's connections).
	clients map[string]slot[*http.Client]
	opened  map[string]slot[*Spec]
	tokens  map[string]slot[*tokenCache]
	used    map[string]time.Time
	fails   map[string]int
}

// snapshot is one tenant's state as last read.
type snapshot struct {
	at       time.Time
	gen      uint64
	creds    map[string]string
	settings map[string]string
	signing  map[string]string
	// signer is built from signing on first use.
	signer *sign.Webhooks
}

// Start follows the API's change notices until ctx ends.
func (b *Book) Start(ctx context.Context) {
	sub := b.Store.RDB.Subscribe(ctx, Changed)
	go func() {
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				b.forget(m.Payload)
			}
		}
	}()
}

// forget drops tenant t's copy: the next delivery reads it again.
func (b *Book) forget(t string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.tenants, t)
	b.gen++
}

func (b *Book) refresh() time.Duration {
	if b.Refresh > 0 {
		return b.Refresh
	}
	return DefaultRefresh
}

func (b *Book) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// snapshot is tenant t's copy, read again when stale or when force.
func (b *Book) snapshot(ctx context.Context, t string, force bool) (*snapshot, error) {
	t = tenant.Of(t)
	now := b.now()
	b.mu.Lock()
	s, gen := b.tenants[t], b.gen
	b.mu.Unlock()
	if s != nil && !force && now.Sub(s.at) < b.refresh() {
		return s, nil
	}
	k := keysOf(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var creds, settings, signing *redis.MapStringStringCmd
	_, err := b.Store.RDB.Pipelined(ctx, func(p redis.Pipeliner) error {
		creds = p.HGetAll(ctx, k.creds())
		settings = p.HGetAll(ctx, k.settings())
		signing = p.HGetAll(ctx, k.signing())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the credentials of tenant %s: %w", t, err)
	}
	s = &snapshot{at: now, gen: gen, creds: creds.Val(), settings: settings.Val(), signing: signing.Val()}
	b.mu.Lock()
	if b.tenants == nil {
		b.tenants = map[string]*snapshot{}
	}
	if b.gen == gen { // no change notice came while it was read
		b.tenants[t] = s
	}
	b.mu.Unlock()
	return s, nil
}

// Use is what a delivery uses: the credential and proxy that apply (names,
// "" for none), and the client that makes the call with them.
type Use struct {
	Tenant     string
	Credential string
	Proxy      string
	// Client makes the call: the guarded client, with the credential's
	// certificate and the proxy when they apply.
	Client *http.Client

	spec    *Spec
	version string
	book    *Book
}

// For is what a delivery of tenant t to endpoint uses: credential and
// proxy, the names the request gave ("" for none), else the tenant's
// defaults for endpoint, each on its own. An error is a *retry.CredentialError.
func (b *Book) For(ctx context.Context, t, endpoint, credential, proxy string) (*Use, error) {
	s, err := b.snapshot(ctx, t, false)
	if err != nil {
		return nil, &retry.CredentialError{Err: err}
	}
	if credential == "" || proxy == "" {
		// What the request names wins, each on its own.
		if raw, ok := s.settings[endpoint]; ok {
			var set Settings
			if json.Unmarshal([]byte(raw), &set) == nil {
				credential, proxy = cmp.Or(credential, set.Credential), cmp.Or(proxy, set.Proxy)
			}
		}
	}
	u := &Use{Tenant: tenant.Of(t), Credential: credential, Proxy: proxy, book: b}
	var proxySpec *Spec
	var proxyVersion string
	if credential != "" {
		if u.spec, u.version, err = b.open(ctx, t, credential, &s); err != nil {
			return nil, err
		}
	}
	if proxy != "" {
		if proxySpec, proxyVersion, err = b.open(ctx, t, proxy, &s); err != nil {
			return nil, err
		}
		if proxySpec.Type != Proxy {
			return nil, &retry.CredentialError{Permanent: true, Err: fmt.Errorf("%q is a %s credential, not a proxy", proxy, proxySpec.Type)}
		}
		b.usedNow(ctx, u.Tenant, proxy)
	}
	if u.spec != nil && u.spec.Type == Proxy {
		return nil, &retry.CredentialError{Permanent: true, Err: fmt.Errorf("%q is a proxy; name it as the proxy, not the credential", credential)}
	}
	if u.Client, err = b.client(u, proxySpec, proxyVersion); err != nil {
		return nil, &retry.CredentialError{Permanent: true, Err: err}
	}
	return u, nil
}

// open is tenant t's credential name, decrypted (cached by version). A
// name missing from the copy is looked for again in Redis first.
func (b *Book) open(ctx context.Context, t, name string, s **snapshot) (*Spec, string, error) {
	raw, ok := (*s).creds[name]
	if !ok {
		fresh, err := b.snapshot(ctx, t, true)
		if err != nil {
			return nil, "", &retry.CredentialError{Err: err}
		}
		*s = fresh
		if raw, ok = fresh.creds[name]; !ok {
			return nil, "", &retry.CredentialError{Permanent: true, Err: fmt.Errorf("credential %q does not exist (deleted after the request was submitted?); create it again and redrive", name)}
		}
	}
	st, err := decodeStored(raw)
	if err != nil {
		return nil, "", &retry.CredentialError{Permanent: true, Err: err}
	}
	key := tenant.Of(t) + "\x00" + name
	b.mu.Lock()
	kept := b.opened[key]
	b.mu.Unlock()
	if kept.value != nil && kept.version == st.Version {
		return kept.value, st.Version, nil
	}
	spec, err := b.Store.open(t, name, st)
	if err != nil {
		// A worker without the key that sealed it: fixed by configuration,
		// so retried.
		return nil, "", &retry.CredentialError{Err: fmt.Errorf("credential %q cannot be read by this worker: %w", name, err)}
	}
	b.mu.Lock()
	if b.opened == nil {
		b.opened = map[string]slot[*Spec]{}
	}
	b.opened[key] = slot[*Spec]{st.Version, spec}
	b.mu.Unlock()
	return spec, st.Version, nil
}

// slot is what a Book keeps for one name: the value of one version.
type slot[T any] struct {
	version string
	value   T
}

// Authorize sets on h what the credential adds to a call: an
// Authorization header or its own headers. An OAuth2 credential gets its
// token first; its failure is a *retry.CredentialError.
func (u *Use) Authorize(ctx context.Context, h http.Header) error {
	if u == nil || u.spec == nil {
		return nil
	}
	switch s := u.spec; s.Type {
	case Basic:
		r := &http.Request{Header: http.Header{}}
		r.SetBasicAuth(s.Username, s.Password)
		h.Set("Authorization", r.Header.Get("Authorization"))
	case Bearer:
		h.Set("Authorization", "Bearer "+s.Token)
	case Headers:
		for k, v := range s.Headers {
			h.Set(k, v)
		}
	case OAuth2:
		tok, err := u.book.token(ctx, u)
		if err != nil {
			u.book.failed(ctx, u.Tenant, u.Credential, err)
			return err
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	u.book.usedNow(ctx, u.Tenant, u.Credential)
	return nil
}

// Unauthorized is told of a 401 answered to a call made with u: an OAuth2
// token is dropped, everywhere, so the next attempt gets a new one.
func (u *Use) Unauthorized(ctx context.Context, h http.Header) {
	if u == nil || u.spec == nil || u.spec.Type != OAuth2 {
		return
	}
	u.book.dropToken(ctx, u, h.Get("Authorization"))
}

// ProxyFailed is told of a call u's proxy credential failed (unreachable,
// or refusing its credentials): its lastError.
func (u *Use) ProxyFailed(ctx context.Context, err error) {
	if u == nil || u.Proxy == "" {
		return
	}
	u.book.failed(ctx, u.Tenant, u.Proxy, err)
}

// OAuth2 reports whether u's credential is an OAuth2 one (a 401 is then
// retried with a new token).
func (u *Use) OAuth2() bool { return u != nil && u.spec != nil && u.spec.Type == OAuth2 }

// usedNow notes that u's credential was used, at most once a minute per
// worker.
func (b *Book) usedNow(ctx context.Context, t, name string) {
	key := t + "\x00" + name
	now := b.now()
	b.mu.Lock()
	last, fails := b.used[key], b.fails[key]
	if b.used == nil {
		b.used, b.fails = map[string]time.Time{}, map[string]int{}
	}
	due := now.Sub(last) >= time.Minute || fails > 0
	if due {
		b.used[key] = now
		delete(b.fails, key)
	}
	b.mu.Unlock()
	if !due {
		return
	}
	raw, _ := json.Marshal(usage{LastUsedAt: now.UnixMilli()})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := b.Store.RDB.HSet(ctx, keysOf(t).use(), name, raw).Err(); err != nil && b.Log != nil {
		b.Log.Warn("could not note a credential's use", "tenant", t, "credential", name, "err", err)
	}
}

// failingAfter is how many failures of a token endpoint in a row make the
// credential failing (the operator's event).
const failingAfter = 3

// failed notes that u's credential could not be used: its lastError, and
// the operator's event once it keeps failing.
func (b *Book) failed(ctx context.Context, t, name string, err error) {
	key := t + "\x00" + name
	b.mu.Lock()
	if b.fails == nil {
		b.used, b.fails = map[string]time.Time{}, map[string]int{}
	}
	b.fails[key]++
	n := b.fails[key]
	b.mu.Unlock()
	msg := err.Error()
	var cerr *retry.CredentialError
	if errors.As(err, &cerr) {
		msg = cerr.Err.Error()
	}
	raw, _ := json.Marshal(usage{LastUsedAt: b.now().UnixMilli(), LastError: msg, Failures: n})
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = b.Store.RDB.HSet(wctx, keysOf(t).use(), name, raw).Err()
	if n == failingAfter && b.Failing != nil {
		b.Failing(t, name, msg)
	}
}
