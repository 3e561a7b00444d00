package jsonobj

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeObject is encoding/json's reading of one object and nothing
// after it (what a submission's decoder took before Members).
func decodeObject(body []byte) (map[string]json.RawMessage, bool) {
	var f map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if dec.Decode(&f) != nil || f == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return f, true
}

// FuzzMembers: whatever Members takes, encoding/json takes too, with the
// same members and the same bytes for each; and Members takes every
// object encoding/json takes that has no escape or invalid UTF-8 and is
// not nested too deep, so the fast path is the path. Its seed corpus
// runs with the normal suite.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"url":"https://e.com","body":"x\"y\\u00e9\n","headers":{"A":"b"}}`,
		`{"n":-0.5e+10,"m":0,"t":true,"f":false,"z":null,"l":[1,[2,{}],"x"],"o":{"p":{"q":[]}}}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}",
		"{\"a\":\"\xff\"}", "{\"\xff\":1}", `{"\u0061":1}`, `{"a" 1}`, `{"a":1,}`, `{,}`, `{"a":1}x`, `{"a":1}{}`,
		`[]`, `"x"`, `null`, ``, `{`, `{"a":[1,2}`, `{"a":tru}`, `{"a":nul}`,
		`{"d":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
		`{"a":"\`, `{"a":"\u00`, "{\"a\":1}\f", "{\"a\":1}\v", "{\"a\":1}\xc2\xa0", "\xef\xbb\xbf{\"a\":1}",
		`{"a" : 1 , "b":[ 1 ] }` + "\r\n\t", `{"a":1E5,"b":-0,"c":1e+5,"d":0.0}`, `{"a":-01}`, `{"":1}`, `{"a":"\ud800"}`,
		"{\"a\":\"\x7f\"}", "{\"a\":\"\xed\xa0\x80\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := Members(body)
		want, wantOK := decodeObject(body)
		if ok {
			if !wantOK {
				t.Fatalf("Members took %q, which encoding/json refuses", body)
			}
			if len(got) != len(want) {
				t.Fatalf("Members(%q) has %d members, encoding/json %d", body, len(got), len(want))
			}
			for name, v := range want {
				if !bytes.Equal(got[name], v) {
					t.Fatalf("Members(%q)[%q] = %q, encoding/json %q", body, name, got[name], v)
				}
			}
			return
		}
		// Escapes and invalid UTF-8 in a name are encoding/json's to
		// decode; in a value they are Members' to walk
		// (TestMembersTakesEscapesInValues).
		if wantOK && !bytes.Contains(body, []byte(`\`)) && utf8.Valid(body) && depth(body) <= maxDepth && !twice(body) {
			t.Fatalf("Members refused %q, which encoding/json takes", body)
		}
	})
}

// twice reports whether body, one JSON object, names a member twice.
func twice(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	seen := map[string]bool{}
	if _, err := dec.Token(); err != nil {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return false
		}
		if seen[name] {
			return true
		}
		seen[name] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
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

// PlainString answers exactly what json.Unmarshal answers for every JSON
// value it takes, and leaves escapes and invalid UTF-8 to it.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"x"`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\xff\"", `1`, `null`, `"a" `, `{"a":"b"}`, `["x"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the decoder refuses the submission before any member is read
		}
		got, ok := PlainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("PlainString took %q, which json.Unmarshal refuses: %v", raw, err)
		}
		if got != want {
			t.Fatalf("PlainString(%q) = %q, json.Unmarshal = %q", raw, got, want)
		}
	})
}

// Members leaves an object nested deeper than maxDepth to encoding/json.
func TestMembersLeavesDeepNesting(t *testing.T) {
	t.Parallel()
	at := func(n int) []byte {
		return []byte(`{"k":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	if _, ok := Members(at(maxDepth - 1)); !ok {
		t.Errorf("Members refused %d levels", maxDepth)
	}
	if _, ok := Members(at(maxDepth)); ok {
		t.Errorf("Members walked %d levels, more than maxDepth", maxDepth+1)
	}
}

// PlainStrings takes an object of plain strings, and leaves any other
// value to json.Unmarshal.
func TestPlainStrings(t *testing.T) {
	t.Parallel()
	if m, ok := PlainStrings([]byte(`{"A":"1","B":""}`)); !ok || len(m) != 2 || m["A"] != "1" || m["B"] != "" {
		t.Errorf("PlainStrings = %v, %v", m, ok)
	}
	for _, raw := range []string{`{"A":1}`, `{"A":null}`, `{"A":"\u0031"}`, `["A"]`, `"A"`} {
		if m, ok := PlainStrings([]byte(raw)); ok {
			t.Errorf("PlainStrings(%s) = %v; want it left to json.Unmarshal", raw, m)
		}
	}
}

// A member named twice is left to encoding/json, which merges objects.
func TestMembersLeavesNamesGivenTwice(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"a":1,"a":2}`, `{"h":{"A":"1"},"x":0,"h":{"B":"2"}}`} {
		if f, ok := Members([]byte(body)); ok {
			t.Errorf("Members(%s) = %q; want it left to encoding/json", body, f)
		}
	}
}

// Escapes in a value are Members' to walk: only the value's bytes are
// kept, for its reader to decode.
func TestMembersTakesEscapesInValues(t *testing.T) {
	t.Parallel()
	body := `{"b":"x\"y\\\u00e9\n","h":{"A":"\t"}}`
	f, ok := Members([]byte(body))
	if !ok || string(f["b"]) != `"x\"y\\\u00e9\n"` || string(f["h"]) != `{"A":"\t"}` {
		t.Errorf("Members(%s) = %q, %v", body, f, ok)
	}
}
