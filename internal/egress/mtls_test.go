package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/retryd/retryd/internal/retry"
)

func TestClientCertificateReachesAnMTLSDestination(t *testing.T) {
	t.Parallel()
	clientCert, clientCA := issue(t, "retryd tenant client")
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(clientCA)
	var s seen
	dest, destCA := tlsDest(t, &s, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs})
	target := "https://dest.example:" + port(t, dest.URL) + "/"
	g := destGuard()

	with := ClientOptions{Certificates: []tls.Certificate{clientCert}, RootCAs: []*x509.Certificate{destCA}}
	if body, err := get(t, g.ClientWith(with), target); err != nil || body != "ok" {
		t.Fatalf("GET with the client certificate = %q, %v; want ok", body, err)
	}
	if got := s.get().peer; got != "retryd tenant client" {
		t.Errorf("destination saw client certificate %q, want retryd tenant client", got)
	}

	proxy := startProxy(t, "127.0.0.1:0", nil, "", "")
	with.Proxy = &Proxy{URL: proxy.URL}
	if body, err := get(t, g.ClientWith(with), target); err != nil || body != "ok" {
		t.Errorf("GET with the client certificate through a proxy = %q, %v; want ok", body, err)
	}

	_, err := get(t, g.ClientWith(ClientOptions{RootCAs: []*x509.Certificate{destCA}}), target)
	if err == nil || errors.Is(err, retry.ErrBlocked) {
		t.Errorf("GET without a client certificate: err %v, want a failed handshake", err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := get(t, g.Client(), target); !errors.As(err, &unknown) {
		t.Errorf("Client() trusted the test CA: err %v, want unknown authority", err)
	}
	if n := s.get().hits; n != 2 {
		t.Errorf("destination served %d calls, want the 2 with a certificate", n)
	}
}
