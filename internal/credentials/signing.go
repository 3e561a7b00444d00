package credentials

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/sign"
)

// The signing secret kinds.
const (
	HMAC    = sign.KindHMAC
	Ed25519 = sign.KindEd25519
)

// MaxSigningSecrets bounds a tenant's signing secrets: every delivery
// carries one signature per secret.
const MaxSigningSecrets = 10

// ErrTooManySecrets refuses a secret over MaxSigningSecrets.
var ErrTooManySecrets = fmt.Errorf("a tenant holds at most %d signing secrets; delete one first", MaxSigningSecrets)

// SigningSecret is what the API shows of a tenant's signing secret.
type SigningSecret struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	CreatedAt   time.Time `json:"createdAt"`
	Fingerprint string    `json:"fingerprint"`
	// PublicKey is an ed25519 secret's public key (whpk_…), for receivers.
	PublicKey string `json:"publicKey,omitempty"`
}

type storedSecret struct {
	SigningSecret
	Sealed string `json:"sealed"`
}

// CreateSigningSecret makes a new signing secret of kind for tenant t and
// returns it with its text, shown this once: whsec_… (hmac) or the
// whpk_… public key (ed25519, whose private key never leaves retryd).
func (s *Store) CreateSigningSecret(ctx context.Context, t, kind string, now time.Time) (SigningSecret, string, error) {
	var sec SigningSecret
	switch kind {
	case "":
		kind = HMAC
	case HMAC, Ed25519:
	default:
		return sec, "", bad("type", "must be hmac (the default) or ed25519, got %s", names.Quote(kind))
	}
	secret, err := sign.NewSecret(kind)
	if err != nil {
		return sec, "", err
	}
	key, shown := secret.Key, secret.Text()
	sec.Fingerprint, sec.PublicKey = secret.Fingerprint(), secret.Public()
	if kind == Ed25519 {
		// The private key never leaves retryd: receivers get the public one.
		shown = sec.PublicKey
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	sec.ID, sec.Type, sec.CreatedAt = "ss_"+hex.EncodeToString(id), kind, now.UTC()
	sealed, err := s.Keys.Seal(key, sealContext(t, "signing", sec.ID))
	if err != nil {
		return sec, "", err
	}
	raw, _ := json.Marshal(storedSecret{SigningSecret: sec, Sealed: sealed})
	if err := s.addCapped(ctx, t, keysOf(t).signing(), sec.ID, string(raw), MaxSigningSecrets, ErrTooManySecrets); err != nil {
		return sec, "", err
	}
	s.changed(ctx, t)
	return sec, shown, nil
}

// ListSigningSecrets is tenant t's signing secrets, newest first.
func (s *Store) ListSigningSecrets(ctx context.Context, t string) ([]SigningSecret, error) {
	all, err := s.readSecrets(ctx, t)
	if err != nil {
		return nil, err
	}
	out := make([]SigningSecret, len(all))
	for i, st := range all {
		out[i] = st.SigningSecret
	}
	return out, nil
}

func (s *Store) readSecrets(ctx context.Context, t string) ([]storedSecret, error) {
	all, err := s.RDB.HGetAll(ctx, keysOf(t).signing()).Result()
	if err != nil {
		return nil, fmt.Errorf("list signing secrets: %w", err)
	}
	return decodeSecrets(all)
}

func decodeSecrets(all map[string]string) ([]storedSecret, error) {
	out := make([]storedSecret, 0, len(all))
	for id, raw := range all {
		var st storedSecret
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return nil, fmt.Errorf("signing secret %s does not parse: %w", id, err)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// DeleteSigningSecret removes one of tenant t's signing secrets; false
// when it had none of that id.
func (s *Store) DeleteSigningSecret(ctx context.Context, t, id string) (bool, error) {
	n, err := s.RDB.HDel(ctx, keysOf(t).signing(), id).Result()
	if err != nil {
		return false, fmt.Errorf("delete signing secret: %w", err)
	}
	s.changed(ctx, t)
	return n > 0, nil
}

// openSecret decrypts a stored signing secret's key.
func (s *Store) openSecret(t string, st storedSecret) ([]byte, error) {
	return s.Keys.Open(st.Sealed, sealContext(t, "signing", st.ID))
}

// Rekey seals every credential and signing secret of every tenant under
// the first key again, and drops cached tokens (they are fetched anew).
// It returns how many values it resealed.
func (s *Store) Rekey(ctx context.Context) (int, error) {
	if s.Keys == nil {
		return 0, ErrNoKeys
	}
	tenants, err := s.RDB.SMembers(ctx, tenantsKey).Result()
	if err != nil {
		return 0, fmt.Errorf("list tenants with credentials: %w", err)
	}
	n := 0
	for _, t := range tenants {
		k := keysOf(t)
		creds, err := s.RDB.HGetAll(ctx, k.creds()).Result()
		if err != nil {
			return n, fmt.Errorf("read credentials of %s: %w", t, err)
		}
		for name, raw := range creds {
			st, err := decodeStored(raw)
			if err != nil {
				return n, fmt.Errorf("credential %q of %s: %w", name, t, err)
			}
			if KeyOf(st.Sealed) == s.Keys.SealID() {
				continue
			}
			plain, err := s.Keys.Open(st.Sealed, sealContext(t, "credential", name))
			if err != nil {
				return n, fmt.Errorf("credential %q of %s: %w", name, t, err)
			}
			if st.Sealed, err = s.Keys.Seal(plain, sealContext(t, "credential", name)); err != nil {
				return n, err
			}
			out, _ := json.Marshal(st)
			if err := s.replace(ctx, k.creds(), name, raw, string(out)); err != nil {
				return n, err
			}
			s.RDB.Del(ctx, k.token(name))
			n++
		}
		secrets, err := s.RDB.HGetAll(ctx, k.signing()).Result()
		if err != nil {
			return n, fmt.Errorf("read signing secrets of %s: %w", t, err)
		}
		for id, raw := range secrets {
			var st storedSecret
			if err := json.Unmarshal([]byte(raw), &st); err != nil {
				return n, fmt.Errorf("signing secret %s of %s does not parse: %w", id, t, err)
			}
			if KeyOf(st.Sealed) == s.Keys.SealID() {
				continue
			}
			key, err := s.openSecret(t, st)
			if err != nil {
				return n, fmt.Errorf("signing secret %s of %s: %w", id, t, err)
			}
			if st.Sealed, err = s.Keys.Seal(key, sealContext(t, "signing", st.ID)); err != nil {
				return n, err
			}
			out, _ := json.Marshal(st)
			if err := s.replace(ctx, k.signing(), id, raw, string(out)); err != nil {
				return n, err
			}
			n++
		}
		s.changed(ctx, t)
	}
	return n, nil
}

func (s *Store) replace(ctx context.Context, key, field, old, value string) error {
	_, err := replaceScript.Run(ctx, s.RDB, []string{key}, field, old, value).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reseal %s: %w", field, err)
	}
	return nil
}
