package record

import "testing"

// A request's callback mark names the ends whose callback sends
// something: every end for retryd's own callbackUrl; for a QStash
// message, success with a callback and failure with a failure callback.
func TestCallbackMarkNamesTheEndsWithACallback(t *testing.T) {
	for _, c := range []struct {
		r    Request
		want string
	}{
		{Request{}, ""},
		{Request{CallbackURL: "https://cb"}, "1"},
		{Request{Dialect: DialectQStash, CallbackURL: "https://cb"}, "c"},
		{Request{Dialect: DialectQStash, QStash: &QStash{FailureCallback: "https://fcb"}}, "f"},
		{Request{Dialect: DialectQStash, CallbackURL: "https://cb", QStash: &QStash{FailureCallback: "https://fcb"}}, "cf"},
		{Request{Dialect: DialectQStash, QStash: &QStash{}}, ""},
	} {
		if got := c.r.callbackMark(); got != c.want {
			t.Errorf("%+v: mark %q, want %q", c.r, got, c.want)
		}
	}
}
