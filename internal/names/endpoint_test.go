package names

import (
	"errors"
	"strings"
	"testing"
)

// One validator reads every endpoint a client names: each rejection says
// why, names its field, and never echoes a long value whole.
func TestEndpointAcceptsAndRefuses(t *testing.T) {
	long := "http:" + strings.Repeat("a", 600_000) + ":80"
	tests := []struct {
		name, value string
		want        string // the canonical endpoint, or "" when refused
		why         string // in the refusal's message
	}{
		{"a path's form", "https:api.example.com:443", "https://api.example.com:443", ""},
		{"a URL's form", "https://API.Example.com:443", "https://api.example.com:443", ""},
		{"http", "http:h:80", "http://h:80", ""},
		{"IPv4", "http:10.0.0.1:8080", "http://10.0.0.1:8080", ""},
		{"IPv6", "http:[::1]:80", "http://[::1]:80", ""},
		{"an international name", "https:bücher.example:443", "https://bücher.example:443", ""},
		{"a fully qualified name", "https:api.example.com.:443", "https://api.example.com.:443", ""},
		{"the highest port", "http:h:65535", "http://h:65535", ""},
		{"long labels", "http:" + strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + ".c:1", "", ""},
		{"a host name over 253 bytes", "http:" + strings.Repeat("a.", 127) + "a:1", "", "at most 253 bytes"},
		{"over the length limit", long, "", "at most 300 bytes, got 600008"},
		{"NUL", "http:a\x00b:80", "", "control characters (one at byte 6"},
		{"unit separator", "http:a\x1fb:80", "", "control characters"},
		{"newline", "http:a\nb:80", "", "control characters"},
		{"space", "http:x (tenant alice) open:80", "", "must not hold spaces"},
		{"no-break space", "http:a\u00a0b:80", "", "must not hold"},
		{"no scheme", "api.example.com", "", "names no scheme"},
		{"another scheme", "ftp:h:21", "", "scheme http or https"},
		{"no port", "http:h", "", "must end in host:port"},
		{"port -1", "http:h:-1", "", "port from 1 to 65535"},
		{"port 0", "http:h:0", "", "port from 1 to 65535"},
		{"port 99999", "http:h:99999", "", "port from 1 to 65535"},
		{"port 1e3", "http:h:1e3", "", "port from 1 to 65535"},
		{"port +80", "http:h:+80", "", "port from 1 to 65535"},
		{"port 080", "http:h:080", "", "port from 1 to 65535"},
		{"empty host", "http::80", "", "invalid host"},
		{"a slash in the host", "http:a/b:80", "", "invalid host"},
		{"parentheses", "http:x(y):80", "", "invalid host"},
		{"an empty label", "http:a..b:80", "", "invalid host"},
		{"a zone", "http:[fe80::1%eth0]:80", "", "zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Endpoint("endpoint", tt.value)
			if tt.why == "" {
				if err != nil {
					t.Fatalf("Endpoint(%s) = %v, want accepted", Quote(tt.value), err)
				}
				if tt.want != "" && got != tt.want {
					t.Errorf("Endpoint(%s) = %q, want %q", Quote(tt.value), got, tt.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Endpoint(%s) = %q, %v; want a *Error", Quote(tt.value), got, err)
			}
			if e.Field != "endpoint" || !strings.HasPrefix(e.Message, "endpoint: ") {
				t.Errorf("error %q does not name its field", e.Message)
			}
			if !strings.Contains(e.Message, tt.why) {
				t.Errorf("error %q, want it to say %q", e.Message, tt.why)
			}
			if len(e.Message) > 300 {
				t.Errorf("error is %d bytes: it echoes the value", len(e.Message))
			}
		})
	}
}
