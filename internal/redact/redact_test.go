package redact

import (
	"strings"
	"testing"
)

func TestURLMasksSecretParametersOnly(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://e.com/hook":                  "https://e.com/hook",
		"https://e.com/hook?a=1&b=2":          "https://e.com/hook?a=1&b=2",
		"https://e.com/hook?token=abc&page=2": "https://e.com/hook?token=[REDACTED]&page=2",
		"https://e.com/h?api_key=1&Secret=2&sig=3&X-Signature=4&password=5&auth=6#frag": "https://e.com/h?api_key=[REDACTED]&Secret=[REDACTED]&sig=[REDACTED]&X-Signature=[REDACTED]&password=[REDACTED]&auth=[REDACTED]#frag",
		"https://e.com/h?access%5Ftoken=abc":                                            "https://e.com/h?access%5Ftoken=[REDACTED]",
		"https://e.com/h?token":                                                         "https://e.com/h?token",
		"https://user:pa55@e.com/h?x=1":                                                 "https://user:[REDACTED]@e.com/h?x=1",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTextMasksURLsInErrors(t *testing.T) {
	t.Parallel()
	in := `Post "http://127.0.0.1:9/cb?token=s3cr3t&x=1": dial tcp 127.0.0.1:9: connect: connection refused`
	got := Text(in)
	if strings.Contains(got, "s3cr3t") || !strings.Contains(got, "connection refused") || !strings.Contains(got, "x=1") {
		t.Errorf("Text = %q", got)
	}
}

func TestHeaderNames(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"Authorization", "Cookie", "X-Api-Key", "X-Auth-Token", "Auth", "Authentication-Info", "X-Hub-Signature-256",
		"X-Client-Secret", "X-Password", "Credentials", "X-Session-Id", "Proxy-Authorization", "X-Auth-User"} {
		if !Header(h) {
			t.Errorf("%s not secret", h)
		}
	}
	for _, h := range []string{"Content-Type", "Accept", "X-Request-Id", "User-Agent"} {
		if Header(h) {
			t.Errorf("%s secret", h)
		}
	}
}

// OAuth codes, short password names and JWTs in a query are secrets; a
// name that merely ends in "code" is not.
func TestURLMasksCodePassAndJWT(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://e.com/cb?code=abc&state=1":       "https://e.com/cb?code=[REDACTED]&state=1",
		"https://e.com/cb?CODE=abc":               "https://e.com/cb?CODE=[REDACTED]",
		"https://e.com/h?pass=p&user=u":           "https://e.com/h?pass=[REDACTED]&user=u",
		"https://e.com/h?passphrase=p":            "https://e.com/h?passphrase=[REDACTED]",
		"https://e.com/h?jwt=eyJ.x.y":             "https://e.com/h?jwt=[REDACTED]",
		"https://e.com/h?id_jwt=eyJ.x.y":          "https://e.com/h?id_jwt=[REDACTED]",
		"https://e.com/h?country_code=FR&zip=123": "https://e.com/h?country_code=FR&zip=123",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A bearer credential is a secret under any header name.
func TestBearerValuesAreSecretUnderAnyName(t *testing.T) {
	t.Parallel()
	in := map[string]string{"X-Upstream": "Bearer abc", "X-Other": "bearer abc", "X-Caps": "BEARER abc", "X-Plain": "Bearerish",
		"Content-Type": "application/json"}
	got := Headers(in)
	for _, k := range []string{"X-Upstream", "X-Other", "X-Caps"} {
		if got[k] != Mask {
			t.Errorf("%s: %q = %q, want %s", k, in[k], got[k], Mask)
		}
	}
	for _, k := range []string{"X-Plain", "Content-Type"} {
		if got[k] != in[k] {
			t.Errorf("%s: %q masked as %q", k, in[k], got[k])
		}
	}
	if in["X-Upstream"] != "Bearer abc" {
		t.Error("Headers changed its argument")
	}
}

// Headers and query parameters are judged by one list of names: a name
// secret in one place is secret in the other.
func TestHeadersAndParamsShareOneRule(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"X-Sig", "sig", "Authorization", "X-Api-Key", "api_key", "jwt", "X-Jwt", "pwd", "X-Pwd",
		"passwd", "Cookie", "session_id", "X-Session", "code", "Credential", "country_code", "page", "Content-Type", "X-Request-Id"} {
		if Header(name) != Param(name) {
			t.Errorf("%q: header secret %v, query secret %v; want one answer", name, Header(name), Param(name))
		}
	}
	if !Header("X-Sig") {
		t.Error("header X-Sig is shown while ?sig= is redacted")
	}
	if got := Headers(map[string]string{"X-Sig": "s3cr3t"})["X-Sig"]; got != Mask {
		t.Errorf("X-Sig shown as %q", got)
	}
}
