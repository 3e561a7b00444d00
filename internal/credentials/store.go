package credentials

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// ErrNotFound is a credential, setting or secret that does not exist.
var ErrNotFound = errors.New("not found")

// What a tenant may hold: every worker that delivers for a tenant reads
// all of its credentials and endpoint settings.
const (
	MaxCredentials = 500
	MaxSettings    = 5000
)

// ErrTooManyCredentials and ErrTooManySettings refuse one more past the
// caps.
var (
	ErrTooManyCredentials = fmt.Errorf("a tenant holds at most %d credentials; delete one first", MaxCredentials)
	ErrTooManySettings    = fmt.Errorf("a tenant holds defaults for at most %d endpoints; delete some first", MaxSettings)
)

// addCapped sets field of hash to value unless the hash holds max fields
// and not this one (tooMany), and lists t among the tenants with
// credentials first, so a rekey and the expiry watch never miss it.
func (s *Store) addCapped(ctx context.Context, t, hash, field, value string, max int, tooMany error) error {
	if err := s.RDB.SAdd(ctx, tenantsKey, tenant.Of(t)).Err(); err != nil {
		return fmt.Errorf("list the tenant among those with credentials: %w", err)
	}
	added, err := addCappedScript.Run(ctx, s.RDB, []string{hash}, field, value, max).Int()
	if err != nil {
		return fmt.Errorf("store %s: %w", field, err)
	}
	if added == 0 {
		return tooMany
	}
	return nil
}

// Changed is the channel a change of a tenant's credentials, endpoint
// settings or signing secrets is published on (the tenant's name), so
// every worker's Book reads them again at once.
const Changed = "retryd:credentials:changed"

// keys of one tenant. The tag keeps a tenant's credential keys in one
// Redis Cluster slot.
type keys string

func keysOf(t string) keys { return keys("retryd:{cred:" + tenant.Of(t) + "}:") }

func (k keys) creds() string            { return string(k) + "creds" }
func (k keys) use() string              { return string(k) + "use" }
func (k keys) settings() string         { return string(k) + "endpoints" }
func (k keys) signing() string          { return string(k) + "signing" }
func (k keys) token(name string) string { return string(k) + "token:" + name }
func (k keys) lock(name string) string  { return string(k) + "token-lock:" + name }
func (k keys) tokenFailed(name string) string {
	return string(k) + "token-failed:" + name
}

// tenantsKey lists the tenants that have anything here (rekey and the
// expiry watch walk it).
const tenantsKey = "retryd:credentials:tenants"

// stored is a credential as Redis holds it: its public part in clear, its
// Spec sealed.
type stored struct {
	View    View   `json:"view"`
	Sealed  string `json:"sealed"`
	Version string `json:"version"`
}

// usage is what workers write about a credential's use.
type usage struct {
	LastUsedAt int64  `json:"lastUsedAt,omitempty"`
	LastError  string `json:"lastError,omitempty"`
	Failures   int    `json:"failures,omitempty"`
}

// Store keeps the tenants' credentials, endpoint settings and signing
// secrets, sealed with Keys.
type Store struct {
	RDB  redis.UniversalClient
	Keys *Keyring
}

func sealContext(t, kind, name string) string { return kind + "\x00" + tenant.Of(t) + "\x00" + name }

// Put stores spec as tenant t's credential name, replacing one of that
// name; created says it is new.
func (s *Store) Put(ctx context.Context, t, name string, spec *Spec, now time.Time) (View, bool, error) {
	plain, err := json.Marshal(spec)
	if err != nil {
		return View{}, false, err
	}
	sealed, err := s.Keys.Seal(plain, sealContext(t, "credential", name))
	if err != nil {
		return View{}, false, err
	}
	k := keysOf(t)
	v := spec.view()
	v.Name, v.Tenant, v.CreatedAt, v.UpdatedAt = name, tenant.Of(t), now.UTC(), now.UTC()
	old, err := s.read(ctx, t, name)
	switch {
	case err == nil:
		v.CreatedAt = old.View.CreatedAt
	case !errors.Is(err, ErrNotFound):
		return View{}, false, err
	}
	rec, _ := json.Marshal(stored{View: v, Sealed: sealed, Version: newVersion(now)})
	if err := s.addCapped(ctx, t, k.creds(), name, string(rec), MaxCredentials, ErrTooManyCredentials); err != nil {
		return View{}, false, err
	}
	_, err = s.RDB.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, k.use(), name)
		p.Del(ctx, k.token(name), k.tokenFailed(name))
		return nil
	})
	if err != nil {
		return View{}, false, fmt.Errorf("store credential: %w", err)
	}
	created := old == nil
	s.changed(ctx, t)
	return v, created, nil
}

// newVersion names one Put of a credential: workers key what they made of
// it (the opened spec, its client, its token) by it. The time alone is not
// enough: a clock that did not move between two Puts (a coarse or a test
// clock) would leave workers with the old credential.
func newVersion(now time.Time) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return strconv.FormatInt(now.UnixNano(), 36) + "." + hex.EncodeToString(b)
}

// changed tells the workers that t's credentials changed. Best effort: a
// worker rereads within its refresh interval anyway.
func (s *Store) changed(ctx context.Context, t string) {
	s.RDB.Publish(ctx, Changed, tenant.Of(t))
}

func (s *Store) read(ctx context.Context, t, name string) (*stored, error) {
	raw, err := s.RDB.HGet(ctx, keysOf(t).creds(), name).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read credential: %w", err)
	}
	return decodeStored(raw)
}

func decodeStored(raw string) (*stored, error) {
	var st stored
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("credential record does not parse: %w", err)
	}
	return &st, nil
}

// withUse adds what workers wrote to v.
func withUse(v View, raw string) View {
	var u usage
	if raw == "" || json.Unmarshal([]byte(raw), &u) != nil {
		return v
	}
	if u.LastUsedAt > 0 {
		at := time.UnixMilli(u.LastUsedAt).UTC()
		v.LastUsedAt = &at
	}
	v.LastError = u.LastError
	return v
}

// Get is tenant t's credential name, as the API shows it.
func (s *Store) Get(ctx context.Context, t, name string) (View, error) {
	st, err := s.read(ctx, t, name)
	if err != nil {
		return View{}, err
	}
	u, _ := s.RDB.HGet(ctx, keysOf(t).use(), name).Result()
	return withUse(st.View, u), nil
}

// TypeOf is the type of tenant t's credential name (ErrNotFound when it
// has none): a submission naming it is checked with it.
func (s *Store) TypeOf(ctx context.Context, t, name string) (string, error) {
	st, err := s.read(ctx, t, name)
	if err != nil {
		return "", err
	}
	return st.View.Type, nil
}

// List is tenant t's credentials, by name.
func (s *Store) List(ctx context.Context, t string) ([]View, error) {
	k := keysOf(t)
	all, err := s.RDB.HGetAll(ctx, k.creds()).Result()
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	use, err := s.RDB.HGetAll(ctx, k.use()).Result()
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	out := make([]View, 0, len(all))
	for name, raw := range all {
		st, err := decodeStored(raw)
		if err != nil {
			return nil, fmt.Errorf("credential %q: %w", name, err)
		}
		out = append(out, withUse(st.View, use[name]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes tenant t's credential name and its cached token; false
// when there was none.
func (s *Store) Delete(ctx context.Context, t, name string) (bool, error) {
	k := keysOf(t)
	var del *redis.IntCmd
	_, err := s.RDB.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, k.creds(), name)
		p.HDel(ctx, k.use(), name)
		p.Del(ctx, k.token(name), k.tokenFailed(name))
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("delete credential: %w", err)
	}
	s.changed(ctx, t)
	return del.Val() > 0, nil
}

// open decrypts a stored credential of tenant t.
func (s *Store) open(t, name string, st *stored) (*Spec, error) {
	plain, err := s.Keys.Open(st.Sealed, sealContext(t, "credential", name))
	if err != nil {
		return nil, err
	}
	var spec Spec
	if err := json.Unmarshal(plain, &spec); err != nil {
		return nil, fmt.Errorf("credential %q does not parse once opened: %w", name, err)
	}
	return &spec, nil
}

// Settings are a tenant's defaults for one endpoint: the credential and
// proxy its requests use when they name none.
type Settings struct {
	Endpoint   string `json:"endpoint"`
	Credential string `json:"credential,omitempty"`
	Proxy      string `json:"proxy,omitempty"`
}

// PutSettings sets tenant t's defaults for endpoint; empty settings remove
// them.
func (s *Store) PutSettings(ctx context.Context, t string, set Settings) error {
	k := keysOf(t)
	var err error
	if set.Credential == "" && set.Proxy == "" {
		err = s.RDB.HDel(ctx, k.settings(), set.Endpoint).Err()
	} else {
		raw, _ := json.Marshal(set)
		err = s.addCapped(ctx, t, k.settings(), set.Endpoint, string(raw), MaxSettings, ErrTooManySettings)
	}
	if err != nil {
		return fmt.Errorf("store endpoint settings: %w", err)
	}
	s.changed(ctx, t)
	return nil
}

// GetSettings is tenant t's defaults for endpoint (empty when none).
func (s *Store) GetSettings(ctx context.Context, t, endpoint string) (Settings, error) {
	raw, err := s.RDB.HGet(ctx, keysOf(t).settings(), endpoint).Result()
	if errors.Is(err, redis.Nil) {
		return Settings{Endpoint: endpoint}, nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("read endpoint settings: %w", err)
	}
	var set Settings
	if err := json.Unmarshal([]byte(raw), &set); err != nil {
		return Settings{}, fmt.Errorf("endpoint settings do not parse: %w", err)
	}
	return set, nil
}

// ListSettings is every endpoint default of tenant t, by endpoint.
func (s *Store) ListSettings(ctx context.Context, t string) ([]Settings, error) {
	all, err := s.RDB.HGetAll(ctx, keysOf(t).settings()).Result()
	if err != nil {
		return nil, fmt.Errorf("list endpoint settings: %w", err)
	}
	out := make([]Settings, 0, len(all))
	for _, raw := range all {
		var set Settings
		if json.Unmarshal([]byte(raw), &set) == nil {
			out = append(out, set)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint < out[j].Endpoint })
	return out, nil
}
