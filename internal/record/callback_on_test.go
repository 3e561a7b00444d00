package record

import "testing"

// A QStash message's mark names the ends whose callback sends something:
// success with a callback, failure with a failure callback. retryd's own
// callbackUrl has none: it is sent on every end.
func TestCallbackOnNamesTheEndsWithACallback(t *testing.T) {
	for _, c := range []struct {
		r    Request
		want string
	}{
		{Request{}, ""},
		{Request{CallbackURL: "https://cb"}, ""},
		{Request{Dialect: DialectQStash, CallbackURL: "https://cb"}, "c"},
		{Request{Dialect: DialectQStash, QStash: &QStash{FailureCallback: "https://fcb"}}, "f"},
		{Request{Dialect: DialectQStash, CallbackURL: "https://cb", QStash: &QStash{FailureCallback: "https://fcb"}}, "cf"},
		{Request{Dialect: DialectQStash, QStash: &QStash{}}, ""},
	} {
		if got := c.r.callbackOn(); got != c.want {
			t.Errorf("%+v: mark %q, want %q", c.r, got, c.want)
		}
	}
}
