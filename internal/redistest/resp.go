package redistest

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// respValue is one RESP2/RESP3 value as read off the wire, kept close
// enough to its bytes to write it back.
type respValue struct {
	kind  byte
	line  string // the header line without its kind (a length, or a simple value)
	bulk  []byte // the data of a bulk string ($, !, =); nil for a null
	elems []*respValue
}

// readRESP reads one value (an attribute, |, is read as a value of its own).
func readRESP(r *bufio.Reader) (*respValue, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("resp: bad line %q", line)
	}
	v := &respValue{kind: line[0], line: line[1 : len(line)-2]}
	switch v.kind {
	case '$', '!', '=':
		n, err := strconv.Atoi(v.line)
		if err != nil || n < 0 {
			return v, err
		}
		v.bulk = make([]byte, n+2)
		if _, err := io.ReadFull(r, v.bulk); err != nil {
			return nil, err
		}
		v.bulk = v.bulk[:n]
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(v.line)
		if err != nil {
			return nil, err
		}
		if v.kind == '%' || v.kind == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			e, err := readRESP(r)
			if err != nil {
				return nil, err
			}
			v.elems = append(v.elems, e)
		}
	}
	return v, nil
}

// append writes v back in RESP to b.
func (v *respValue) append(b []byte) []byte {
	switch v.kind {
	case '$', '!', '=':
		if v.bulk == nil {
			return append(append(append(b, v.kind), v.line...), "\r\n"...)
		}
		b = append(append(b, v.kind), strconv.Itoa(len(v.bulk))...)
		return append(append(append(b, "\r\n"...), v.bulk...), "\r\n"...)
	case '*', '~', '>', '%', '|':
		n := len(v.elems)
		if v.kind == '%' || v.kind == '|' {
			n /= 2
		}
		if v.line == "-1" {
			return append(b, v.kind, '-', '1', '\r', '\n')
		}
		b = append(append(append(b, v.kind), strconv.Itoa(n)...), "\r\n"...)
		for _, e := range v.elems {
			b = e.append(b)
		}
		return b
	}
	return append(append(append(b, v.kind), v.line...), "\r\n"...)
}

// text is a string value's text, and whether v is a string.
func (v *respValue) text() (string, bool) {
	switch v.kind {
	case '$', '=':
		return string(v.bulk), v.bulk != nil
	case '+':
		return v.line, true
	}
	return "", false
}

func (v *respValue) setText(s string) {
	if v.kind == '+' {
		v.line = s
		return
	}
	v.bulk = []byte(s)
}

// mapPorts rewrites the loopback addresses in v by ports (real port →
// proxy port): a port that follows "127.0.0.1" or "port" in an aggregate
// (SENTINEL get-master-addr-by-name, SENTINEL sentinels/replicas), and
// "127.0.0.1 <port>" or "127.0.0.1:<port>" inside a string (+switch-master
// messages, names).
func (v *respValue) mapPorts(ports map[string]string) {
	prev := ""
	for _, e := range v.elems {
		if s, ok := e.text(); ok {
			if to, found := ports[s]; found && (prev == "127.0.0.1" || prev == "port") {
				e.setText(to)
			} else if strings.Contains(s, "127.0.0.1") {
				e.setText(mapInText(s, ports))
			}
			prev = s
			continue
		}
		prev = ""
		e.mapPorts(ports)
	}
}

func mapInText(s string, ports map[string]string) string {
	words := strings.Split(s, " ")
	for i, w := range words {
		if host, port, ok := strings.Cut(w, ":"); ok && host == "127.0.0.1" {
			if to, found := ports[port]; found {
				words[i] = host + ":" + to
			}
		}
		if i > 0 && words[i-1] == "127.0.0.1" {
			if to, found := ports[w]; found {
				words[i] = to
			}
		}
	}
	return strings.Join(words, " ")
}
