package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ClientOptions are what a destination's credentials add to the client:
// a client certificate, certificate authorities of its own, a proxy.
type ClientOptions struct {
	// Certificates are offered when a destination asks for a client
	// certificate (mTLS); never to a proxy.
	Certificates []tls.Certificate
	// RootCAs are trusted for the destination besides the system roots.
	RootCAs []*x509.Certificate
	// Proxy, when set, carries every connection; nil dials directly.
	Proxy *Proxy
}

// ClientWith is Client with o: the same checks, limits and timeouts,
// whatever the options.
func (g *Guard) ClientWith(o ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	dial := g.direct(dialer)
	if o.Proxy != nil {
		dial = g.tunnel(o.Proxy)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: o.Certificates}
	if len(o.RootCAs) > 0 {
		tlsConfig.RootCAs = systemRootsWith(o.RootCAs)
	}
	tr := &http.Transport{
		// Never Transport.Proxy: a proxy given the name would resolve it
		// itself, unchecked. tunnel hands it an address the guard passed.
		Proxy:                 nil,
		DialContext:           dial,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		// A destination's headers are read into memory whole: Go's
		// default (1 MiB per line, ~16 MB for a 9 MiB line) let 100
		// hostile answers take a worker past its memory limit.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	return &http.Client{
		Transport: marked{tr},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// systemRootsWith is the system's roots plus cas.
func systemRootsWith(cas []*x509.Certificate) *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil {
		// No system roots to read (an empty container): the given
		// authorities alone, rather than none at all.
		pool = x509.NewCertPool()
	}
	for _, c := range cas {
		pool.AddCert(c)
	}
	return pool
}

// direct is the DialContext of a client without a proxy: it dials the
// destination, the dialer's Control hook checking the address connected to.
func (g *Guard) direct(dialer *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if localName(host) {
			host = "127.0.0.1" // RFC 6761: never a DNS question
		}
		if raw, ok := parseRaw(host); ok {
			// Dial the address the guard decided on; a numeric form
			// such as 0177.0.0.1 never reaches a resolver, which might
			// read it differently (glibc reads it as octal).
			if !g.AddrAllowed(raw) {
				return nil, g.refused(raw)
			}
			return dialer.DialContext(ctx, network, net.JoinHostPort(Canonical(raw).String(), port))
		}
		if g.Resolver != nil {
			// With an injected resolver, look the name up ourselves and
			// dial the answer; the Control hook still checks the final
			// address.
			addrs, err := g.Resolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err
			}
			if len(addrs) == 0 {
				return nil, fmt.Errorf("no address for %s", host)
			}
			host = addrs[0].String()
		}
		return dialer.DialContext(ctx, network, net.JoinHostPort(host, port))
	}
}

// marked sets RequestIDHeader on every call that lacks it, so that no
// call of retryd's, whatever code makes it, reaches a retryd listener
// unmarked.
type marked struct{ next http.RoundTripper }

func (m marked) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(RequestIDHeader) == "" {
		// A RoundTripper must not change its caller's request.
		req = req.Clone(req.Context())
		req.Header.Set(RequestIDHeader, "retryd")
	}
	return m.next.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (m marked) CloseIdleConnections() {
	if c, ok := m.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
