// Package jsonobj reads a JSON object's members in one pass, each value a
// slice of the input rather than a copy, for the two hot decoders that
// take objects apart member by member: a submission (internal/submit) and
// a stored request's spec (internal/record). encoding/json reads the same
// object about three times (its validity scan, the decode, a copy of each
// member). What this does not take (escaped or non-UTF-8 member names,
// deep nesting, anything malformed) it refuses with ok=false, and the
// caller asks encoding/json, which stays the authority on errors.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Members splits body into its members when body is exactly one JSON
// object (whitespace around it allowed) that names no member twice.
func Members(body []byte) (map[string]json.RawMessage, bool) {
	s := scanner{b: body}
	s.space()
	if !s.is('{') {
		return nil, false
	}
	f := map[string]json.RawMessage{}
	ok := s.object(1, func(rawName, value []byte) bool {
		name, ok := PlainString(rawName)
		if !ok {
			return false // an escaped or non-UTF-8 name: encoding/json's to decode
		}
		if _, twice := f[name]; twice {
			// encoding/json keeps the last of a string, but merges a
			// repeated object into the first: encoding/json's to decode.
			return false
		}
		f[name] = value
		return true
	})
	if !ok || !s.end() {
		return nil, false
	}
	return f, true
}

// maxDepth bounds the nesting Members walks itself: a submission's and a
// spec's values nest two or three deep; deeper ones are encoding/json's.
const maxDepth = 32

// PlainString is the value of raw, a JSON value already checked as such,
// when it is a string with no escapes and valid UTF-8: its bytes between
// the quotes, which json.Unmarshal would find after two more passes over
// them. Anything else is left to json.Unmarshal.
func PlainString(raw []byte) (string, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '"' || raw[n-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw[1 : n-1]), true
}

// PlainStrings is raw, an object, as a map when every value in it is a
// PlainString (headers, say); anything else is left to json.Unmarshal.
func PlainStrings(raw []byte) (map[string]string, bool) {
	f, ok := Members(raw)
	if !ok {
		return nil, false
	}
	m := make(map[string]string, len(f))
	for name, v := range f {
		if m[name], ok = PlainString(v); !ok {
			return nil, false
		}
	}
	return m, true
}

// scanner walks JSON text; each method consumes one production at i and
// reports whether it was well formed.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) is(c byte) bool { return s.i < len(s.b) && s.b[s.i] == c }

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// plain marks the bytes a string holds as they are: not a quote, a
// backslash or a control character (which JSON refuses unescaped).
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str consumes a string, s.b[s.i] being its opening quote.
func (s *scanner) str() bool {
	b, i := s.b, s.i+1
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i == len(b) {
			return false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return true
		case '\\':
			if i+1 == len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !hex(b[i+2]) || !hex(b[i+3]) || !hex(b[i+4]) || !hex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

func hex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func digit(c byte) bool { return '0' <= c && c <= '9' }

// value consumes any JSON value at nesting depth.
func (s *scanner) value(depth int) bool {
	if s.i == len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{':
		return s.object(depth+1, nil)
	case c == '[':
		return s.array(depth + 1)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || digit(c):
		return s.number()
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && digit(b[i]):
		for i < len(b) && digit(b[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) || !digit(b[i]) {
			return false
		}
		for i < len(b) && digit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !digit(b[i]) {
			return false
		}
		for i < len(b) && digit(b[i]) {
			i++
		}
	}
	s.i = i
	return true
}

// object consumes an object, s.b[s.i] being its opening brace, handing
// each member's name (quoted) and value to member unless it is nil; a
// member that answers false ends the walk, refused.
func (s *scanner) object(depth int, member func(name, value []byte) bool) bool {
	if depth > maxDepth {
		return false
	}
	return s.list('}', func() bool {
		start := s.i
		if !s.is('"') || !s.str() {
			return false
		}
		name := s.b[start:s.i]
		s.space()
		if !s.is(':') {
			return false
		}
		s.i++
		s.space()
		start = s.i
		if !s.value(depth) {
			return false
		}
		return member == nil || member(name, s.b[start:s.i:s.i])
	})
}

// array consumes an array, s.b[s.i] being its opening bracket.
func (s *scanner) array(depth int) bool {
	if depth > maxDepth {
		return false
	}
	return s.list(']', func() bool { return s.value(depth) })
}

// list consumes the items of an object or array up to end, its closing
// character, s.b[s.i] being its opening one; item consumes one.
func (s *scanner) list(end byte, item func() bool) bool {
	s.i++
	s.space()
	if s.is(end) {
		s.i++
		return true
	}
	for {
		if !item() {
			return false
		}
		s.space()
		switch {
		case s.is(','):
			s.i++
			s.space()
		case s.is(end):
			s.i++
			return true
		default:
			return false
		}
	}
}
