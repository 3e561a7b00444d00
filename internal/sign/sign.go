// Package sign signs what retryd sends so a receiver can tell it came from
// retryd and was not replayed: Standard Webhooks signatures
// (https://www.standardwebhooks.com) on every delivery and callback, with
// several secrets at once for rotation.
package sign

import (
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

// secretPrefix starts every Standard Webhooks secret; the rest is base64.
const secretPrefix = "whsec_"

// Webhooks signs with one or more secrets, newest first.
type Webhooks struct {
	keys [][]byte
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
		if err != nil || len(key) < 16 {
			return nil, fmt.Errorf("secret %d is not whsec_ followed by at least 16 bytes in base64", i+1)
		}
		w.keys = append(w.keys, key)
	}
	return w, nil
}

// Signature is the webhook-signature value of a message: "v1,<base64
// HMAC-SHA256 of id.timestamp.body>" for each secret, space-separated.
func (w *Webhooks) Signature(id string, ts int64, body []byte) string {
	signed := []byte(id + "." + strconv.FormatInt(ts, 10) + ".")
	signed = append(signed, body...)
	sigs := make([]string, len(w.keys))
	for i, k := range w.keys {
		m := hmac.New(sha256.New, k)
		m.Write(signed)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(sigs, " ")
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
