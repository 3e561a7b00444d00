package names

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// MaxEndpoint is the longest endpoint (scheme://host:port) a client may
// name, in bytes.
const MaxEndpoint = 300

// Endpoint checks an endpoint a client names (in a path, scheme:host:port
// such as https:api.example.com:443; scheme://host:port is read too) and
// returns it as the breaker keeps it: scheme://host:port, lower case. It
// refuses, naming field: a name over MaxEndpoint bytes, a control
// character or a space, a scheme other than http and https, a host that
// is neither a host name nor an IP address, and a port that is not a
// decimal number from 1 to 65535.
func Endpoint(field, v string) (string, error) {
	bad := func(format string, args ...any) error {
		return &Error{Field: field, Message: fmt.Sprintf("%s: an endpoint (scheme:host:port, such as https:api.example.com:443) "+format,
			append([]any{field}, args...)...)}
	}
	if len(v) > MaxEndpoint {
		return "", bad("is at most %d bytes, got %d (%s)", MaxEndpoint, len(v), Quote(v))
	}
	if i := ControlAt(v); i >= 0 {
		return "", bad("must not hold control characters (one at byte %d of %s)", i, Quote(v))
	}
	if i := strings.IndexFunc(v, unicode.IsSpace); i >= 0 {
		return "", bad("must not hold spaces (one at byte %d of %s)", i, Quote(v))
	}
	scheme, rest, ok := strings.Cut(strings.ToLower(v), ":")
	if !ok {
		return "", bad("names no scheme: got %s", Quote(v))
	}
	if scheme != "http" && scheme != "https" {
		return "", bad("must have the scheme http or https, got %s", Quote(scheme))
	}
	rest = strings.TrimPrefix(rest, "//")
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", bad("must end in host:port, got %s", Quote(v))
	}
	if err := checkHost(host); err != nil {
		return "", bad("has an invalid host %s: %s", Quote(host), err)
	}
	if !ValidPort(port) {
		return "", bad("must have a port from 1 to 65535 in decimal digits, got %s", Quote(port))
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// ValidPort says whether p is a port as a URL writes it: decimal digits
// without a leading zero, from 1 to 65535 (no sign, no exponent).
func ValidPort(p string) bool {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return false
	}
	for _, r := range p {
		if r < '0' || r > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// checkHost accepts an IP address (an IPv6 one without a zone) or a host
// name: dot-separated labels of letters (any script: a URL's host may be
// an internationalised name), digits, hyphens and underscores, each of 1
// to 63 bytes, 253 bytes in all, and perhaps a final dot.
func checkHost(h string) error {
	if h == "" {
		return fmt.Errorf("it is empty")
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("an IPv6 zone is not a destination")
		}
		return nil
	}
	if strings.Contains(h, ":") {
		return fmt.Errorf("it is not an IP address")
	}
	if len(h) > 253 {
		return fmt.Errorf("a host name is at most 253 bytes")
	}
	// A fully qualified name may end in a dot (api.example.com.), as a
	// URL's host may.
	if h != "." {
		h = strings.TrimSuffix(h, ".")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("each dot-separated part is 1 to 63 bytes")
		}
		for _, r := range label {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' {
				return fmt.Errorf("%q is not a letter, a digit, '-' or '_'", r)
			}
		}
	}
	return nil
}
