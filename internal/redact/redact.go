// Package redact hides secrets wherever retryd shows or logs a request:
// the values of secret headers, and secret query parameters of URLs, also
// inside error text (Go's HTTP client quotes the URL in its errors). The
// destination always gets the real values; only what people see changes.
//
// A header or query parameter is secret by the words of its name, never by
// a substring of it: X-Api-Key is secret for its word "key", while Monkey,
// X-Keyboard, X-Author and bypass-tunnel-reminder are not. A header is also
// secret by its value when that value carries a credential scheme
// (Basic …, Bearer …, Token …), whatever the header is called.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Mask replaces a secret value.
const Mask = "[REDACTED]"

// secretWords make a name secret when one of its words is one of them, or
// one of them with a plural "s". One list serves headers and query
// parameters: a signature sent as X-Sig and as ?sig= is one secret, hidden
// in both places.
//
// A word marked true is also secret at the end of a longer run of letters
// (mypassword, githubtoken, webhooksecret): no common word ends in it. The
// short ones (key, pass, sign, auth) are not, or monkey, bypass and design
// would be secret.
var secretWords = map[string]bool{
	"token": true, "secret": true, "password": true, "passwd": true, "passphrase": true, "passcode": true,
	"signature": true, "credential": true, "cookie": true, "verifier": true, "authorization": true, "authentication": true,
	"key": false, "sig": false, "sign": false, "pass": false, "pw": false, "pwd": false, "otp": false,
	"auth": false, "oauth": false, "cred": false, "creds": false, "session": false, "jwt": false, "hmac": false,
	"private": false, "bearer": false, "csrf": false, "xsrf": false,
}

// joinWords are the words a secret word is commonly run together with in
// one lowercase name (apikey, accesstoken, xapikey, sessionid, authkey):
// a run of letters that splits wholly into these and secret words, one of
// them secret, is secret. They are no secret on their own.
var joinWords = map[string]bool{
	"x": true, "api": true, "access": true, "refresh": true, "id": true, "client": true, "app": true, "user": true,
	"account": true, "admin": true, "master": true, "service": true, "webhook": true, "signing": true, "public": true,
	"shared": true, "bot": true, "hub": true, "login": true, "security": true,
}

// longestWord bounds the pieces secretRun tries: the longest known word,
// with a plural "s".
var longestWord = func() int {
	n := 0
	for _, list := range []map[string]bool{secretWords, joinWords} {
		for w := range list {
			n = max(n, len(w)+1)
		}
	}
	return n
}()

// credentialSchemes are the HTTP authentication schemes (IANA's registry,
// and the common ones outside it) a header value starts with when it
// carries a credential: "Basic dXNlcjpwYXNz", "Token abc".
var credentialSchemes = map[string]bool{
	"basic": true, "bearer": true, "token": true, "digest": true, "negotiate": true, "ntlm": true, "oauth": true,
	"hoba": true, "mutual": true, "dpop": true, "gnap": true, "privatetoken": true, "concealed": true,
	"scram-sha-1": true, "scram-sha-256": true, "vapid": true, "aws4-hmac-sha256": true, "apikey": true,
	"sharedkey": true, "sharedkeylite": true, "sharedaccesssignature": true, "ssws": true, "hmac": true, "jwt": true,
}

// Name reports whether a header or query parameter named name carries a
// secret: the one rule Header and Param both apply. The name is split into
// its words, and each word is compared whole with secretWords; a word
// that runs several together is also read as the words it is made of
// (secretRun). A name that is the one word "code" (an OAuth authorization
// code) is secret too, while country_code is not.
func Name(name string) bool {
	ws := words(name)
	if len(ws) == 1 && ws[0] == "code" {
		return true
	}
	for _, w := range ws {
		if secretRun(w) {
			return true
		}
	}
	return false
}

// words splits a name into its words, in lower case: at every character
// that is neither a letter nor a digit ("-", "_", ".", " "), where letters
// meet digits (Sha256 is sha, 256), and at camelCase humps (apiKey is api,
// key; APIKey is api, key). Letters outside ASCII count as letters of no
// case.
func words(name string) []string {
	var out []string
	var b strings.Builder
	prev := rune(-1)
	for i, r := range name {
		if !wordRune(r) {
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
			prev = -1
			continue
		}
		if b.Len() > 0 {
			next, _ := utf8.DecodeRuneInString(name[i+utf8.RuneLen(r):])
			if hump(prev, r, next) {
				out = append(out, b.String())
				b.Reset()
			}
		}
		if 'A' <= r && r <= 'Z' {
			b.WriteRune(r + ('a' - 'A'))
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

func wordRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r >= utf8.RuneSelf && r != utf8.RuneError
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }
func isUpper(r rune) bool { return 'A' <= r && r <= 'Z' }
func isLower(r rune) bool { return 'a' <= r && r <= 'z' }

// hump reports whether a new word starts at cur, which follows prev in the
// same run of letters and digits, and is followed by next.
func hump(prev, cur, next rune) bool {
	switch {
	case isDigit(prev) != isDigit(cur):
		return true
	case isLower(prev) && isUpper(cur):
		return true
	default:
		// The last capital of a capitals run starts the next word: APIKey.
		return isUpper(prev) && isUpper(cur) && isLower(next)
	}
}

// secretWord reports whether w is a secret word, or one with a plural "s".
func secretWord(w string) bool {
	if _, ok := secretWords[w]; ok {
		return true
	}
	_, ok := secretWords[strings.TrimSuffix(w, "s")]
	return ok && strings.HasSuffix(w, "s")
}

// secretRun reports whether the word w is secret: it is a secret word; or
// it splits wholly into secret words and joinWords, one of them secret
// (xapikey is x, api, key); or it ends in a secret word marked true
// (mypassword).
func secretRun(w string) bool {
	if secretWord(w) {
		return true
	}
	for long, atEnd := range secretWords {
		if atEnd && (strings.HasSuffix(w, long) || strings.HasSuffix(w, long+"s")) {
			return true
		}
	}
	// reach[i] is 0 when w[:i] does not split into known words, 1 when it
	// does, 2 when it does with a secret word among them.
	reach := make([]byte, len(w)+1)
	reach[0] = 1
	for i := 0; i < len(w); i++ {
		if reach[i] == 0 {
			continue
		}
		for j := i + 1; j <= len(w) && j-i <= longestWord; j++ {
			part, r := w[i:j], reach[i]
			switch {
			case secretWord(part):
				r = 2
			case !joinWords[part]:
				continue
			}
			reach[j] = max(reach[j], r)
		}
	}
	return reach[len(w)] == 2
}

// Header reports whether a header's value is a secret by the header's name
// alone (Name). Where the value is at hand, ask HeaderValue, which also
// catches credentials under any name.
func Header(name string) bool { return Name(name) }

// HeaderValue reports whether the value of header name is a secret: by
// its name (Header), or because it carries a credential scheme, whatever
// header carries it (clients forward credentials under names of their
// own, such as X-Upstream: Basic …).
func HeaderValue(name, value string) bool {
	return Header(name) || credential(value)
}

// credential reports whether a header value carries a credential: it
// starts with an HTTP authentication scheme (credentialSchemes, in any
// case), then white space, then something.
func credential(v string) bool {
	v = strings.TrimLeft(v, " \t")
	end := strings.IndexAny(v, " \t")
	if end < 0 || strings.TrimLeft(v[end:], " \t") == "" {
		return false
	}
	return credentialSchemes[strings.ToLower(v[:end])]
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
