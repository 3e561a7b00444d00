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
