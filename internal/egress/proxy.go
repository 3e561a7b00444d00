package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/retryd/retryd/internal/names"
)

// Proxy is a CONNECT proxy that deliveries leave through (a fixed egress
// address). retryd resolves and checks the destination itself and asks
// the proxy for a tunnel to the checked address, so a proxy reaches
// nothing the destination rules refuse.
type Proxy struct {
	// URL is the proxy's http:// or https:// URL (ParseProxyURL). Its
	// userinfo, if any, stands in for Username and Password when those
	// are empty.
	URL                *url.URL
	Username, Password string
	// Trusted is the operator's proxy (EGRESS_PROXY): its own address is
	// not checked. A tenant's proxy must pass the destination rules like
	// a destination, or it would be a way into the private network.
	Trusted bool
	// RootCAs are trusted for an https:// proxy's certificate besides
	// the system roots; a destination's own authorities never are.
	RootCAs []*x509.Certificate
}

// tunnelTimeout bounds each step of opening a tunnel: resolving, reaching
// the proxy, and its TLS and CONNECT exchange.
const tunnelTimeout = 10 * time.Second

// maxConnectAnswer caps the proxy's answer to CONNECT, read into memory.
const maxConnectAnswer = 16 << 10

// ParseProxyURL checks that raw is a CONNECT proxy's URL: http or https,
// a host, a port (80 or 443 when none is written), no path beyond "/", no
// query, fragment or user:password. It returns scheme://host:port and a
// message fit for a 400 answer.
func ParseProxyURL(raw string) (*url.URL, error) {
	u, err := parseProxy(raw)
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, errors.New("must not carry user:password; give username and password separately")
	}
	return clean(u), nil
}

// ParseProxy reads a proxy setting such as EGRESS_PROXY, which may carry
// its credentials as http://user:password@host:port. Its messages never
// repeat the password.
func ParseProxy(raw string, trusted bool) (*Proxy, error) {
	u, err := parseProxy(raw)
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: clean(u), Trusted: trusted}
	if u.User != nil {
		p.Username = u.User.Username()
		p.Password, _ = u.User.Password()
	}
	return p, nil
}

// parseProxy is ParseProxyURL with any userinfo left in place.
func parseProxy(raw string) (*url.URL, error) {
	if len(raw) > 2048 {
		return nil, errors.New("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's message repeats raw, password and all.
		return nil, errors.New("must be an http:// or https:// URL of a CONNECT proxy")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" {
		return nil, errors.New("must be an http:// or https:// URL of a CONNECT proxy")
	}
	if u.Hostname() == "" {
		return nil, errors.New("must have a host")
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, errors.New("must have no path, query or fragment: a CONNECT proxy is a host and a port")
	}
	port := u.Port()
	if port == "" {
		port = defaultPort[u.Scheme]
	}
	if !names.ValidPort(port) {
		return nil, fmt.Errorf("must have a port from 1 to 65535 in decimal digits, got %q", port)
	}
	return u, nil
}

var defaultPort = map[string]string{"http": "80", "https": "443"}

// clean is u as scheme://host:port, its port written out.
func clean(u *url.URL) *url.URL {
	port := u.Port()
	if port == "" {
		port = defaultPort[u.Scheme]
	}
	return &url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(u.Hostname(), port)}
}

// name is how errors name the proxy: scheme://host:port, never its
// userinfo.
func (p *Proxy) name() string {
	if p.URL == nil {
		return "(no URL)"
	}
	return clean(p.URL).String()
}

// credentials are the proxy's username and password, from the fields or
// else the URL.
func (p *Proxy) credentials() (user, pass string, ok bool) {
	if p.Username != "" || p.Password != "" {
		return p.Username, p.Password, true
	}
	if p.URL != nil && p.URL.User != nil {
		pass, _ = p.URL.User.Password()
		return p.URL.User.Username(), pass, true
	}
	return "", "", false
}

// ProxyError is a failure at the proxy, before any byte reached the
// destination: the proxy refused by the rules, unreachable, or refusing
// the tunnel. A refusal by the rules also matches retry.ErrBlocked.
type ProxyError struct {
	// Proxy is scheme://host:port, without credentials.
	Proxy string
	// StatusCode is the proxy's answer to CONNECT; 0 when it gave none.
	StatusCode int
	Err        error
}

func (e *ProxyError) Error() string { return "proxy " + e.Proxy + ": " + e.Err.Error() }

func (e *ProxyError) Unwrap() error { return e.Err }

// tunnel is the DialContext of a client that goes through p: the
// destination's name is resolved and every address checked here, and the
// proxy is asked to CONNECT to the checked address. http.Transport then
// speaks TLS over the tunnel with the URL's name (SNI, Host) as usual.
func (g *Guard) tunnel(p *Proxy) func(ctx context.Context, network, address string) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: tunnelTimeout, KeepAlive: 30 * time.Second}
	if !p.Trusted {
		dialer.Control = g.control
	}
	var proxyTLS *tls.Config
	if p.URL != nil && p.URL.Scheme == "https" {
		proxyTLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: DialHost(p.URL.Hostname()), NextProtos: []string{"http/1.1"}}
		if len(p.RootCAs) > 0 {
			proxyTLS.RootCAs = systemRootsWith(p.RootCAs)
		}
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if p.URL == nil || p.URL.Scheme != "http" && p.URL.Scheme != "https" {
			return nil, &ProxyError{Proxy: p.name(), Err: errors.New("not an http:// or https:// URL")}
		}
		target, err := g.checkedTarget(ctx, address)
		if err != nil {
			return nil, err
		}
		conn, err := g.dialProxy(ctx, p, dialer, network)
		if err != nil {
			return nil, &ProxyError{Proxy: p.name(), Err: err}
		}
		tun, code, err := p.open(ctx, conn, proxyTLS, target)
		if err != nil {
			conn.Close()
			return nil, &ProxyError{Proxy: p.name(), StatusCode: code, Err: err}
		}
		return tun, nil
	}
}

// checkedTarget is address (host:port) as the checked address to ask the
// proxy for.
func (g *Guard) checkedTarget(ctx context.Context, address string) (netip.AddrPort, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q of %s: %w", portText, host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, tunnelTimeout)
	defer cancel()
	addrs, err := g.targets(ctx, host, uint16(port))
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Every address passed; the first, as a direct dial would take.
	return netip.AddrPortFrom(addrs[0], uint16(port)), nil
}

// dialProxy connects to p: a trusted proxy as named, any other only at an
// address the rules allow (checked for every address it resolves to, and
// again by the Control hook on the one connected to).
func (g *Guard) dialProxy(ctx context.Context, p *Proxy, dialer *net.Dialer, network string) (net.Conn, error) {
	host, port := DialHost(p.URL.Hostname()), p.URL.Port()
	if port == "" {
		port = defaultPort[p.URL.Scheme]
	}
	address := net.JoinHostPort(host, port)
	if !p.Trusted {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", port, err)
		}
		rctx, cancel := context.WithTimeout(ctx, tunnelTimeout)
		addrs, err := g.targets(rctx, host, uint16(n))
		cancel()
		if err != nil {
			return nil, err
		}
		address = netip.AddrPortFrom(addrs[0], uint16(n)).String()
	}
	return dialer.DialContext(ctx, network, address)
}

// open makes conn, a connection to the proxy, a tunnel to target: TLS to
// an https:// proxy, then CONNECT. The exchange is bounded by
// tunnelTimeout and ends early if ctx does. code is the proxy's answer,
// if it gave one.
func (p *Proxy) open(ctx context.Context, conn net.Conn, proxyTLS *tls.Config, target netip.AddrPort) (tun net.Conn, code int, err error) {
	deadline := time.Now().Add(tunnelTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	tun, code, err = p.connect(conn, proxyTLS, target)
	if !stop() {
		return nil, code, context.Cause(ctx)
	}
	if err != nil {
		return nil, code, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, code, err
	}
	return tun, code, nil
}

func (p *Proxy) connect(conn net.Conn, proxyTLS *tls.Config, target netip.AddrPort) (net.Conn, int, error) {
	if proxyTLS != nil {
		tc := tls.Client(conn, proxyTLS)
		if err := tc.Handshake(); err != nil {
			return nil, 0, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	// The CONNECT names the checked address, never the host name: the
	// proxy must not resolve (and so choose) the address itself.
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	user, pass, auth := p.credentials()
	if auth {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return nil, 0, fmt.Errorf("sending CONNECT: %w", err)
	}
	// The limit lies under the bufio.Reader, so what it holds past the
	// answer is exactly the tunnel's first bytes.
	br := bufio.NewReader(io.LimitReader(conn, maxConnectAnswer))
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, 0, fmt.Errorf("reading its answer to CONNECT (at most %d bytes): %w", maxConnectAnswer, err)
	}
	if resp.StatusCode != http.StatusOK {
		// The code alone, with Go's text for it: the proxy's own reason
		// phrase is not ours to repeat.
		msg := fmt.Sprintf("answered CONNECT %s with %d %s", target, resp.StatusCode, http.StatusText(resp.StatusCode))
		if resp.StatusCode == http.StatusProxyAuthRequired {
			if auth {
				msg += ": authentication failed (the proxy refused its username and password)"
			} else {
				msg += ": authentication failed (the proxy wants a username and password, and none was given)"
			}
		}
		return nil, resp.StatusCode, errors.New(msg)
	}
	if n := br.Buffered(); n > 0 {
		rest, _ := br.Peek(n)
		return &tunnelConn{Conn: conn, rest: append([]byte(nil), rest...)}, resp.StatusCode, nil
	}
	return conn, resp.StatusCode, nil
}

// tunnelConn is a tunnel whose first bytes came with the proxy's answer.
type tunnelConn struct {
	net.Conn
	rest []byte
}

func (c *tunnelConn) Read(b []byte) (int, error) {
	if len(c.rest) > 0 {
		n := copy(b, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
