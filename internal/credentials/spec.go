package credentials

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/names"
)

// The credential types.
const (
	OAuth2  = "oauth2_client_credentials"
	Basic   = "basic"
	Bearer  = "bearer"
	Headers = "headers"
	MTLS    = "mtls"
	Proxy   = "proxy"
)

// Types lists every type, as the API names them.
var Types = []string{OAuth2, Basic, Bearer, Headers, MTLS, Proxy}

// fieldsOf are the members each type takes, and which it requires.
var fieldsOf = map[string]struct{ allowed, required []string }{
	OAuth2:  {[]string{"tokenUrl", "clientId", "clientSecret", "scopes", "audience", "extraParams", "authStyle", "clientCertificate"}, []string{"tokenUrl", "clientId", "clientSecret"}},
	Basic:   {[]string{"username", "password", "clientCertificate"}, []string{"username", "password"}},
	Bearer:  {[]string{"token", "clientCertificate"}, []string{"token"}},
	Headers: {[]string{"headers", "clientCertificate"}, []string{"headers"}},
	MTLS:    {[]string{"certificate", "privateKey", "caCertificates"}, []string{"certificate", "privateKey"}},
	Proxy:   {[]string{"url", "username", "password"}, []string{"url"}},
}

// Spec is a credential as written to PUT /credentials/{name}: its secrets
// too. It is sealed whole; only View leaves the package.
type Spec struct {
	Type string `json:"type"`

	TokenURL     string            `json:"tokenUrl,omitempty"`
	ClientID     string            `json:"clientId,omitempty"`
	ClientSecret string            `json:"clientSecret,omitempty"`
	Scopes       []string          `json:"scopes,omitempty"`
	Audience     string            `json:"audience,omitempty"`
	ExtraParams  map[string]string `json:"extraParams,omitempty"`
	AuthStyle    string            `json:"authStyle,omitempty"`

	Username string            `json:"username,omitempty"`
	Password string            `json:"password,omitempty"`
	Token    string            `json:"token,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`

	Certificate       string    `json:"certificate,omitempty"`
	PrivateKey        string    `json:"privateKey,omitempty"`
	CACertificates    string    `json:"caCertificates,omitempty"`
	ClientCertificate *CertPair `json:"clientCertificate,omitempty"`

	URL string `json:"url,omitempty"`
}

// CertPair is a client certificate carried by a type other than mtls.
type CertPair struct {
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
}

// Error is a refused credential: the member at fault and why, fit for a
// 400 (Unprocessable for a URL the destination rules refuse: 422).
type Error struct {
	Field         string
	Message       string
	Unprocessable bool
}

func (e *Error) Error() string { return e.Message }

func bad(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
}

// Limits on what a credential holds.
const (
	maxBody    = 64 << 10
	maxField   = 4096
	maxHeaders = 32
	maxScopes  = 64
)

// Checker judges a URL by the destination rules (egress.Guard.CheckTarget
// on its host and port); nil accepts every URL.
type Checker func(ctx context.Context, u *url.URL) error

// Parse reads and validates the body of PUT /credentials/{name} at now:
// the type, exactly the members it takes, PEMs that parse and match and
// are not expired, and URLs the rules allow.
func Parse(ctx context.Context, body []byte, now time.Time, check Checker) (*Spec, error) {
	if len(body) > maxBody {
		return nil, bad("body", "must be at most %d bytes", maxBody)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, &Error{Message: "body must be a JSON object"}
	}
	var typ string
	if err := json.Unmarshal(raw["type"], &typ); err != nil || typ == "" {
		return nil, bad("type", "must be one of %s", strings.Join(Types, ", "))
	}
	f, ok := fieldsOf[typ]
	if !ok {
		return nil, bad("type", "must be one of %s, got %s", strings.Join(Types, ", "), names.Quote(typ))
	}
	var names []string
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k != "type" && !slices.Contains(f.allowed, k) {
			return nil, bad(k, "is not a member of a %s credential (it takes %s)", typ, strings.Join(f.allowed, ", "))
		}
	}
	for _, k := range f.required {
		if v, ok := raw[k]; !ok || string(v) == "null" {
			return nil, bad(k, "is required for a %s credential", typ)
		}
	}
	if cc, ok := raw["clientCertificate"]; ok && string(cc) != "null" {
		var members map[string]json.RawMessage
		if json.Unmarshal(cc, &members) == nil {
			for _, k := range sortedKeys(members) {
				if k != "certificate" && k != "privateKey" {
					return nil, bad("clientCertificate."+k, "is not a member of clientCertificate (it takes certificate, privateKey)")
				}
			}
			for _, k := range []string{"certificate", "privateKey"} {
				if _, ok := members[k]; !ok {
					return nil, bad("clientCertificate."+k, "is required in clientCertificate")
				}
			}
		}
	}
	var s Spec
	if err := json.Unmarshal(body, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, bad(te.Field, "must be a %s", jsonKind(te.Field))
		}
		return nil, &Error{Message: "body: " + err.Error()}
	}
	if err := s.validate(ctx, now, check); err != nil {
		return nil, err
	}
	return &s, nil
}

// jsonKind names what member field must be in JSON. It goes by the
// member, not by the Go type the decoder reports: that is the element's
// (string) when an element of scopes or headers is wrong, and CertPair,
// not a pointer, when clientCertificate is not an object.
func jsonKind(field string) string {
	switch field {
	case "scopes":
		return "JSON array of strings"
	case "headers", "extraParams":
		return "JSON object of strings"
	case "clientCertificate":
		return "JSON object"
	}
	return "string"
}

func sortedKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// text checks a string member: present when required, bounded, printable.
func text(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return bad(field, "must not be empty")
	case len(v) > maxField:
		return bad(field, "must be at most %d bytes", maxField)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return bad(field, "must not hold control characters")
	}
	return nil
}

func (s *Spec) validate(ctx context.Context, now time.Time, check Checker) error {
	switch s.Type {
	case OAuth2:
		for _, f := range []struct {
			name, v string
			req     bool
		}{{"clientId", s.ClientID, true}, {"clientSecret", s.ClientSecret, true}, {"audience", s.Audience, false}} {
			if err := text(f.name, f.v, f.req); err != nil {
				return err
			}
		}
		if err := checkURL(ctx, "tokenUrl", s.TokenURL, check); err != nil {
			return err
		}
		if len(s.Scopes) > maxScopes {
			return bad("scopes", "must hold at most %d scopes", maxScopes)
		}
		for _, sc := range s.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \"\\") || text("scopes", sc, true) != nil {
				return bad("scopes", "must hold scope tokens (no spaces, quotes or control characters), got %s", names.Quote(sc))
			}
		}
		if len(s.ExtraParams) > maxHeaders {
			return bad("extraParams", "must hold at most %d parameters", maxHeaders)
		}
		for k, v := range s.ExtraParams {
			if k == "" || text("extraParams", k, true) != nil || text("extraParams", v, false) != nil {
				return bad("extraParams", "must map names to values without control characters")
			}
			switch k {
			case "grant_type", "client_id", "client_secret", "scope", "audience":
				return bad("extraParams", "must not set %s (retryd sets it from the credential's own members)", k)
			}
		}
		switch s.AuthStyle {
		case "", "header", "body":
		default:
			return bad("authStyle", "must be header (HTTP Basic, the default) or body, got %s", names.Quote(s.AuthStyle))
		}
	case Basic:
		if err := text("username", s.Username, true); err != nil {
			return err
		}
		if strings.Contains(s.Username, ":") {
			return bad("username", "must not contain a colon (HTTP Basic cannot carry one)")
		}
		if err := text("password", s.Password, true); err != nil {
			return err
		}
	case Bearer:
		if err := text("token", s.Token, true); err != nil {
			return err
		}
	case Headers:
		if len(s.Headers) == 0 || len(s.Headers) > maxHeaders {
			return bad("headers", "must hold from 1 to %d headers", maxHeaders)
		}
		seen := map[string]bool{}
		for k, v := range s.Headers {
			if !httpguts.ValidHeaderFieldName(k) || len(k) > 256 {
				return bad("headers", "must have valid header names, got %s", names.Quote(k))
			}
			// Names that differ only in case would both be set, in no set
			// order: which value a delivery carried would be chance.
			if seen[http.CanonicalHeaderKey(k)] {
				return bad("headers", "must not name %s twice (header names ignore case)", http.CanonicalHeaderKey(k))
			}
			seen[http.CanonicalHeaderKey(k)] = true
			if !httpguts.ValidHeaderFieldValue(v) || v == "" || len(v) > maxField {
				return bad("headers", "%s must have a non-empty value without control characters, at most %d bytes", http.CanonicalHeaderKey(k), maxField)
			}
			if reserved(k) {
				return bad("headers", "must not set %s, which retryd sets on every delivery", http.CanonicalHeaderKey(k))
			}
		}
	case MTLS:
		if _, err := certInfo("certificate", "privateKey", s.Certificate, s.PrivateKey, now); err != nil {
			return err
		}
		if s.CACertificates != "" {
			if _, err := parseCAs(s.CACertificates); err != nil {
				return err
			}
		}
	case Proxy:
		if _, err := ParseProxy(ctx, s.URL, check); err != nil {
			return err
		}
		if s.Password != "" && s.Username == "" {
			return bad("username", "is required with a password")
		}
		if err := text("username", s.Username, false); err != nil {
			return err
		}
		if err := text("password", s.Password, false); err != nil {
			return err
		}
	}
	if c := s.ClientCertificate; c != nil {
		if _, err := certInfo("clientCertificate.certificate", "clientCertificate.privateKey", c.Certificate, c.PrivateKey, now); err != nil {
			return err
		}
	}
	return nil
}

// reserved are the headers a credential may not set: those every delivery
// carries from retryd, which a credential must not forge.
func reserved(name string) bool {
	n := strings.ToLower(name)
	for _, prefix := range []string{"retryd-", "webhook-", "upstash-"} {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	switch n {
	case "host", "content-length", "transfer-encoding", "connection", "idempotency-key", "traceparent", "tracestate":
		return true
	}
	return false
}

func checkURL(ctx context.Context, field, raw string, check Checker) error {
	u, err := egress.ValidateURL(raw)
	if err != nil {
		return bad(field, "%s", err.Error())
	}
	if check != nil {
		if err := check(ctx, u); err != nil {
			return &Error{Field: field, Message: field + " is refused by the destination rules: " + err.Error(), Unprocessable: true}
		}
	}
	return nil
}

// ParseProxy checks a proxy credential's URL: http or https, a host, no
// user (username and password are members of their own), and an address
// the destination rules allow.
func ParseProxy(ctx context.Context, raw string, check Checker) (*url.URL, error) {
	u, err := egress.ParseProxyURL(raw)
	if err != nil {
		return nil, bad("url", "%s", err.Error())
	}
	if check != nil {
		if err := check(ctx, u); err != nil {
			return nil, &Error{Field: "url", Message: "url is refused by the destination rules: " + err.Error(), Unprocessable: true}
		}
	}
	return u, nil
}

// CertInfo is what GET shows of a certificate: nothing secret.
type CertInfo struct {
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	NotAfter    time.Time `json:"notAfter"`
	Fingerprint string    `json:"fingerprint"` // SHA-256 of the leaf, hex
}

// certInfo parses a certificate chain and its key, and refuses a pair
// that does not match or a leaf that has expired.
func certInfo(certField, keyField, certPEM, keyPEM string, now time.Time) (*CertInfo, error) {
	if len(certPEM) > maxBody/2 || len(keyPEM) > maxBody/2 {
		return nil, bad(certField, "must be at most %d bytes", maxBody/2)
	}
	if b, _ := pem.Decode([]byte(certPEM)); b == nil || b.Type != "CERTIFICATE" {
		return nil, bad(certField, "must be a PEM certificate chain (-----BEGIN CERTIFICATE-----)")
	}
	if !hasPrivateKey(keyPEM) {
		return nil, bad(keyField, "must be a PEM private key (-----BEGIN PRIVATE KEY-----, or RSA/EC)")
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, bad(keyField, "does not match the certificate's public key")
		}
		return nil, bad(certField, "does not parse with its key: %s", strings.TrimPrefix(err.Error(), "tls: "))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, bad(certField, "does not parse: %s", err.Error())
	}
	if now.After(leaf.NotAfter) {
		return nil, bad(certField, "expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	sum := sha256.Sum256(leaf.Raw)
	return &CertInfo{Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(), NotAfter: leaf.NotAfter.UTC(), Fingerprint: hex.EncodeToString(sum[:])}, nil
}

// hasPrivateKey reports whether p holds a PEM private key block, not
// necessarily first: openssl ecparam -genkey writes EC PARAMETERS before
// the key, and tls.X509KeyPair skips such blocks too.
func hasPrivateKey(p string) bool {
	rest := []byte(p)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			return true
		}
	}
}

func parseCAs(p string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(p)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, bad("caCertificates", "holds a certificate that does not parse: %s", err.Error())
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, bad("caCertificates", "must be PEM certificates (-----BEGIN CERTIFICATE-----)")
	}
	return out, nil
}

// View is what the API shows of a credential: its type and non-secret
// members. Secrets are never in it.
type View struct {
	Name        string     `json:"name"`
	Tenant      string     `json:"tenant"`
	Type        string     `json:"type"`
	TokenURL    string     `json:"tokenUrl,omitempty"`
	ClientID    string     `json:"clientId,omitempty"`
	Scopes      []string   `json:"scopes,omitempty"`
	Audience    string     `json:"audience,omitempty"`
	AuthStyle   string     `json:"authStyle,omitempty"`
	Username    string     `json:"username,omitempty"`
	HeaderNames []string   `json:"headerNames,omitempty"`
	URL         string     `json:"url,omitempty"`
	Certificate *CertInfo  `json:"certificate,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	LastUsedAt  *time.Time `json:"lastUsedAt"`
	LastError   string     `json:"lastError"`
}

// view is s's public part (names and times are the store's to add).
func (s *Spec) view() View {
	v := View{Type: s.Type, TokenURL: s.TokenURL, ClientID: s.ClientID, Scopes: s.Scopes, Audience: s.Audience, Username: s.Username, URL: s.URL}
	if s.Type == OAuth2 {
		v.AuthStyle = s.AuthStyle
		if v.AuthStyle == "" {
			v.AuthStyle = "header"
		}
	}
	for k := range s.Headers {
		v.HeaderNames = append(v.HeaderNames, http.CanonicalHeaderKey(k))
	}
	sort.Strings(v.HeaderNames)
	switch {
	case s.Type == MTLS:
		v.Certificate, _ = certInfo("certificate", "privateKey", s.Certificate, s.PrivateKey, time.Time{})
	case s.ClientCertificate != nil:
		v.Certificate, _ = certInfo("certificate", "privateKey", s.ClientCertificate.Certificate, s.ClientCertificate.PrivateKey, time.Time{})
	}
	return v
}

// secrets are the values of s that must never be shown or stored in
// clear (tests scan for them).
func (s *Spec) secrets() []string {
	out := []string{s.ClientSecret, s.Password, s.Token, s.PrivateKey}
	for _, v := range s.Headers {
		out = append(out, v)
	}
	if s.ClientCertificate != nil {
		out = append(out, s.ClientCertificate.PrivateKey)
	}
	return slices.DeleteFunc(out, func(v string) bool { return v == "" })
}
