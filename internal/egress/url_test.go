package egress

import (
	"strings"
	"testing"
)

// A destination URL names an endpoint the breaker keeps and an operator
// opens and closes by name: its port and length meet the endpoint
// validator's rules (its host is for the destination rules to judge).
func TestValidateURLNamesAValidEndpoint(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"https://api.example.com/x", "http://127.0.0.1:4000/hook", "http://[::1]:8080/", "https://api.example.com.:443/fqdn",
		"https://bücher.example/", "http://my_service.internal:65535/",
	} {
		if _, err := ValidateURL(ok); err != nil {
			t.Errorf("ValidateURL(%q) = %v, want accepted", ok, err)
		}
	}
	for raw, why := range map[string]string{
		"http://h:0/":     "port",
		"http://h:99999/": "port",
		"http://h:080/":   "port",
		"http://" + strings.Repeat("a", 300) + ".example/": "bytes",
	} {
		if _, err := ValidateURL(raw); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ValidateURL(%.40q…) = %v, want a refusal saying %q", raw, err, why)
		}
	}
}
