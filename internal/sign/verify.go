package sign

import (
	"crypto/ed25519"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a message's timestamp may be from the
// receiver's clock when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// maxSignatures bounds the signatures Verify tries, so a hostile header of
// thousands of entries costs a receiver little; retryd sends one per
// secret, and a tenant has few.
const maxSignatures = 16

// Errors of Verify, for errors.Is.
var (
	ErrMissingHeaders = errors.New("webhook-id, webhook-timestamp or webhook-signature missing")
	ErrTimestamp      = errors.New("webhook-timestamp outside the tolerance")
	ErrNoMatch        = errors.New("no signature matches a trusted key")
)

// Verify checks a received message the way a Standard Webhooks receiver
// does: its timestamp within tolerance of now (DefaultTolerance when
// tolerance is zero or less), then at least one signature in
// webhook-signature made by one of keys: "whsec_" secrets check "v1"
// signatures, "whpk_" public keys check "v1a" ones. Signatures of other
// versions are ignored. Giving the old and the new key verifies across a
// rotation.
func Verify(h http.Header, body []byte, keys []string, now time.Time, tolerance time.Duration) error {
	var hmacKeys [][]byte
	var pubKeys []ed25519.PublicKey
	for i, k := range keys {
		if strings.HasPrefix(k, publicKeyPrefix) {
			pub, err := parsePublicKey(k)
			if err != nil {
				return fmt.Errorf("sign: key %d: %w", i+1, err)
			}
			pubKeys = append(pubKeys, pub)
			continue
		}
		if !strings.HasPrefix(k, secretPrefix) {
			return fmt.Errorf("sign: key %d: %w: a receiver verifies with %s (HMAC) or %s (ed25519) keys", i+1, ErrBadSecret, secretPrefix, publicKeyPrefix)
		}
		s, err := ParseSecret(k)
		if err != nil {
			return fmt.Errorf("sign: key %d: %w", i+1, err)
		}
		hmacKeys = append(hmacKeys, s.Key)
	}

	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not a unix time", ErrTimestamp, tsText)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Bounds around now rather than the difference ts-now, which a
	// timestamp near the int64 limits would overflow into range.
	tol := int64(tolerance / time.Second)
	if ts < now.Unix()-tol || ts > now.Unix()+tol {
		return fmt.Errorf("%w: %d, now %d, tolerance %s", ErrTimestamp, ts, now.Unix(), tolerance)
	}

	signed := signedContent(id, tsText, body)
	for n, sig := range strings.Fields(sigs) {
		if n == maxSignatures {
			break
		}
		version, b64, ok := strings.Cut(sig, ",")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		switch version {
		case "v1":
			for _, k := range hmacKeys {
				if hmac.Equal(hmacSHA256(k, signed), got) {
					return nil
				}
			}
		case "v1a":
			for _, pub := range pubKeys {
				if len(got) == ed25519.SignatureSize && ed25519.Verify(pub, signed, got) {
					return nil
				}
			}
		}
	}
	return ErrNoMatch
}
