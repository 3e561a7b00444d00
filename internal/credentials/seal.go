package credentials

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// sealPrefix starts every sealed value, so a value that is not one (or
// one of a later format) is told apart from a wrong key.
const sealPrefix = "rs1"

// ErrNoKeys refuses to store a secret when no key is configured.
var ErrNoKeys = errors.New("no secrets key: set SECRETS_KEYS (comma-separated base64 32-byte keys) to store credentials")

// Keyring holds the keys of SECRETS_KEYS: the first seals, every one
// opens. A sealed value is "rs1.<key id>.<base64 nonce||ciphertext>": the
// key id (the first 8 hex digits of the key's SHA-256) is in clear, so a
// value names the key that opens it and a rekey finds what it must redo.
type Keyring struct {
	ids  []string
	aead map[string]cipher.AEAD
}

// ParseKeys reads SECRETS_KEYS. An empty value gives a nil keyring, with
// which nothing can be sealed (ErrNoKeys) or opened.
func ParseKeys(v string) (*Keyring, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	var keys [][]byte
	for i, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		key, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			key, err = base64.RawStdEncoding.DecodeString(s)
		}
		if err != nil {
			return nil, fmt.Errorf("key %d is not base64 (make one with: openssl rand -base64 32)", i+1)
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("key %d is %d bytes; AES-256 needs 32 (make one with: openssl rand -base64 32)", i+1, len(key))
		}
		keys = append(keys, key)
	}
	return NewKeyring(keys...)
}

// NewKeyring makes a keyring of 32-byte keys, the first sealing.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	k := &Keyring{aead: map[string]cipher.AEAD{}}
	for i, key := range keys {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		sum := sha256.Sum256(key)
		id := hex.EncodeToString(sum[:4])
		if _, dup := k.aead[id]; dup {
			return nil, fmt.Errorf("key %d is listed twice", i+1)
		}
		k.ids = append(k.ids, id)
		k.aead[id] = gcm
	}
	if len(k.ids) == 0 {
		return nil, errors.New("no keys")
	}
	return k, nil
}

// DevKeyring is -dev's own key: random, so what it seals lives as long as
// the process's Redis data is read by the same process.
func DevKeyring() *Keyring {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	k, _ := NewKeyring(key)
	return k
}

// Len is how many keys the keyring holds (0 for none).
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	return len(k.ids)
}

// SealID is the id of the key that seals.
func (k *Keyring) SealID() string {
	if k == nil {
		return ""
	}
	return k.ids[0]
}

// Seal encrypts plain under the first key, bound to context (what the
// value is and whose: a sealed value moved to another name or tenant does
// not open).
func (k *Keyring) Seal(plain []byte, context string) (string, error) {
	if k == nil {
		return "", ErrNoKeys
	}
	gcm := k.aead[k.ids[0]]
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	out := gcm.Seal(nonce, nonce, plain, []byte(context))
	return sealPrefix + "." + k.ids[0] + "." + base64.RawStdEncoding.EncodeToString(out), nil
}

// KeyOf is the id of the key that sealed v.
func KeyOf(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 || parts[0] != sealPrefix {
		return ""
	}
	return parts[1]
}

// Open decrypts a value Seal made with the same context.
func (k *Keyring) Open(v, context string) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKeys
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 || parts[0] != sealPrefix {
		return nil, errors.New("not a sealed value")
	}
	gcm, ok := k.aead[parts[1]]
	if !ok {
		return nil, fmt.Errorf("sealed under key %s, which SECRETS_KEYS does not hold (keep the old key listed after the new one until a rekey has run)", parts[1])
	}
	raw, err := base64.RawStdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) < gcm.NonceSize() {
		return nil, errors.New("sealed value is damaged")
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], []byte(context))
	if err != nil {
		return nil, fmt.Errorf("sealed value does not open under key %s: damaged, or moved from another name", parts[1])
	}
	return plain, nil
}
