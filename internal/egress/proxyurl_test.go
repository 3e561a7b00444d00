package egress

import (
	"strings"
	"testing"
)

func TestParseProxyURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"http://proxy.example":        "http://proxy.example:80",
		"https://proxy.example/":      "https://proxy.example:443",
		"HTTP://10.1.2.3:3128":        "http://10.1.2.3:3128",
		"http://[2001:db8::1]":        "http://[2001:db8::1]:80",
		"https://proxy.example:8443/": "https://proxy.example:8443",
	} {
		u, err := ParseProxyURL(raw)
		if err != nil || u.String() != want {
			t.Errorf("ParseProxyURL(%q) = %v, %v; want %s", raw, u, err, want)
		}
	}
	const pass = "hunter2-secret"
	for _, raw := range []string{
		"socks5://proxy.example:1080", "proxy.example:3128", "http://", "http://:3128", "http://proxy.example:0",
		"http://proxy.example:99999", "http://proxy.example/path", "http://proxy.example/?q=1", "http://proxy.example/#f",
		"http://user:" + pass + "@proxy.example", "ftp://user:" + pass + "@proxy.example", "http://user:" + pass + "@proxy.example:x",
		"http://user:" + pass + "@proxy.example/p", "http://user:" + pass + "@[::1", "http://proxy.example/" + strings.Repeat("a", 2048),
	} {
		_, err := ParseProxyURL(raw)
		if err == nil {
			t.Errorf("ParseProxyURL(%q) accepted", raw)
		} else if strings.Contains(err.Error(), pass) {
			t.Errorf("ParseProxyURL(%q) = %q, shows the password", raw, err)
		}
		if strings.Contains(raw, pass) {
			if _, err := ParseProxy(raw, true); err != nil && strings.Contains(err.Error(), pass) {
				t.Errorf("ParseProxy(%q) = %q, shows the password", raw, err)
			}
		}
	}
	if p, err := ParseProxy("http://proxy.example:3128", false); err != nil || p.Username != "" || p.Trusted {
		t.Errorf("ParseProxy without userinfo = %+v, %v", p, err)
	}
}
