package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Kinds of Secret.
const (
	KindHMAC    = "hmac"
	KindEd25519 = "ed25519"
)

// Prefixes of the Standard Webhooks key texts; the rest is standard base64.
const (
	secretPrefix    = "whsec_" // HMAC key
	privatePrefix   = "whsk_"  // ed25519 private key: seed then public key, 64 bytes
	publicKeyPrefix = "whpk_"  // ed25519 public key, 32 bytes
)

// minHMACKey is the shortest HMAC key accepted. The specification asks
// for at least 24 bytes; 16 is what SIGNING_SECRETS has always accepted,
// and NewSecret makes 32.
const minHMACKey = 16

// hmacKeyLen is the size of the HMAC keys NewSecret makes.
const hmacKeyLen = 32

// fingerprintLabel keeps an HMAC key's fingerprint from being a bare
// SHA-256 of the key, a value another system might use for something else.
const fingerprintLabel = "retryd signing-secret fingerprint\x00"

// ErrBadSecret is wrapped by every refusal of ParseSecret and Validate.
var ErrBadSecret = errors.New("bad signing secret")

// A Secret is one signing key of a signer: an HMAC key (Kind "hmac", Key
// the raw key bytes, signing "v1,") or an ed25519 key pair (Kind
// "ed25519", Key the 64-byte private key, seed then public key, signing
// "v1a,").
type Secret struct {
	Kind string
	Key  []byte
}

// NewSecret makes a random secret of kind "hmac" (32 bytes) or "ed25519".
func NewSecret(kind string) (Secret, error) {
	switch kind {
	case KindHMAC:
		key := make([]byte, hmacKeyLen)
		if _, err := rand.Read(key); err != nil {
			return Secret{}, fmt.Errorf("sign: random HMAC key: %w", err)
		}
		return Secret{Kind: KindHMAC, Key: key}, nil
	case KindEd25519:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return Secret{}, fmt.Errorf("sign: ed25519 key: %w", err)
		}
		return Secret{Kind: KindEd25519, Key: priv}, nil
	}
	return Secret{}, fmt.Errorf("sign: no secret kind %q, want %q or %q", kind, KindHMAC, KindEd25519)
}

// Text is the secret as Standard Webhooks writes it: "whsec_<base64>" for
// HMAC (what the tenant is shown once), "whsk_<base64>" of the 64-byte
// private key for ed25519 (kept by retryd; the tenant gets Public).
func (s Secret) Text() string {
	prefix := secretPrefix
	if s.Kind == KindEd25519 {
		prefix = privatePrefix
	}
	return prefix + base64.StdEncoding.EncodeToString(s.Key)
}

// Public is the "whpk_<base64>" public key a receiver verifies an ed25519
// secret's signatures with; "" for HMAC, whose key is itself the secret.
func (s Secret) Public() string {
	pub := s.publicKey()
	if pub == nil {
		return ""
	}
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

func (s Secret) publicKey() ed25519.PublicKey {
	if s.Kind != KindEd25519 || len(s.Key) != ed25519.PrivateKeySize {
		return nil
	}
	return ed25519.PrivateKey(s.Key).Public().(ed25519.PublicKey)
}

// Fingerprint names the secret without revealing it, for lists and logs:
// the first 16 hex digits of a SHA-256. For ed25519 it is of the 32-byte
// public key alone, so a receiver holding the whpk_ text can compute it
// (base64-decode what follows "whpk_", SHA-256, first 16 hex digits). For
// HMAC it is of "retryd signing-secret fingerprint", a zero byte, then the
// key bytes.
func (s Secret) Fingerprint() string {
	var sum [sha256.Size]byte
	if pub := s.publicKey(); pub != nil {
		sum = sha256.Sum256(pub)
	} else {
		sum = sha256.Sum256(append([]byte(fingerprintLabel), s.Key...))
	}
	return hex.EncodeToString(sum[:8])
}

// Validate says why the secret cannot sign, with the messages of
// ParseSecret, or nil.
func (s Secret) Validate() error {
	switch s.Kind {
	case KindHMAC:
		if len(s.Key) < minHMACKey {
			return fmt.Errorf("%w: a %s secret must hold at least %d bytes, this one holds %d", ErrBadSecret, secretPrefix, minHMACKey, len(s.Key))
		}
		return nil
	case KindEd25519:
		if len(s.Key) != ed25519.PrivateKeySize {
			return fmt.Errorf("%w: a %s secret must hold a %d-byte ed25519 private key (seed then public key), this one holds %d bytes",
				ErrBadSecret, privatePrefix, ed25519.PrivateKeySize, len(s.Key))
		}
		// ed25519.Sign trusts the second half to be the seed's public key;
		// a key whose halves disagree signs what no receiver can verify.
		want := ed25519.NewKeyFromSeed(s.Key[:ed25519.SeedSize])
		if !bytes.Equal(want[ed25519.SeedSize:], s.Key[ed25519.SeedSize:]) {
			return fmt.Errorf("%w: the %s secret's public half is not the public key of its seed", ErrBadSecret, privatePrefix)
		}
		return nil
	}
	return fmt.Errorf("%w: no secret kind %q, want %q or %q", ErrBadSecret, s.Kind, KindHMAC, KindEd25519)
}

// ParseSecret reads "whsec_<base64>" (HMAC) or "whsk_<base64 of the
// 64-byte ed25519 private key>". Its errors wrap ErrBadSecret and never
// quote the text, which is a secret.
func ParseSecret(text string) (Secret, error) {
	kind, raw := KindHMAC, ""
	var ok bool
	if raw, ok = strings.CutPrefix(text, secretPrefix); !ok {
		kind = KindEd25519
		if raw, ok = strings.CutPrefix(text, privatePrefix); !ok {
			return Secret{}, fmt.Errorf("%w: a secret starts with %s (HMAC) or %s (ed25519)", ErrBadSecret, secretPrefix, privatePrefix)
		}
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: what follows %s is not standard base64: %w", ErrBadSecret, text[:len(text)-len(raw)], err)
	}
	s := Secret{Kind: kind, Key: key}
	if err := s.Validate(); err != nil {
		return Secret{}, err
	}
	return s, nil
}

// parsePublicKey reads "whpk_<base64 of a 32-byte ed25519 public key>".
func parsePublicKey(text string) (ed25519.PublicKey, error) {
	raw, _ := strings.CutPrefix(text, publicKeyPrefix)
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: what follows %s is not standard base64: %w", ErrBadSecret, publicKeyPrefix, err)
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: a %s key must hold %d bytes, this one holds %d", ErrBadSecret, publicKeyPrefix, ed25519.PublicKeySize, len(key))
	}
	return key, nil
}
