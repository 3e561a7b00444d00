package sign

import (
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
