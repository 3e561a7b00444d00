package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/retryd/retryd/internal/retry"
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

func TestProxyTunnelsHTTPSToTheCheckedAddressWithTheNameInSNIAndHost(t *testing.T) {
	t.Parallel()
	var s seen
	dest, ca := tlsDest(t, &s, nil)
	proxy := startProxy(t, "127.0.0.1:0", nil, "", "")
	p := port(t, dest.URL)

	c := destGuard().ClientWith(ClientOptions{RootCAs: []*x509.Certificate{ca}, Proxy: &Proxy{URL: proxy.URL}})
	if body, err := get(t, c, "https://dest.example:"+p+"/hook"); err != nil || body != "ok" {
		t.Fatalf("GET through the proxy = %q, %v; want ok", body, err)
	}
	if got, want := proxy.Connects(), []string{"127.0.0.1:" + p}; !slices.Equal(got, want) {
		t.Errorf("proxy saw CONNECT %q, want %q (the checked address, not the name)", got, want)
	}
	if got := s.get(); got.sni != "dest.example" || got.host != "dest.example:"+p {
		t.Errorf("destination saw SNI %q and Host %q, want dest.example and dest.example:%s", got.sni, got.host, p)
	}
}

func TestProxyTunnelsHTTP(t *testing.T) {
	t.Parallel()
	var s seen
	dest := httptest.NewServer(http.HandlerFunc(s.handler))
	t.Cleanup(dest.Close)
	proxy := startProxy(t, "127.0.0.1:0", nil, "", "")
	p := port(t, dest.URL)

	c := destGuard().ClientWith(ClientOptions{Proxy: &Proxy{URL: proxy.URL}})
	if body, err := get(t, c, "http://dest.example:"+p+"/"); err != nil || body != "ok" {
		t.Fatalf("GET through the proxy = %q, %v; want ok", body, err)
	}
	if got, want := proxy.Connects(), []string{"127.0.0.1:" + p}; !slices.Equal(got, want) {
		t.Errorf("proxy saw CONNECT %q, want %q", got, want)
	}
	if got := s.get().host; got != "dest.example:"+p {
		t.Errorf("destination saw Host %q, want dest.example:%s", got, p)
	}
}

func TestProxyOverTLSIsReachedByItsName(t *testing.T) {
	t.Parallel()
	var s seen
	dest, destCA := tlsDest(t, &s, nil)
	proxyCert, proxyCA := issue(t, "proxy.example")
	proxy := startProxy(t, "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{proxyCert}}, "", "")
	proxyURL := &url.URL{Scheme: "https", Host: "proxy.example:" + proxy.URL.Port()}

	c := destGuard().ClientWith(ClientOptions{RootCAs: []*x509.Certificate{destCA},
		Proxy: &Proxy{URL: proxyURL, RootCAs: []*x509.Certificate{proxyCA}}})
	if body, err := get(t, c, "https://dest.example:"+port(t, dest.URL)+"/"); err != nil || body != "ok" {
		t.Fatalf("GET through an https proxy = %q, %v; want ok", body, err)
	}

	// The destination's authorities are not the proxy's.
	c = destGuard().ClientWith(ClientOptions{RootCAs: []*x509.Certificate{destCA, proxyCA}, Proxy: &Proxy{URL: proxyURL}})
	var unknown x509.UnknownAuthorityError
	if _, err := get(t, c, "https://dest.example:"+port(t, dest.URL)+"/"); !errors.As(err, &unknown) {
		t.Errorf("proxy certificate from the destination's CAs: err %v, want unknown authority", err)
	}
}

func TestProxyBasicAuth(t *testing.T) {
	t.Parallel()
	const user, pass = "egress-user", "pr0xy-s3cret"
	var s seen
	dest := httptest.NewServer(http.HandlerFunc(s.handler))
	t.Cleanup(dest.Close)
	proxy := startProxy(t, "127.0.0.1:0", nil, user, pass)
	target := "http://dest.example:" + port(t, dest.URL) + "/"
	g := destGuard()

	withUserinfo := *proxy.URL
	withUserinfo.User = url.UserPassword(user, pass+"-wrong")
	for name, p := range map[string]*Proxy{
		"no credentials":        {URL: proxy.URL},
		"wrong password":        {URL: proxy.URL, Username: user, Password: pass + "-wrong"},
		"wrong password in URL": {URL: &withUserinfo},
	} {
		_, err := get(t, g.ClientWith(ClientOptions{Proxy: p}), target)
		if err == nil || !strings.Contains(err.Error(), "407") || !strings.Contains(err.Error(), "authentication failed") {
			t.Errorf("%s: err %v, want the proxy's 407 and authentication failed", name, err)
		} else if strings.Contains(err.Error(), pass) || errors.Is(err, retry.ErrBlocked) {
			t.Errorf("%s: err %q shows the password or says blocked", name, err)
		}
		var pe *ProxyError
		if !errors.As(err, &pe) || pe.StatusCode != http.StatusProxyAuthRequired {
			t.Errorf("%s: err %v, want a ProxyError with status 407", name, err)
		}
	}
	if n := s.get().hits; n != 0 {
		t.Fatalf("destination reached %d times without the proxy's consent", n)
	}

	fromEnv, err := ParseProxy("http://"+user+":"+pass+"@"+proxy.URL.Host, true)
	if err != nil {
		t.Fatal(err)
	}
	if fromEnv.Username != user || fromEnv.Password != pass || fromEnv.URL.User != nil {
		t.Fatalf("ParseProxy = %+v, want the credentials apart from the URL", fromEnv)
	}
	for name, p := range map[string]*Proxy{
		"fields":   {URL: proxy.URL, Username: user, Password: pass},
		"from env": fromEnv,
	} {
		if body, err := get(t, g.ClientWith(ClientOptions{Proxy: p}), target); err != nil || body != "ok" {
			t.Errorf("%s: GET = %q, %v; want ok", name, body, err)
		}
	}
}

// The destination is judged before the proxy is dialled: a refused one
// never reaches the proxy, which would otherwise connect wherever asked.
func TestProxyIsNotAskedForARefusedDestination(t *testing.T) {
	t.Parallel()
	var s seen
	dest := httptest.NewServer(http.HandlerFunc(s.handler))
	t.Cleanup(dest.Close)
	proxy := startProxy(t, "127.0.0.1:0", nil, "", "")
	p := port(t, dest.URL)
	resolver := fakeResolver{
		"dest.example":  {netip.MustParseAddr("127.0.0.1")},
		"mixed.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")},
	}
	own := &Own{}
	own.Set([]netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:" + p)})

	for _, tc := range []struct {
		name string
		g    *Guard
		url  string
	}{
		{"name to loopback", &Guard{Resolver: resolver}, "http://dest.example:" + p + "/"},
		{"one address of several private", &Guard{Resolver: resolver}, "http://mixed.example:" + p + "/"},
		{"loopback literal", &Guard{Resolver: resolver}, "http://127.0.0.1:" + p + "/"},
		{"octal loopback", &Guard{Resolver: resolver}, "http://0177.0.0.1:" + p + "/"},
		{"own listener", &Guard{AllowPrivate: true, Resolver: resolver, Own: own}, "http://dest.example:" + p + "/"},
	} {
		// Trusted, so that only the destination is judged.
		_, err := get(t, tc.g.ClientWith(ClientOptions{Proxy: &Proxy{URL: proxy.URL, Trusted: true}}), tc.url)
		var pe *ProxyError
		if !errors.Is(err, retry.ErrBlocked) || errors.As(err, &pe) {
			t.Errorf("%s: err %v, want ErrBlocked, the destination's", tc.name, err)
		}
	}
	if n := proxy.conns.Load(); n != 0 {
		t.Errorf("the proxy got %d connections (CONNECT %q), want none", n, proxy.Connects())
	}
	if n := s.get().hits; n != 0 {
		t.Errorf("destination reached %d times", n)
	}
}

// A tenant's proxy is a destination too: at an address the rules refuse
// it is not dialled. The operator's (Trusted) is.
func TestUntrustedProxyMustPassTheRules(t *testing.T) {
	t.Parallel()
	var s seen
	dest := httptest.NewServer(http.HandlerFunc(s.handler))
	t.Cleanup(dest.Close)
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("no 127.0.0.2 to put a proxy outside the allowed range: %v", err)
	} else {
		ln.Close()
	}
	proxy := startProxy(t, "127.0.0.2:0", nil, "", "")
	g := &Guard{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolver: fakeResolver{"dest.example": {netip.MustParseAddr("127.0.0.1")}, "proxy.example": {netip.MustParseAddr("127.0.0.2")}}}
	target := "http://dest.example:" + port(t, dest.URL) + "/"

	for _, u := range []*url.URL{proxy.URL, {Scheme: "http", Host: "proxy.example:" + proxy.URL.Port()}} {
		_, err := get(t, g.ClientWith(ClientOptions{Proxy: &Proxy{URL: u}}), target)
		var pe *ProxyError
		if !errors.Is(err, retry.ErrBlocked) || !errors.As(err, &pe) || pe.Proxy != u.String() {
			t.Errorf("tenant's proxy %s: err %v, want ErrBlocked naming the proxy", u, err)
		}
	}
	if n := proxy.conns.Load(); n != 0 {
		t.Fatalf("the refused proxy got %d connections", n)
	}

	if body, err := get(t, g.ClientWith(ClientOptions{Proxy: &Proxy{URL: proxy.URL, Trusted: true}}), target); err != nil || body != "ok" {
		t.Fatalf("operator's proxy: GET = %q, %v; want ok", body, err)
	}
	if got := proxy.Connects(); len(got) != 1 || got[0] != "127.0.0.1:"+port(t, dest.URL) {
		t.Errorf("proxy saw CONNECT %q", got)
	}
}

func TestUnreachableProxyIsANetworkErrorWithoutThePassword(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const pass = "n0t-in-errors"
	p, err := ParseProxy("http://user:"+pass+"@"+addr, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(t, destGuard().ClientWith(ClientOptions{Proxy: p}), "http://dest.example:80/")
	var opErr *net.OpError
	var pe *ProxyError
	if !errors.As(err, &opErr) || !errors.As(err, &pe) || pe.StatusCode != 0 || errors.Is(err, retry.ErrBlocked) {
		t.Errorf("err %v, want a ProxyError wrapping a network error, not blocked", err)
	}
	if err != nil && (strings.Contains(err.Error(), pass) || !strings.Contains(err.Error(), "proxy http://"+addr)) {
		t.Errorf("err %q: shows the password, or does not name the proxy", err)
	}
}

// Bytes the proxy sends with its 200 belong to the tunnel. (A destination
// would not speak first; a tunnel must not lose them if one did.)
func TestTunnelKeepsBytesThatCameWithTheAnswer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\nearly bytes")
	}()
	dial := destGuard().tunnel(&Proxy{URL: &url.URL{Scheme: "http", Host: ln.Addr().String()}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx, "tcp", "dest.example:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(conn); string(got) != "early bytes" {
		t.Errorf("tunnel read %q, %v; want the bytes sent with the 200", got, err)
	}
}

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
