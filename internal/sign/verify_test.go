package sign

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A receiver holding either the old or the new key verifies every message
// signed during a rotation, whatever the kinds of the two keys.
func TestRotationVerifiesWithEitherKey(t *testing.T) {
	t.Parallel()
	// receiverKey is what the tenant configures its receiver with.
	receiverKey := func(s Secret) string {
		if p := s.Public(); p != "" {
			return p
		}
		return s.Text()
	}
	mk := func(kind string) Secret {
		s, err := NewSecret(kind)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Unix(1700000000, 0)
	body := []byte(`{"type":"invoice.paid"}`)
	for _, kinds := range [][2]string{{KindHMAC, KindHMAC}, {KindEd25519, KindHMAC}, {KindHMAC, KindEd25519}, {KindEd25519, KindEd25519}} {
		newKey, oldKey, stranger := mk(kinds[0]), mk(kinds[1]), mk(kinds[0])
		h := http.Header{}
		FromSecrets([]Secret{newKey, oldKey}).Sign(h, "msg_1", now, body)
		for name, keys := range map[string][]string{
			"new":          {receiverKey(newKey)},
			"old":          {receiverKey(oldKey)},
			"stranger+old": {receiverKey(stranger), receiverKey(oldKey)},
		} {
			if err := Verify(h, body, keys, now.Add(time.Minute), time.Minute); err != nil {
				t.Errorf("new %s, old %s, receiver with %s: %v", kinds[0], kinds[1], name, err)
			}
		}
		if err := Verify(h, body, []string{receiverKey(stranger)}, now, 0); !errors.Is(err, ErrNoMatch) {
			t.Errorf("new %s, old %s: a stranger's key verified (%v)", kinds[0], kinds[1], err)
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	ed := fixedEd25519(t)
	hm, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{ed.Public(), hm.Text()}
	now := time.Unix(1700000000, 0)
	body := []byte("body")
	signed := func(edit func(h http.Header)) http.Header {
		h := http.Header{}
		FromSecrets([]Secret{ed, hm}).Sign(h, "msg_1", now, body)
		edit(h)
		return h
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		keys []string
		now  time.Time
		want error
	}{
		{name: "as sent", h: signed(func(http.Header) {}), want: nil},
		{name: "body changed", h: signed(func(http.Header) {}), body: "bodY", want: ErrNoMatch},
		{name: "id changed", h: signed(func(h http.Header) { h.Set(HeaderID, "msg_2") }), want: ErrNoMatch},
		{name: "timestamp changed within tolerance", h: signed(func(h http.Header) { h.Set(HeaderTimestamp, "1700000001") }), want: ErrNoMatch},
		{name: "too old", h: signed(func(http.Header) {}), now: now.Add(5*time.Minute + time.Second), want: ErrTimestamp},
		{name: "from the future", h: signed(func(http.Header) {}), now: now.Add(-5*time.Minute - time.Second), want: ErrTimestamp},
		{name: "timestamp near the int64 limit", h: signed(func(h http.Header) {
			h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix()+math.MinInt64, 10))
		}), want: ErrTimestamp},
		{name: "timestamp not a number", h: signed(func(h http.Header) { h.Set(HeaderTimestamp, "1700000000.5") }), want: ErrTimestamp},
		{name: "no signature", h: signed(func(h http.Header) { h.Del(HeaderSignature) }), want: ErrMissingHeaders},
		{name: "no id", h: signed(func(h http.Header) { h.Del(HeaderID) }), want: ErrMissingHeaders},
		{name: "v1a relabelled v1", h: signed(func(h http.Header) {
			h.Set(HeaderSignature, strings.Replace(strings.Fields(h.Get(HeaderSignature))[0], "v1a,", "v1,", 1))
		}), want: ErrNoMatch},
		{name: "unknown versions and junk ignored", h: signed(func(h http.Header) {
			h.Set(HeaderSignature, "v2,AAAA v1a,!!! nocomma "+h.Get(HeaderSignature))
		}), want: nil},
		{name: "the good signature past the cap", h: signed(func(h http.Header) {
			h.Set(HeaderSignature, strings.Repeat("v1,AAAA ", maxSignatures)+h.Get(HeaderSignature))
		}), want: ErrNoMatch},
		{name: "a secret key is no receiver key", h: signed(func(http.Header) {}), keys: []string{ed.Text()}, want: ErrBadSecret},
		{name: "short public key", h: signed(func(http.Header) {}), keys: []string{"whpk_AAAA"}, want: ErrBadSecret},
	} {
		if tc.body == "" {
			tc.body = string(body)
		}
		if tc.keys == nil {
			tc.keys = keys
		}
		if tc.now.IsZero() {
			tc.now = now
		}
		err := Verify(tc.h, []byte(tc.body), tc.keys, tc.now, 0)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
}
