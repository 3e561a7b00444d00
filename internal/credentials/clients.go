package credentials

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"

	"github.com/retryd/retryd/internal/egress"
)

// client is the client of a delivery that uses u (its credential's
// certificate) through proxy (a proxy credential, else EGRESS_PROXY).
// Clients are kept per credential and proxy version, so a destination
// behind mTLS keeps its connections between deliveries.
func (b *Book) client(u *Use, proxy *Spec, proxyVersion string) (*http.Client, error) {
	var o egress.ClientOptions
	// The slot is named by what applies; its version by their versions.
	key, version := u.Tenant+"\x00"+u.Credential+"\x00"+u.Proxy, ""
	if s := u.spec; s != nil {
		certPEM, keyPEM := s.Certificate, s.PrivateKey
		if s.Type != MTLS && s.ClientCertificate != nil {
			certPEM, keyPEM = s.ClientCertificate.Certificate, s.ClientCertificate.PrivateKey
		}
		if certPEM != "" {
			pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
			if err != nil {
				return nil, fmt.Errorf("credential %q: its certificate does not load: %w", u.Credential, err)
			}
			o.Certificates = []tls.Certificate{pair}
			version = u.version
		}
		if s.Type == MTLS && s.CACertificates != "" {
			cas, err := parseCAs(s.CACertificates)
			if err != nil {
				return nil, fmt.Errorf("credential %q: %w", u.Credential, err)
			}
			o.RootCAs = cas
		}
	}
	if proxy != nil {
		pu, err := url.Parse(proxy.URL)
		if err != nil {
			return nil, fmt.Errorf("proxy %q: its url does not parse", u.Proxy)
		}
		o.Proxy = &egress.Proxy{URL: pu, Username: proxy.Username, Password: proxy.Password}
		version += "\x00" + proxyVersion
	} else {
		o.Proxy = b.EgressProxy
	}
	if len(o.Certificates) == 0 && proxy == nil {
		return b.Base, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	kept, ok := b.clients[key]
	if ok && kept.version == version {
		return kept.value, nil
	}
	if ok {
		kept.value.CloseIdleConnections()
	}
	if b.clients == nil {
		b.clients = map[string]slot[*http.Client]{}
	}
	c := b.Guard.ClientWith(o)
	b.clients[key] = slot[*http.Client]{version, c}
	return c, nil
}
