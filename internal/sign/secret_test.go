package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// fixedEd25519 is an ed25519 secret that is the same on every run.
func fixedEd25519(t *testing.T) Secret {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return Secret{Kind: KindEd25519, Key: ed25519.NewKeyFromSeed(seed)}
}

func TestNewSecretMakesKeysThatParseBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, prefix string
		keyLen       int
		public       bool
	}{
		{KindHMAC, "whsec_", 32, false},
		{KindEd25519, "whsk_", 64, true},
	} {
		s, err := NewSecret(tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		if s.Kind != tc.kind || len(s.Key) != tc.keyLen {
			t.Errorf("%s: kind %q, key of %d bytes, want %d", tc.kind, s.Kind, len(s.Key), tc.keyLen)
		}
		if !strings.HasPrefix(s.Text(), tc.prefix) {
			t.Errorf("%s: text %.8s…, want prefix %s", tc.kind, s.Text(), tc.prefix)
		}
		if (s.Public() != "") != tc.public {
			t.Errorf("%s: public %q", tc.kind, s.Public())
		}
		back, err := ParseSecret(s.Text())
		if err != nil || back.Kind != s.Kind || !bytes.Equal(back.Key, s.Key) {
			t.Errorf("%s: ParseSecret(Text()) = %v, %v", tc.kind, back.Kind, err)
		}
		other, _ := NewSecret(tc.kind)
		if bytes.Equal(other.Key, s.Key) || other.Fingerprint() == s.Fingerprint() {
			t.Errorf("%s: two new secrets share a key or fingerprint", tc.kind)
		}
	}
	if _, err := NewSecret("rsa"); err == nil {
		t.Error("kind rsa accepted")
	}
}

func TestEd25519SecretWritesSeedThenPublicKey(t *testing.T) {
	t.Parallel()
	s := fixedEd25519(t)
	pub := s.Key[32:]
	if want := "whsk_" + base64.StdEncoding.EncodeToString(s.Key); s.Text() != want {
		t.Errorf("text %s, want %s", s.Text(), want)
	}
	if want := "whpk_" + base64.StdEncoding.EncodeToString(pub); s.Public() != want {
		t.Errorf("public %s, want %s", s.Public(), want)
	}
}

// The fingerprint is documented: a receiver can compute an ed25519 one
// from whpk_, and an HMAC one hashes a label with the key.
func TestFingerprintIsTheDocumentedHash(t *testing.T) {
	t.Parallel()
	ed := fixedEd25519(t)
	sum := sha256.Sum256(ed.Key[32:])
	if want := hex.EncodeToString(sum[:])[:16]; ed.Fingerprint() != want {
		t.Errorf("ed25519 fingerprint %s, want %s", ed.Fingerprint(), want)
	}
	key := bytes.Repeat([]byte{7}, 32)
	sum = sha256.Sum256(append([]byte("retryd signing-secret fingerprint\x00"), key...))
	h := Secret{Kind: KindHMAC, Key: key}
	if want := hex.EncodeToString(sum[:])[:16]; h.Fingerprint() != want {
		t.Errorf("hmac fingerprint %s, want %s", h.Fingerprint(), want)
	}
	if bare := sha256.Sum256(key); strings.HasPrefix(hex.EncodeToString(bare[:]), h.Fingerprint()) {
		t.Error("an HMAC fingerprint is the bare hash of the key")
	}
}

func TestParseSecretRefusesWithAClearMessage(t *testing.T) {
	t.Parallel()
	ed := fixedEd25519(t)
	mismatched := bytes.Clone(ed.Key)
	mismatched[40] ^= 1
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct{ name, text, want string }{
		{"no prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "starts with whsec_ (HMAC) or whsk_ (ed25519)"},
		{"public key", "whpk_" + b64(ed.Key[32:]), "starts with whsec_ (HMAC) or whsk_ (ed25519)"},
		{"hmac not base64", "whsec_not base64!", "what follows whsec_ is not standard base64"},
		{"ed25519 not base64", "whsk_***", "what follows whsk_ is not standard base64"},
		{"short hmac", "whsec_" + b64(make([]byte, 15)), "at least 16 bytes, this one holds 15"},
		{"empty hmac", "whsec_", "at least 16 bytes, this one holds 0"},
		{"ed25519 seed only", "whsk_" + b64(ed.Key[:32]), "64-byte ed25519 private key (seed then public key), this one holds 32 bytes"},
		{"ed25519 too long", "whsk_" + b64(append(bytes.Clone(ed.Key), 0)), "this one holds 65 bytes"},
		{"ed25519 halves disagree", "whsk_" + b64(mismatched), "public half is not the public key of its seed"},
	} {
		_, err := ParseSecret(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
			continue
		}
		if !errors.Is(err, ErrBadSecret) {
			t.Errorf("%s: error %v does not wrap ErrBadSecret", tc.name, err)
		}
		if raw := tc.text[strings.Index(tc.text, "_")+1:]; len(raw) > 4 && strings.Contains(err.Error(), raw) {
			t.Errorf("%s: error %q quotes the secret", tc.name, err)
		}
	}
	if _, err := ParseSecret("whsec_" + b64(make([]byte, 16))); err != nil {
		t.Errorf("a 16-byte HMAC key refused: %v", err)
	}
}

// FromSecrets drops a secret that could not sign instead of panicking at
// delivery time, and keeps its own copy of the keys.
func TestFromSecretsKeepsValidCopies(t *testing.T) {
	t.Parallel()
	if FromSecrets(nil) != nil || FromSecrets([]Secret{{Kind: KindEd25519, Key: make([]byte, 10)}}) != nil {
		t.Error("no usable secrets gave a signer")
	}
	h := Secret{Kind: KindHMAC, Key: bytes.Repeat([]byte{1}, 32)}
	w := FromSecrets([]Secret{{Kind: "rsa", Key: h.Key}, h, {Kind: KindEd25519, Key: make([]byte, 63)}})
	before := w.Signature("m", 1, nil)
	h.Key[0] = 2
	if got := w.Signature("m", 1, nil); got != before || len(strings.Fields(got)) != 1 {
		t.Errorf("signature %q then %q, want one unchanged v1 signature", before, got)
	}
}

func FuzzParseSecret(f *testing.F) {
	seed := make([]byte, 32)
	ed := ed25519.NewKeyFromSeed(seed)
	for _, s := range []string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"whsk_" + base64.StdEncoding.EncodeToString(ed),
		"whsk_" + base64.StdEncoding.EncodeToString(ed[:32]),
		"whpk_" + base64.StdEncoding.EncodeToString(ed[32:]),
		"whsec_", "whsk_", "whsec_====", "whsec_c2hvcnQ=", "whsk_\n\r", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSecret(text)
		if err != nil {
			return
		}
		back, err := ParseSecret(s.Text())
		if err != nil || back.Kind != s.Kind || !bytes.Equal(back.Key, s.Key) {
			t.Fatalf("accepted %q but its Text does not parse back: %v", text, err)
		}
		_ = s.Fingerprint()
		_ = s.Public()
		if w := FromSecrets([]Secret{s}); w == nil || w.Signature("m", 1, []byte("b")) == "" {
			t.Fatalf("accepted %q but it does not sign", text)
		}
	})
}
