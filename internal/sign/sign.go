// Package sign signs what retryd sends so a receiver can tell it came from
// retryd and was not replayed: Standard Webhooks signatures
// (https://www.standardwebhooks.com) on every delivery and callback, with
// several secrets at once for rotation. A secret is an HMAC key (whsec_,
// signing v1) or an ed25519 key pair (whsk_ kept by retryd, whpk_ given to
// the receiver, signing v1a). Verify is the receiver's side, for tests and
// for receivers written in Go.
package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Webhooks signs with one or more secrets, newest first.
type Webhooks struct {
	keys []Secret
}

// ParseSecrets reads "whsec_<base64>" secrets (SIGNING_SECRETS). An empty
// list gives a nil signer: nothing is signed.
func ParseSecrets(secrets []string) (*Webhooks, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	w := &Webhooks{}
	for i, s := range secrets {
		raw, ok := strings.CutPrefix(s, secretPrefix)
		if !ok {
			return nil, fmt.Errorf("secret %d does not start with %s", i+1, secretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(raw)
		if err != nil || len(key) < minHMACKey {
			return nil, fmt.Errorf("secret %d is not whsec_ followed by at least %d bytes in base64", i+1, minHMACKey)
		}
		w.keys = append(w.keys, Secret{Kind: KindHMAC, Key: key})
	}
	return w, nil
}

// FromSecrets signs with secrets of either kind, in the order given
// (newest first). No secrets give a nil signer. A secret that Validate
// refuses is left out rather than kept to fail at delivery time (ed25519
// would panic); callers that must know check Validate first.
func FromSecrets(secrets []Secret) *Webhooks {
	w := &Webhooks{}
	for _, s := range secrets {
		if s.Validate() != nil {
			continue
		}
		// A copy, so the caller reusing its slice cannot change a live signer.
		w.keys = append(w.keys, Secret{Kind: s.Kind, Key: bytes.Clone(s.Key)})
	}
	if len(w.keys) == 0 {
		return nil
	}
	return w
}

// Signature is the webhook-signature value of a message, one signature per
// secret in order, space-separated: "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" for an HMAC secret, "v1a,<base64 ed25519 signature
// of id.timestamp.body>" for an ed25519 one. A nil signer gives "".
func (w *Webhooks) Signature(id string, ts int64, body []byte) string {
	if w == nil {
		return ""
	}
	signed := signedContent(id, strconv.FormatInt(ts, 10), body)
	sigs := make([]string, len(w.keys))
	for i, k := range w.keys {
		if k.Kind == KindEd25519 {
			sigs[i] = "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(k.Key, signed))
			continue
		}
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(hmacSHA256(k.Key, signed))
	}
	return strings.Join(sigs, " ")
}

func signedContent(id, ts string, body []byte) []byte {
	signed := make([]byte, 0, len(id)+len(ts)+2+len(body))
	signed = append(signed, id...)
	signed = append(signed, '.')
	signed = append(signed, ts...)
	signed = append(signed, '.')
	return append(signed, body...)
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// Sign sets the three Standard Webhooks headers on h for a message of id
// sent at now with body. A nil signer does nothing.
func (w *Webhooks) Sign(h http.Header, id string, now time.Time, body []byte) {
	if w == nil {
		return
	}
	ts := now.Unix()
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, w.Signature(id, ts, body))
}
