package submit

import (
	"strings"
	"testing"
)

// Parse answers what it answered before jsonobj.Members for the bodies
// Members leaves to encoding/json: the same errors, word for word.
func TestParseRejectsWhatMembersLeavesAsBefore(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		``:                          "request body is empty; send a JSON object",
		`  `:                        "request body is empty; send a JSON object",
		`[1]`:                       "request body must be a JSON object",
		`null`:                      "request body must be a JSON object",
		`"x"`:                       "request body must be a JSON object",
		`{"url":"https://e.com"}x`:  "request body must hold exactly one JSON object",
		`{"url":"https://e.com"}{}`: "request body must hold exactly one JSON object",
		`{"url":`:                   "request body is not valid JSON: unexpected EOF",
		`{"url":"https://e.com",}`:  "request body is not valid JSON: invalid character '}' looking for beginning of object key string",
		`{"url":01}`:                "request body is not valid JSON: invalid character '1' after object key:value pair",
	} {
		_, err := Parse([]byte(body), now)
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v; want %q", body, err, want)
		}
	}
}

// What the one-pass reader leaves still parses, through encoding/json:
// an escaped member name (the whole body), escaped header values (the
// headers), a member nested deeper than jsonobj walks (the whole body).
func TestParseTakesWhatTheOnePassReaderLeaves(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"\u0075rl":"https://e.com","body":"b\u00e9"}`), now)
	if err != nil || r.URL != "https://e.com" || r.Body != "bé" {
		t.Errorf("an escaped name: %+v, %v", r, err)
	}
	r, err = Parse([]byte(`{"url":"https://e.com","headers":{"A":"\u0031","b":"2"}}`), now)
	if err != nil || len(r.Headers) != 2 || r.Headers["A"] != "1" || r.Headers["B"] != "2" {
		t.Errorf("escaped header values: %+v, %v", r, err)
	}
	tooDeep := `{"url":"https://e.com","flowControl":{"key":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`
	if _, err := Parse([]byte(tooDeep), now); err == nil || !strings.Contains(err.Error(), "flowControl.key") {
		t.Errorf("Parse of a deep flowControl.key = %v; want encoding/json's path to name the member", err)
	}
}
