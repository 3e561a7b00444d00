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

// Header reports whether a header's value is a secret by the header's name
// alone: credentials by name, and anything named like a token, secret,
// key, password, signature, credential, session or auth*. Where the value
// is at hand, ask HeaderValue, which also catches bearer tokens.
func Header(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "cookie", "proxy-authorization", "set-cookie":
		return true
	}
	if strings.HasPrefix(n, "auth") || strings.HasPrefix(n, "x-auth") {
		return true
	}
	for _, w := range []string{"token", "secret", "key", "password", "passwd", "signature", "credential", "session"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

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

// Param reports whether a query parameter's value is a secret: named like
// a token, key, secret, signature, password (pass, pwd), JWT, auth*,
// credential or session, or exactly "code" (an OAuth authorization code;
// names that merely end in code, such as country_code, are not secrets).
func Param(name string) bool {
	n := strings.ToLower(name)
	if n == "code" {
		return true
	}
	for _, w := range []string{"token", "key", "secret", "sig", "pass", "pwd", "jwt", "auth", "credential", "session"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

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
