package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/elazarl/goproxy"

	"github.com/retryd/retryd/internal/testca"
)

// testProxy is a real CONNECT proxy (goproxy) that counts the connections
// made to it and records the target of every CONNECT.
type testProxy struct {
	URL   *url.URL
	conns atomic.Int64

	mu       sync.Mutex
	connects []string
}

func (p *testProxy) Connects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

// countingListener counts accepted connections: a proxy that saw none
// was asked nothing.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startProxy serves a CONNECT proxy on listen (host:0), over TLS when
// tlsConfig is set, asking for Basic user:pass when user is set.
func startProxy(t *testing.T, listen string, tlsConfig *tls.Config, user, pass string) *testProxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("proxy listen on %s: %v", listen, err)
	}
	tp := &testProxy{URL: &url.URL{Scheme: "http", Host: ln.Addr().String()}}
	var l net.Listener = countingListener{ln, &tp.conns}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
		tp.URL.Scheme = "https"
	}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.ConnectDial = nil // not HTTPS_PROXY from the environment
	gp.Tr = &http.Transport{}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		tp.mu.Lock()
		tp.connects = append(tp.connects, host)
		tp.mu.Unlock()
		if user != "" && ctx.Req.Header.Get("Proxy-Authorization") != want {
			ctx.Resp = &http.Response{StatusCode: http.StatusProxyAuthRequired, ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Proxy-Authenticate": {`Basic realm="test"`}}, Body: http.NoBody, Request: ctx.Req}
			return goproxy.RejectConnect, host
		}
		return goproxy.OkConnect, host
	})
	srv := &http.Server{Handler: gp, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tp
}

// seen is what a destination saw of the last call.
type seen struct {
	mu              sync.Mutex
	host, sni, peer string
	hits            int
}

func (s *seen) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits++
	s.host = r.Host
	if r.TLS != nil {
		s.sni = r.TLS.ServerName
		if len(r.TLS.PeerCertificates) > 0 {
			s.peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
	}
	_, _ = io.WriteString(w, "ok")
}

func (s *seen) get() seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seen{host: s.host, sni: s.sni, peer: s.peer, hits: s.hits}
}

// issue makes a CA and a certificate for names, as Go values.
func issue(t *testing.T, names ...string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	iss, err := testca.Issue(names...)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(iss.Cert, iss.Key)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(iss.CA)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert, ca
}

// tlsDest is an https destination with a certificate for dest.example,
// and the CA that signed it.
func tlsDest(t *testing.T, s *seen, clientAuth *tls.Config) (*httptest.Server, *x509.Certificate) {
	t.Helper()
	cert, ca := issue(t, "dest.example")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.handler))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientAuth != nil {
		srv.TLS.ClientAuth, srv.TLS.ClientCAs = clientAuth.ClientAuth, clientAuth.ClientCAs
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ca
}

func port(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// destGuard allows private addresses and resolves dest.example (and
// proxy.example) to loopback, so a call carries a name the proxy must
// not be given.
func destGuard() *Guard {
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	return &Guard{AllowPrivate: true, Resolver: fakeResolver{"dest.example": lo, "proxy.example": lo}}
}

func get(t *testing.T, c *http.Client, rawURL string) (string, error) {
	t.Helper()
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Get(rawURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: status %d, want 200", rawURL, resp.StatusCode)
	}
	return string(body), err
}
