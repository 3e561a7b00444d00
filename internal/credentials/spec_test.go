package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// js is v as a JSON string literal (PEM holds newlines).
func js(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// ecParams is the block `openssl ecparam -genkey` writes before the key.
const ecParams = "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"

func TestParseAcceptsEveryType(t *testing.T) {
	t.Parallel()
	c := issue(t, "client.example")
	for name, body := range map[string]string{
		"oauth2 minimal":                `{"type":"oauth2_client_credentials","tokenUrl":"https://auth.example/token","clientId":"id","clientSecret":"sec"}`,
		"oauth2 every field":            `{"type":"oauth2_client_credentials","tokenUrl":"https://auth.example:8443/oauth/token","clientId":"id","clientSecret":"sec","scopes":["read","write:all"],"audience":"https://api.example","extraParams":{"resource":"r1"},"authStyle":"body"}`,
		"basic":                         `{"type":"basic","username":"u","password":"p@ss:word"}`,
		"bearer":                        `{"type":"bearer","token":"tok"}`,
		"bearer with cert":              `{"type":"bearer","token":"tok","clientCertificate":{"certificate":` + js(c.cert) + `,"privateKey":` + js(c.key) + `}}`,
		"headers":                       `{"type":"headers","headers":{"X-Api-Key":"k","x-tenant":"t\tx"}}`,
		"mtls":                          `{"type":"mtls","certificate":` + js(c.cert) + `,"privateKey":` + js(c.key) + `}`,
		"mtls with CAs":                 `{"type":"mtls","certificate":` + js(c.cert) + `,"privateKey":` + js(c.key) + `,"caCertificates":` + js(c.ca) + `}`,
		"mtls, key after EC PARAMETERS": `{"type":"mtls","certificate":` + js(c.cert) + `,"privateKey":` + js(ecParams+c.key) + `}`,
		"proxy":                         `{"type":"proxy","url":"http://proxy.example:3128"}`,
		"proxy with auth":               `{"type":"proxy","url":"https://proxy.example/","username":"u","password":"p"}`,
	} {
		s, err := Parse(t.Context(), []byte(body), time.Now(), nil)
		if err != nil {
			t.Errorf("%s: Parse refused it: %v", name, err)
			continue
		}
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(body), &typ)
		if s.Type != typ.Type {
			t.Errorf("%s: type %q, want %q", name, s.Type, typ.Type)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	c, other, old := issue(t, "client.example"), issue(t, "other.example"), expiredPair(t)
	oauth := func(extra string) string {
		return `{"type":"oauth2_client_credentials","tokenUrl":"https://auth.example/token","clientId":"id","clientSecret":"sec"` + extra + `}`
	}
	mtls := func(cert, key string) string {
		return `{"type":"mtls","certificate":` + js(cert) + `,"privateKey":` + js(key) + `}`
	}
	refuse := func(_ context.Context, u *url.URL) error {
		if u.Hostname() == "10.0.0.1" {
			return errors.New("10.0.0.1 is a private address")
		}
		return nil
	}
	for _, tc := range []struct {
		name, body, field, msg string
		unprocessable          bool
	}{
		{"not an object", `[1]`, "", "JSON object", false},
		{"no type", `{"token":"t"}`, "type", "must be one of", false},
		{"unknown type", `{"type":"kerberos"}`, "type", `got "kerberos"`, false},
		{"type not a string", `{"type":5}`, "type", "must be one of", false},
		{"missing required", `{"type":"basic","username":"u"}`, "password", "is required", false},
		{"null required", `{"type":"bearer","token":null}`, "token", "is required", false},
		{"empty required", `{"type":"bearer","token":""}`, "token", "must not be empty", false},
		{"extra member", `{"type":"bearer","token":"t","username":"u"}`, "username", "is not a member of a bearer credential", false},
		{"member of another case", `{"type":"bearer","token":"t","Token":"u"}`, "Token", "is not a member", false},
		{"cert on mtls", mtls(c.cert, c.key)[:len(mtls(c.cert, c.key))-1] + `,"clientCertificate":{}}`, "clientCertificate", "is not a member", false},
		{"string as number", oauth(`,"audience":5`), "audience", "must be a string", false},
		{"scopes not an array", oauth(`,"scopes":"read"`), "scopes", "JSON array", false},
		{"extraParams not an object", oauth(`,"extraParams":["a"]`), "extraParams", "JSON object", false},
		{"headers not an object", `{"type":"headers","headers":"X-Key: v"}`, "headers", "JSON object", false},
		{"header value not a string", `{"type":"headers","headers":{"X-Key":5}}`, "headers", "JSON object of strings", false},
		{"scope not a string", oauth(`,"scopes":[1]`), "scopes", "JSON array of strings", false},
		{"certificate not a string", `{"type":"bearer","token":"t","clientCertificate":{"certificate":5,"privateKey":"k"}}`, "clientCertificate.certificate", "must be a string", false},
		{"clientCertificate not an object", `{"type":"bearer","token":"t","clientCertificate":"pem"}`, "clientCertificate", "JSON object", false},
		{"token URL not a URL", oauth(``)[:0] + `{"type":"oauth2_client_credentials","tokenUrl":"ftp://x","clientId":"id","clientSecret":"s"}`, "tokenUrl", "http or https", false},
		{"token URL refused", `{"type":"oauth2_client_credentials","tokenUrl":"https://10.0.0.1/token","clientId":"id","clientSecret":"s"}`, "tokenUrl", "refused by the destination rules: 10.0.0.1", true},
		{"proxy URL refused", `{"type":"proxy","url":"http://10.0.0.1:3128"}`, "url", "refused by the destination rules", true},
		{"proxy URL with user", `{"type":"proxy","url":"http://u:p@proxy.example"}`, "url", "give username and password separately", false},
		{"proxy URL with path", `{"type":"proxy","url":"http://proxy.example/x"}`, "url", "a CONNECT proxy is a host and a port", false},
		{"proxy password alone", `{"type":"proxy","url":"http://proxy.example","password":"p"}`, "username", "required with a password", false},
		{"secret with newline", oauth(``)[:0] + `{"type":"oauth2_client_credentials","tokenUrl":"https://a.example/","clientId":"id","clientSecret":"s\nX"}`, "clientSecret", "control characters", false},
		{"scope with space", oauth(`,"scopes":["a b"]`), "scopes", "scope tokens", false},
		{"extra param overriding", oauth(`,"extraParams":{"grant_type":"password"}`), "extraParams", "must not set grant_type", false},
		{"bad authStyle", oauth(`,"authStyle":"query"`), "authStyle", `got "query"`, false},
		{"username with colon", `{"type":"basic","username":"a:b","password":"p"}`, "username", "colon", false},
		{"header value with CR LF", `{"type":"headers","headers":{"X-Key":"v\r\nX-Evil: 1"}}`, "headers", "without control characters", false},
		{"header value with NUL", `{"type":"headers","headers":{"X-Key":"v\u0000"}}`, "headers", "without control characters", false},
		{"header name invalid", `{"type":"headers","headers":{"X Key":"v"}}`, "headers", "valid header names", false},
		{"reserved header", `{"type":"headers","headers":{"idempotency-key":"k"}}`, "headers", "must not set Idempotency-Key", false},
		{"reserved signature header", `{"type":"headers","headers":{"Webhook-Signature":"v1,x"}}`, "headers", "must not set Webhook-Signature", false},
		{"one header twice", `{"type":"headers","headers":{"X-Key":"a","x-key":"b"}}`, "headers", "X-Key twice", false},
		{"no headers", `{"type":"headers","headers":{}}`, "headers", "from 1 to", false},
		{"certificate not PEM", mtls("not a pem", c.key), "certificate", "PEM certificate", false},
		{"key not PEM", mtls(c.cert, "not a pem"), "privateKey", "PEM private key", false},
		{"certificate PEM that does not parse", mtls("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", c.key), "certificate", "does not parse", false},
		{"key of another certificate", mtls(c.cert, other.key), "privateKey", "does not match", false},
		{"expired certificate", mtls(old.cert, old.key), "certificate", "expired at", false},
		{"expired client certificate", `{"type":"bearer","token":"t","clientCertificate":{"certificate":` + js(old.cert) + `,"privateKey":` + js(old.key) + `}}`, "clientCertificate.certificate", "expired", false},
		{"CAs not PEM", `{"type":"mtls","certificate":` + js(c.cert) + `,"privateKey":` + js(c.key) + `,"caCertificates":"x"}`, "caCertificates", "PEM certificates", false},
		{"too big", `{"type":"bearer","token":"` + strings.Repeat("a", maxBody) + `"}`, "body", "at most", false},
		{"token too long", `{"type":"bearer","token":"` + strings.Repeat("a", maxField+1) + `"}`, "token", "at most", false},
	} {
		_, err := Parse(t.Context(), []byte(tc.body), time.Now(), refuse)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: Parse = %v, want an *Error", tc.name, err)
			continue
		}
		if e.Field != tc.field || !strings.Contains(e.Message, tc.msg) || e.Unprocessable != tc.unprocessable {
			t.Errorf("%s: refusal {Field %q, %q, Unprocessable %v}, want {Field %q, containing %q, Unprocessable %v}",
				tc.name, e.Field, e.Message, e.Unprocessable, tc.field, tc.msg, tc.unprocessable)
		}
	}
}

func TestParseRefusalNeverQuotesTheSecret(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"type":"bearer","token":"TOPSECRET\u0001"}`,
		`{"type":"headers","headers":{"X-Key":"TOPSECRET\n"}}`,
		`{"type":"basic","username":"u","password":"TOPSECRET\u007f"}`,
	} {
		_, err := Parse(t.Context(), []byte(body), time.Now(), nil)
		if err == nil || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("Parse(%s) = %v; want a refusal that does not quote the secret", body, err)
		}
	}
}

// clientCertificate takes exactly its two members.
func TestClientCertificateTakesExactlyItsMembers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, field string }{
		{`{"type":"bearer","token":"t","clientCertificate":{"certificate":"x","privateKey":"y","password":"z"}}`, "clientCertificate.password"},
		{`{"type":"bearer","token":"t","clientCertificate":{"certificate":"x"}}`, "clientCertificate.privateKey"},
	} {
		_, err := Parse(context.Background(), []byte(c.body), time.Now(), nil)
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%s: %v, want a refusal naming %s", c.body, err, c.field)
		}
	}
}
