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

// A submission with an escaped member name, or nested deeper than
// jsonobj.Members walks, still parses: encoding/json decodes it.
func TestParseTakesWhatMembersLeaves(t *testing.T) {
	t.Parallel()
	escaped := `{"\u0075rl":"https://e.com","body":"b\u00e9"}`
	for _, body := range []string{escaped, `{"url":"https://e.com","headers":{"A":"\u0031"}}`} {
		r, err := Parse([]byte(body), now)
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		if r.URL != "https://e.com" {
			t.Errorf("Parse(%s).URL = %q", body, r.URL)
		}
	}
	if r, _ := Parse([]byte(escaped), now); r.Body != "bé" {
		t.Errorf("escaped body = %q, want %q", r.Body, "bé")
	}
	tooDeep := `{"url":"https://e.com","flowControl":{"key":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}}`
	if _, err := Parse([]byte(tooDeep), now); err == nil || !strings.Contains(err.Error(), "flowControl.key") {
		t.Errorf("Parse of a deep flowControl.key = %v; want encoding/json's path to name the member", err)
	}
}
