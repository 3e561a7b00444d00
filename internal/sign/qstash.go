package sign

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"time"
)

// QStash signs deliveries of requests made through the QStash-compatible
// API the way QStash does: an Upstash-Signature header holding a JWT
// (HS256, keyed with the UTF-8 bytes of the current signing key) whose
// subject is the destination URL and whose "body" claim is the base64url
// SHA-256 of the body. The official Receiver verifies it with the current
// key, then the next one (rotation).
type QStash struct {
	Current, Next string
}

// Token returns the Upstash-Signature value for a delivery of body to url
// at now. A nil signer or one without a current key signs nothing ("").
func (q *QStash) Token(url string, body []byte, now time.Time) string {
	if q == nil || q.Current == "" {
		return ""
	}
	enc := base64.RawURLEncoding
	sum := sha256.Sum256(body)
	var jti [12]byte
	_, _ = rand.Read(jti[:])
	claims, _ := json.Marshal(map[string]any{
		"iss": "Upstash", "sub": url, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"jti": "jwt_" + enc.EncodeToString(jti[:]), "body": enc.EncodeToString(sum[:]),
	})
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	m := hmac.New(sha256.New, []byte(q.Current))
	m.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(m.Sum(nil))
}
