package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestQStashTokenIsAnHS256JWTOverTheBody(t *testing.T) {
	t.Parallel()
	q := &QStash{Current: "sig_current"}
	now := time.Unix(1700000000, 0)
	tok := q.Token("https://e.com/hook", []byte("hello"), now)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", tok)
	}
	m := hmac.New(sha256.New, []byte("sig_current"))
	m.Write([]byte(parts[0] + "." + parts[1]))
	if base64.RawURLEncoding.EncodeToString(m.Sum(nil)) != parts[2] {
		t.Error("signature is not HMAC-SHA256 with the current key")
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("hello"))
	if claims["iss"] != "Upstash" || claims["sub"] != "https://e.com/hook" || claims["body"] != base64.RawURLEncoding.EncodeToString(sum[:]) ||
		claims["exp"] != float64(now.Unix()+300) {
		t.Errorf("claims %v", claims)
	}
	if (*QStash)(nil).Token("u", nil, now) != "" || (&QStash{}).Token("u", nil, now) != "" {
		t.Error("a signer without a key signed")
	}
}
