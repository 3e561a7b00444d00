package submit

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeObject is what Parse did before members: encoding/json's
// decoder, one object and nothing after it.
func decodeObject(body []byte) (fields, bool) {
	var f fields
	dec := json.NewDecoder(bytes.NewReader(body))
	if dec.Decode(&f) != nil || f == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return f, true
}

// FuzzMembers: whatever members takes, encoding/json takes too, with the
// same members and the same bytes for each; and members takes every
// object encoding/json takes that has no escape or invalid UTF-8 and is
// not nested too deep, so the fast path is the path. Its seed corpus runs with the
// normal suite.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"url":"https://e.com","body":"x\"y\\u00e9\n","headers":{"A":"b"}}`,
		`{"n":-0.5e+10,"m":0,"t":true,"f":false,"z":null,"l":[1,[2,{}],"x"],"o":{"p":{"q":[]}}}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}",
		"{\"a\":\"\xff\"}", "{\"\xff\":1}", `{"\u0061":1}`, `{"a" 1}`, `{"a":1,}`, `{,}`, `{"a":1}x`, `{"a":1}{}`,
		`[]`, `"x"`, `null`, ``, `{`, `{"a":[1,2}`, `{"a":tru}`, `{"a":nul}`,
		`{"d":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := members(body)
		want, wantOK := decodeObject(body)
		if ok {
			if !wantOK {
				t.Fatalf("members took %q, which encoding/json refuses", body)
			}
			if len(got) != len(want) {
				t.Fatalf("members(%q) has %d members, encoding/json %d", body, len(got), len(want))
			}
			for name, v := range want {
				if !bytes.Equal(got[name], v) {
					t.Fatalf("members(%q)[%q] = %q, encoding/json %q", body, name, got[name], v)
				}
			}
			return
		}
		// Escapes and invalid UTF-8 in a name are encoding/json's to
		// decode (the seeds show members takes them in values).
		if wantOK && !bytes.Contains(body, []byte(`\`)) && utf8.Valid(body) && depth(body) <= maxDepth {
			t.Fatalf("members refused %q, which encoding/json takes", body)
		}
	})
}

// depth is the deepest nesting of brackets in body, outside strings.
func depth(body []byte) int {
	d, most, in, esc := 0, 0, false, false
	for _, c := range body {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == '{' || c == '['):
			d++
			most = max(most, d)
		case !in && (c == '}' || c == ']'):
			d--
		}
	}
	return most
}

// Parse answers what it answered before members for the bodies members
// leaves to encoding/json: the same errors, word for word.
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

// A submission with an escaped member name, or nested deeper than members
// walks, still parses: encoding/json decodes it.
func TestParseTakesWhatMembersLeaves(t *testing.T) {
	t.Parallel()
	if _, ok := members([]byte(`{"body":"x\"y\\u00e9\n"}`)); !ok {
		t.Error("members refused escapes in a value")
	}
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
	if _, ok := members([]byte(tooDeep)); ok {
		t.Fatalf("members walked %d levels, more than maxDepth", 42)
	}
	if _, err := Parse([]byte(tooDeep), now); err == nil || !strings.Contains(err.Error(), "flowControl.key") {
		t.Errorf("Parse of a deep flowControl.key = %v; want encoding/json's path to name the member", err)
	}
}
