// Package egress decides which destinations retryd may call and builds the
// HTTP client that calls them. Addresses are checked twice: when a request is
// submitted (so the client gets a 422) and again at dial time, on the address
// actually connected to, so a DNS answer that changes in between (DNS
// rebinding) cannot reach a private network. Through a proxy the same
// holds: retryd resolves and checks the destination and asks the proxy for
// a tunnel to that address, never to the name.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/retry"
)

// linkLocal stays refused even with AllowPrivate (as in -dev): it holds
// the cloud metadata endpoints (169.254.169.254, fd00:ec2::254 aside), whose
// credentials no local development needs. ALLOWED_CIDRS can still open it.
var linkLocal = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
}

// RequestIDHeader carries the request id on every delivery and callback;
// the client of Client sets it on every call that lacks it, so it marks
// everything retryd sends to a destination. retryd's API and a worker's
// metrics listener refuse calls that carry it: they are retryd calling
// itself, whatever address or proxy led there.
const RequestIDHeader = "Retryd-Request-Id"

// Guard holds the destination safety rules.
type Guard struct {
	// AllowPrivate opens loopback and private ranges; link-local stays
	// refused.
	AllowPrivate bool
	Allowed      []netip.Prefix
	// Resolver looks host names up; nil means net.DefaultResolver. Tests
	// inject one to play DNS rebinding.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
	// Own are retryd's own listeners, refused whatever else is allowed;
	// nil for none.
	Own *Own
	// Disagreement, when set, says how other retryd processes' destination
	// rules differ from these ("" when they agree); a refusal ends with it.
	// It is called only on a refusal, and must not block.
	Disagreement func() string
}

// refused is refusedAddr, with the processes' disagreement on the rules.
func (g *Guard) refused(addr netip.Addr) error {
	err := refusedAddr(addr)
	if g.Disagreement != nil {
		if why := g.Disagreement(); why != "" {
			return fmt.Errorf("%w; %s", err, why)
		}
	}
	return err
}

// AddrAllowed reports whether retryd may connect to addr, in any spelling.
func (g *Guard) AddrAllowed(addr netip.Addr) bool {
	raw, canon := addr.WithZone("").Unmap(), Canonical(addr)
	for _, p := range g.Allowed {
		if p.Contains(raw) || p.Contains(canon) {
			return true
		}
	}
	if g.AllowPrivate {
		for _, p := range linkLocal {
			if p.Contains(canon) {
				return false
			}
		}
		return true
	}
	_, refused := refusal(addr)
	return !refused
}

// refusal is the block that refuses addr: the address as written (the
// local-use NAT64 prefix is refused whatever it embeds), else the
// canonical address it reaches (a translation prefix, "N/A" in the
// registry, is decided by the address it embeds).
func refusal(addr netip.Addr) (block, bool) {
	if b, ok := notGlobal(addr.WithZone("").Unmap()); ok && b.global != "N/A" {
		return b, true
	}
	return notGlobal(Canonical(addr))
}

// ErrLinkLocal marks a refusal of a link-local address, where the cloud
// metadata endpoints (169.254.169.254) live: ALLOW_PRIVATE_TARGETS does
// not open it, only ALLOWED_CIDRS does, so an error must not suggest the
// former.
var ErrLinkLocal = errors.New("link-local addresses (the cloud metadata endpoints among them) stay refused with ALLOW_PRIVATE_TARGETS=true")

// refusedAddr says why addr is refused: the block it is in.
func refusedAddr(addr netip.Addr) error {
	c := Canonical(addr)
	for _, p := range linkLocal {
		if p.Contains(c) {
			return fmt.Errorf("%w: %s is link-local (%w)", retry.ErrBlocked, addr, ErrLinkLocal)
		}
	}
	why := "a private or reserved address"
	if b, ok := refusal(addr); ok {
		why = fmt.Sprintf("in %s (%s), which IANA does not mark globally reachable", b.prefix, b.name)
	}
	if c != addr {
		return fmt.Errorf("%w: %s (%s) is %s", retry.ErrBlocked, addr, c, why)
	}
	return fmt.Errorf("%w: %s is %s", retry.ErrBlocked, addr, why)
}

// CheckHost resolves host and refuses it if any address it resolves to is
// blocked. A host that does not resolve is not refused here: DNS may be
// down only for now, and the attempt will classify the failure.
func (g *Guard) CheckHost(ctx context.Context, host string) error {
	return g.CheckTarget(ctx, host, 0)
}

// CheckTarget is CheckHost for host on port, which also refuses (with
// ErrOwnListener) a host that is, or resolves to, one of retryd's own
// listeners on that port. Port 0 skips that check.
func (g *Guard) CheckTarget(ctx context.Context, host string, port uint16) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := g.targets(ctx, host, port)
	if errors.Is(err, errLookup) {
		return nil
	}
	return err
}

// errLookup marks a host that did not resolve: no refusal at submit time,
// an ordinary failure at dial time.
var errLookup = errors.New("cannot resolve")

// targets is every address host resolves to, each checked against the
// rules and retryd's own listeners on port (0 skips the latter): an
// address literal in its canonical form, a resolved address as resolved
// (unmapped, without zone). A host that does not resolve fails with
// errLookup.
func (g *Guard) targets(ctx context.Context, host string, port uint16) ([]netip.Addr, error) {
	host = DialHost(host)
	if localName(host) {
		host = "127.0.0.1"
	}
	if addr, ok := parseRaw(host); ok {
		if !g.AddrAllowed(addr) {
			return nil, g.refused(addr)
		}
		if err := g.notOwn(addr, port, ""); err != nil {
			return nil, err
		}
		return []netip.Addr{Canonical(addr)}, nil
	}
	if strings.Contains(host, ":") || strings.Contains(host, "%") {
		// An IPv6 literal that netip cannot read must not fall through to
		// a resolver that may read it differently.
		return nil, fmt.Errorf("%w: %q is not an address retryd can check", retry.ErrBlocked, host)
	}
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", strings.TrimRight(host, "."))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errLookup, host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w %s: no address", errLookup, host)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if !g.AddrAllowed(a) {
			return nil, fmt.Errorf("%w: %s resolves to %s", retry.ErrBlocked, host, strings.TrimPrefix(g.refused(a).Error(), retry.ErrBlocked.Error()+": "))
		}
		// Every address, not the first: the dialler may take any of them.
		if err := g.notOwn(a, port, host); err != nil {
			return nil, err
		}
		out = append(out, a.WithZone("").Unmap())
	}
	return out, nil
}

// notOwn refuses addr:port if it is one of retryd's listeners; name is
// the host name that resolved to addr, if any.
func (g *Guard) notOwn(addr netip.Addr, port uint16, name string) error {
	if port == 0 || !g.Own.Has(netip.AddrPortFrom(addr, port)) {
		return nil
	}
	ap := netip.AddrPortFrom(addr, port).String()
	if name != "" {
		ap = fmt.Sprintf("%s (port %d of %s)", ap, port, name)
	}
	return fmt.Errorf("%w: %s %w", retry.ErrBlocked, ap, ErrOwnListener)
}

func (g *Guard) resolver() interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
} {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

// control is the net.Dialer Control hook: it sees the address the socket is
// about to connect to, after every DNS lookup.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse dial address %q", retry.ErrBlocked, address)
	}
	if !g.AddrAllowed(ap.Addr()) {
		return g.refused(ap.Addr())
	}
	return g.notOwn(ap.Addr(), ap.Port(), "")
}

// MaxResponseHeaderBytes caps a destination's response headers, in all
// (HTTP/1 and HTTP/2): over it the attempt fails, with Go's error saying
// the headers exceeded it.
const MaxResponseHeaderBytes = 64 << 10

// Client returns the HTTP client for destinations: no proxy from the
// environment, redirects returned rather than followed, every connection
// checked by the guard, and connection reuse tuned for many calls to few
// hosts. It is ClientWith(ClientOptions{}).
func (g *Guard) Client() *http.Client {
	return g.ClientWith(ClientOptions{})
}

// ValidateURL checks that raw is an absolute http or https URL with a host.
// It returns a message fit for a 400 answer.
func ValidateURL(raw string) (*url.URL, error) {
	if len(raw) > 2048 {
		return nil, errors.New("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("must be an absolute http or https URL")
	}
	if u.Hostname() == "" {
		return nil, errors.New("must have a host")
	}
	if u.User != nil {
		return nil, errors.New("must not carry user:password; send an Authorization header instead")
	}
	// Its endpoint (scheme://host:port) is a name the breaker keeps and an
	// operator opens and closes: bounded, with a real port, as the
	// endpoint validator wants. (The host is the destination rules' to
	// judge, at 422, not a malformed name's 400.)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if !names.ValidPort(port) {
		return nil, fmt.Errorf("must have a port from 1 to 65535 in decimal digits, got %q", port)
	}
	if n := len(u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port)); n > names.MaxEndpoint {
		return nil, fmt.Errorf("must have a host that keeps its endpoint (scheme://host:port) within %d bytes, got %d", names.MaxEndpoint, n)
	}
	return u, nil
}

// ReadCapped reads at most limit bytes of r and reports whether more was
// there. The rest is drained (up to a bound) so the connection can be reused.
func ReadCapped(r io.Reader, limit int) (data []byte, truncated bool, err error) {
	data, err = io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if len(data) > limit {
		data, truncated = data[:limit], true
		_, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<20))
	}
	return data, truncated, err
}
