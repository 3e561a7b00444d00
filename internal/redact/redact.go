// Package redact hides secrets wherever retryd shows or logs a request:
// the values of secret headers, and secret query parameters of URLs, also
// inside error text (Go's HTTP client quotes the URL in its errors). The
// destination always gets the real values; only what people see changes.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a secret value.
const Mask = "[REDACTED]"

// secretWords make a header's or a query parameter's name secret
// wherever they appear in it, in any case. One list serves both: a
// signature sent as X-Sig and as ?sig= is one secret, hidden in both
// places. "auth" covers Authorization, "cookie" Set-Cookie, "pass"
// password and passwd, "sig" signature.
var secretWords = []string{"token", "key", "secret", "sig", "pass", "pwd", "jwt", "auth", "credential", "session", "cookie"}

// secretNames are secret as whole names only: "code" is an OAuth
// authorization code, while country_code is no secret.
var secretNames = []string{"code"}

// Name reports whether a header or query parameter named name carries a
// secret: the one rule Header and Param both apply.
func Name(name string) bool {
	n := strings.ToLower(name)
	for _, exact := range secretNames {
		if n == exact {
			return true
		}
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Header reports whether a header's value is a secret by the header's name
// alone (Name). Where the value is at hand, ask HeaderValue, which also
// catches bearer tokens.
func Header(name string) bool { return Name(name) }

// HeaderValue reports whether the value of header name is a secret: by
// its name (Header), or because it is a bearer credential, whatever header
// carries it (clients forward tokens under names of their own, such as
// X-Upstream: Bearer …).
func HeaderValue(name, value string) bool {
	return Header(name) || bearer(value)
}

// bearer reports whether v starts with the Bearer scheme, in any case.
func bearer(v string) bool {
	v = strings.TrimLeft(v, " \t")
	return len(v) >= len("bearer ") && strings.EqualFold(v[:len("bearer ")], "bearer ")
}

// Headers returns a copy of h with secret values masked.
func Headers(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if HeaderValue(k, v) {
			v = Mask
		}
		out[k] = v
	}
	return out
}

// Param reports whether a query parameter's value is a secret: by its
// name, under the same rule as a header's (Name).
func Param(name string) bool { return Name(name) }

// URL masks the secret query parameters of raw, and a password in its
// user info. Everything else, including the order and spelling of the
// other parameters, is kept as it was.
func URL(raw string) string {
	base, query, hasQuery := strings.Cut(raw, "?")
	fragment := ""
	if hasQuery {
		query, fragment, _ = strings.Cut(query, "#")
		if fragment != "" {
			fragment = "#" + fragment
		}
	}
	if at := strings.Index(base, "@"); at >= 0 {
		if scheme := strings.Index(base, "://"); scheme >= 0 && scheme < at {
			if colon := strings.Index(base[scheme+3:at], ":"); colon >= 0 {
				base = base[:scheme+3+colon+1] + Mask + base[at:]
			}
		}
	}
	if !hasQuery {
		return base
	}
	parts := strings.Split(query, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		if unescaped, err := url.QueryUnescape(name); err == nil {
			name = unescaped
		}
		if hasValue && Param(name) {
			parts[i] = p[:strings.Index(p, "=")+1] + Mask
		}
	}
	return base + "?" + strings.Join(parts, "&") + fragment
}

// urlInText finds URLs in free text: up to white space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// Text masks the secrets of every URL in s (an error message, a log line).
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, URL)
}
