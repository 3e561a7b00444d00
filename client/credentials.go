package client

import "time"

// The paths of credentials and signing secrets.
const (
	PathCredentials    = "/credentials"
	PathSigningSecrets = "/signing-secrets"
)

// Credential is a tenant's credential as the API shows it: its type and
// non-secret members, never a secret.
type Credential struct {
	Name        string           `json:"name"`
	Tenant      string           `json:"tenant"`
	Type        string           `json:"type"`
	TokenURL    string           `json:"tokenUrl,omitempty"`
	ClientID    string           `json:"clientId,omitempty"`
	Scopes      []string         `json:"scopes,omitempty"`
	Audience    string           `json:"audience,omitempty"`
	AuthStyle   string           `json:"authStyle,omitempty"`
	Username    string           `json:"username,omitempty"`
	HeaderNames []string         `json:"headerNames,omitempty"`
	URL         string           `json:"url,omitempty"`
	Certificate *CertificateInfo `json:"certificate,omitempty"`
	CreatedAt   time.Time        `json:"createdAt"`
	UpdatedAt   time.Time        `json:"updatedAt"`
	LastUsedAt  *time.Time       `json:"lastUsedAt"`
	LastError   string           `json:"lastError"`
}

// CertificateInfo is what the API shows of a credential's certificate.
type CertificateInfo struct {
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	NotAfter    time.Time `json:"notAfter"`
	Fingerprint string    `json:"fingerprint"`
}

// EndpointSettings are a tenant's credential and proxy for an endpoint's
// requests that name none.
type EndpointSettings struct {
	Endpoint   string `json:"endpoint"`
	Credential string `json:"credential,omitempty"`
	Proxy      string `json:"proxy,omitempty"`
}

// SigningSecret is one of a tenant's signing secrets. Secret (whsec_…)
// is set only in the answer that made an hmac secret; PublicKey (whpk_…)
// is an ed25519 secret's.
type SigningSecret struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	CreatedAt   time.Time `json:"createdAt"`
	Fingerprint string    `json:"fingerprint"`
	PublicKey   string    `json:"publicKey,omitempty"`
	Secret      string    `json:"secret,omitempty"`
}
