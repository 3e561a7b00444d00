package credentials

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestKeyringSealOpensWithTheSameKeyAndContext(t *testing.T) {
	t.Parallel()
	k := keyring(t, testKey(1))
	sealed, err := k.Seal([]byte("s3cret value"), "credential\x00acme\x00partner")
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if strings.Contains(sealed, "s3cret") {
		t.Errorf("sealed value %q holds the plain text", sealed)
	}
	if got := KeyOf(sealed); got != k.SealID() || got == "" {
		t.Errorf("KeyOf = %q, want the sealing key's id %q", got, k.SealID())
	}
	plain, err := k.Open(sealed, "credential\x00acme\x00partner")
	if err != nil || string(plain) != "s3cret value" {
		t.Fatalf("Open = %q, %v; want the plain text", plain, err)
	}
	again, _ := k.Seal([]byte("s3cret value"), "credential\x00acme\x00partner")
	if again == sealed {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
}

func TestKeyringOpensUnderAnOldKeyWhileItIsListed(t *testing.T) {
	t.Parallel()
	a, b := testKey(1), testKey(100)
	sealed, err := keyring(t, a).Seal([]byte("v"), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	rotated := keyring(t, b, a)
	if plain, err := rotated.Open(sealed, "ctx"); err != nil || string(plain) != "v" {
		t.Errorf("keyring [B, A] opened a value of A: %q, %v; want v", plain, err)
	}
	if rotated.SealID() == KeyOf(sealed) {
		t.Error("keyring [B, A] seals under A; want B")
	}
	_, err = keyring(t, b).Open(sealed, "ctx")
	if err == nil {
		t.Fatal("keyring [B] opened a value sealed under A")
	}
	if !strings.Contains(err.Error(), KeyOf(sealed)) {
		t.Errorf("error %q does not name the missing key %s", err, KeyOf(sealed))
	}
}

func TestKeyringValueDoesNotOpenInAnotherContext(t *testing.T) {
	t.Parallel()
	k := keyring(t, testKey(1))
	sealed, _ := k.Seal([]byte("v"), sealContext("acme", "credential", "partner"))
	for _, ctx := range []string{
		sealContext("globex", "credential", "partner"),
		sealContext("acme", "credential", "other"),
		sealContext("acme", "signing", "partner"),
	} {
		if _, err := k.Open(sealed, ctx); err == nil {
			t.Errorf("value of acme/partner opened in context %q", ctx)
		}
	}
	for _, damaged := range []string{"", "plain", "rs1." + k.SealID() + ".!!", "rs1." + k.SealID() + ".AAAA", sealed[:len(sealed)-2]} {
		if _, err := k.Open(damaged, sealContext("acme", "credential", "partner")); err == nil {
			t.Errorf("Open(%q) opened", damaged)
		}
	}
}

func TestNilKeyringRefusesToSeal(t *testing.T) {
	t.Parallel()
	k, err := ParseKeys("  ")
	if err != nil || k != nil {
		t.Fatalf("ParseKeys(blank) = %v, %v; want nil, nil", k, err)
	}
	if _, err := k.Seal([]byte("v"), "ctx"); !errors.Is(err, ErrNoKeys) {
		t.Errorf("nil keyring Seal: %v, want ErrNoKeys", err)
	}
	if _, err := k.Open("rs1.x.y", "ctx"); !errors.Is(err, ErrNoKeys) {
		t.Errorf("nil keyring Open: %v, want ErrNoKeys", err)
	}
	if !strings.Contains(ErrNoKeys.Error(), "SECRETS_KEYS") {
		t.Errorf("ErrNoKeys %q does not say which variable to set", ErrNoKeys)
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	a := base64.StdEncoding.EncodeToString(testKey(1))
	b := base64.RawStdEncoding.EncodeToString(testKey(2))
	k, err := ParseKeys(" " + a + " , " + b + " ")
	if err != nil {
		t.Fatalf("ParseKeys of two keys: %v", err)
	}
	if want := keyring(t, testKey(1)).SealID(); k.SealID() != want {
		t.Errorf("SealID = %s, want the first key's %s", k.SealID(), want)
	}
	for _, tc := range []struct{ in, want string }{
		{"not base64!", "key 1 is not base64"},
		{a + ",%%%", "key 2 is not base64"},
		{base64.StdEncoding.EncodeToString([]byte("short")), "key 1 is 5 bytes; AES-256 needs 32"},
		{a + "," + a, "key 2 is listed twice"},
		{a + ",", "key 2 is 0 bytes"},
	} {
		if _, err := ParseKeys(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKeys(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	a := base64.StdEncoding.EncodeToString(testKey(1))
	for _, s := range []string{"", ",", a, a + "," + a, a + ",x", "====", " \t", strings.Repeat("A", 43), a[:43]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKeys(s)
		if err != nil || k == nil {
			return
		}
		sealed, err := k.Seal([]byte("v"), "ctx")
		if err != nil {
			t.Fatalf("a parsed keyring does not seal: %v", err)
		}
		if plain, err := k.Open(sealed, "ctx"); err != nil || string(plain) != "v" {
			t.Fatalf("a parsed keyring does not open its own seal: %v", err)
		}
	})
}
