package sign

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The test vector of the Standard Webhooks reference implementations.
func TestSignatureMatchesTheReferenceVector(t *testing.T) {
	t.Parallel()
	w, err := ParseSecrets([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		t.Fatal(err)
	}
	got := w.Signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}

func TestEverySecretSignsForRotation(t *testing.T) {
	t.Parallel()
	w, err := ParseSecrets([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_" + strings.Repeat("QUJD", 8)})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	w.Sign(h, "r1", time.Unix(1700000000, 0), []byte("body"))
	if h.Get(HeaderID) != "r1" || h.Get(HeaderTimestamp) != "1700000000" {
		t.Errorf("headers %v", h)
	}
	if sigs := strings.Fields(h.Get(HeaderSignature)); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || sigs[0] == sigs[1] {
		t.Errorf("signatures %q, want two distinct v1 signatures", h.Get(HeaderSignature))
	}
	var none *Webhooks
	h2 := http.Header{}
	none.Sign(h2, "r1", time.Now(), nil)
	if len(h2) != 0 {
		t.Errorf("a nil signer set %v", h2)
	}
}

func TestBadSecretsAreRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := ParseSecrets([]string{s}); err == nil {
			t.Errorf("secret %q accepted", s)
		}
	}
}

// The signed content of a v1a signature is the v1 one, and the signature
// checks with the public key alone (crypto/ed25519, not Verify).
func TestEd25519SignsV1aOverIDTimestampBody(t *testing.T) {
	t.Parallel()
	s := fixedEd25519(t)
	w := FromSecrets([]Secret{s})
	got := w.Signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	b64, ok := strings.CutPrefix(got, "v1a,")
	if !ok {
		t.Fatalf("signature %q, want v1a,<base64>", got)
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		t.Fatalf("signature %q is not 64 bytes of standard base64: %v", got, err)
	}
	pub, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Public(), "whpk_"))
	if !ed25519.Verify(pub, []byte(`msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}`), sig) {
		t.Error("the v1a signature does not verify with the whpk_ key")
	}
	// ed25519 is deterministic: a change here changes what receivers see.
	if again := w.Signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)); again != got {
		t.Errorf("signature %s then %s", got, again)
	}
}

func TestMixedSignerSignsOncePerKeyInOrder(t *testing.T) {
	t.Parallel()
	h, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	ed := fixedEd25519(t)
	v1 := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	v1a := FromSecrets([]Secret{ed}).Signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	for _, tc := range []struct {
		keys []Secret
		want string
	}{
		{[]Secret{h, ed}, v1 + " " + v1a},
		{[]Secret{ed, h}, v1a + " " + v1},
	} {
		got := FromSecrets(tc.keys).Signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
		if got != tc.want {
			t.Errorf("signature\n%s\nwant\n%s", got, tc.want)
		}
	}
}
