package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/retry"
)

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
