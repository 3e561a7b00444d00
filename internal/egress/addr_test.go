package egress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/retry"
)

// v4Forms spells one IPv4 address in every way a URL host can carry it.
func v4Forms(a netip.Addr) []string {
	b := a.As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v6 := func(prefix [12]byte, tail [4]byte) string {
		var x [16]byte
		copy(x[:], prefix[:])
		copy(x[12:], tail[:])
		return netip.AddrFrom16(x).String()
	}
	sixToFour := netip.AddrFrom16([16]byte{0x20, 0x02, b[0], b[1], b[2], b[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}).String()
	nat64Local := netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 0, 1, b[0], b[1], 0, b[2], b[3]}).String()
	teredoAddr := netip.AddrFrom16([16]byte{0x20, 0x01, 0, 0, 0x41, 0x37, 0x9e, 0x50, 0x80, 0, 0xf2, 0x27, ^b[0], ^b[1], ^b[2], ^b[3]}).String()
	return []string{
		a.String(),
		a.String() + ".",
		a.String() + "..",
		fmt.Sprint(n),
		fmt.Sprintf("0x%x", n),
		fmt.Sprintf("0X%08X", n),
		fmt.Sprintf("0%o", n),
		fmt.Sprintf("0%o.0%o.0%o.0%o", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("0x%x.0x%x.0x%x.0x%x", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("%d.%d", b[0], n&0xffffff),
		fmt.Sprintf("%d.%d.%d", b[0], b[1], n&0xffff),
		fmt.Sprintf("%d.0x%x.%d", b[0], b[1], n&0xffff),
		fmt.Sprintf("%d.%d.%d.%d.", b[0], b[1], b[2], b[3]),
		"::ffff:" + a.String(),
		"::ffff:" + a.String() + "%lo",
		v6([12]byte{10: 0xff, 11: 0xff}, b),
		"::" + a.String(),
		v6([12]byte{}, b),
		v6([12]byte{8: 0xff, 9: 0xff}, b),
		"64:ff9b::" + a.String(),
		v6([12]byte{0, 0x64, 0xff, 0x9b}, b),
		v6([12]byte{0, 0x64, 0xff, 0x9b}, b) + "%eth0",
		nat64Local,
		sixToFour,
		sixToFour + "%1",
		teredoAddr,
		strings.ToUpper(v6([12]byte{0, 0x64, 0xff, 0x9b}, b)),
	}
}

// v6Forms spells one IPv6 address with zones and in upper case.
func v6Forms(a netip.Addr) []string {
	s := a.String()
	return []string{s, s + "%lo", s + "%eth0", s + "%25", s + "%1", strings.ToUpper(s), netip.AddrFrom16(a.As16()).StringExpanded()}
}

// randomIn draws an address of prefix p.
func randomIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		bit := i * 8
		switch {
		case bit+8 <= p.Bits():
		case bit >= p.Bits():
			b[i] = byte(r.IntN(256))
		default:
			keep := p.Bits() - bit
			mask := byte(0xff << (8 - keep))
			b[i] = b[i]&mask | byte(r.IntN(256))&^mask
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// sameHost compares a parsed spelling with the address it spells. ::0.0.0.0
// and ::0.0.0.1 are read as :: and ::1 (unspecified and loopback), which are
// what they reach.
func sameHost(got, want netip.Addr) bool {
	if got == want {
		return true
	}
	return unspecOrLoop.Contains(got) && netip.MustParsePrefix("0.0.0.0/31").Contains(want) && got.As16()[15] == want.As4()[3]
}

// noLookups fails the test if the guard asks DNS about a numeric host.
type noLookups struct{ t *testing.T }

func (n noLookups) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.t.Errorf("numeric host %q was sent to the resolver", host)
	return nil, errors.New("no lookups")
}

// TestEveryFormOfARefusedAddressIsRefused is the property: an address of a
// refused range is refused at submit (CheckHost) in every spelling, without
// a DNS lookup, and canonicalises back to itself.
func TestEveryFormOfARefusedAddressIsRefused(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	g := &Guard{Resolver: noLookups{t}}
	dev := &Guard{AllowPrivate: true, Resolver: noLookups{t}}
	ctx := context.Background()
	cases := 0
	for _, b := range registry {
		p := b.prefix
		if b.global == "True" || b.global == "N/A" || p == netip.MustParsePrefix("::ffff:0:0/96") {
			continue // reachable, or decided by the address it embeds
		}
		for i := 0; i < 40; i++ {
			a := randomIn(r, p)
			if i == 0 {
				a = p.Addr() // the range's first address, e.g. 0.0.0.0 or ::
			}
			if in, _ := special(a); in.prefix != p {
				continue // inside a more specific block, which decides
			}
			forms := v6Forms(a)
			if a.Is4() {
				forms = v4Forms(a)
			}
			for _, form := range forms {
				cases++
				got, ok := ParseHost(form)
				if !ok || !sameHost(got, Canonical(a)) {
					t.Errorf("ParseHost(%q) = %v, %v; want %v", form, got, ok, Canonical(a))
				}
				if err := g.CheckHost(ctx, form); !errors.Is(err, retry.ErrBlocked) {
					t.Errorf("CheckHost(%q) (%s in %s) = %v, want refused", form, a, p, err)
				}
				inLinkLocal := linkLocal[0].Contains(a) || linkLocal[1].Contains(a)
				if err := dev.CheckHost(ctx, form); inLinkLocal != errors.Is(err, retry.ErrBlocked) {
					t.Errorf("with AllowPrivate, CheckHost(%q) = %v; want refused only for link-local", form, err)
				}
			}
		}
	}
	t.Logf("%d spellings of refused addresses checked", cases)
}

func TestPublicAddressesStayAllowedInEveryForm(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: noLookups{t}}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34"} {
		for _, form := range v4Forms(netip.MustParseAddr(s)) {
			if strings.HasPrefix(form, "64:ff9b:1:") {
				// The local-use NAT64 prefix is not globally reachable,
				// whatever it embeds (TestRegistryRanges).
				continue
			}
			if err := g.CheckHost(context.Background(), form); err != nil {
				t.Errorf("CheckHost(%q) = %v, want allowed (%s is public)", form, err, s)
			}
		}
	}
	for _, s := range []string{"2606:4700:4700::1111", "2a00:1450:4001:82b::200e"} {
		if err := g.CheckHost(context.Background(), s); err != nil {
			t.Errorf("CheckHost(%q) = %v, want allowed", s, err)
		}
	}
}

func TestHostNamesAreNotReadAsAddresses(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"example.com", "1e100.net", "0x.example", "08.1.2.3", "1.2.3.4.5", "256.1.2.3", "4294967296", "0x1ffffffff", "1.16777216", ""} {
		if a, ok := ParseHost(h); ok {
			t.Errorf("ParseHost(%q) = %v, want a host name", h, a)
		}
	}
}

// TestRefusedFormsNeverReachADial points the guarded client at a real
// loopback listener through every spelling of 127.0.0.1 and of ::1: none
// may connect.
func TestRefusedFormsNeverReachADial(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	client := (&Guard{Resolver: noLookups{t}}).Client()
	client.Timeout = 2 * time.Second
	forms := append(v4Forms(netip.MustParseAddr("127.0.0.1")), v6Forms(netip.MustParseAddr("::1"))...)
	for _, form := range forms {
		host := form
		if strings.Contains(form, ":") {
			host = "[" + strings.ReplaceAll(form, "%", "%25") + "]"
		}
		resp, err := client.Get(fmt.Sprintf("http://%s:%d/", host, port))
		if err == nil {
			resp.Body.Close()
			t.Errorf("GET via %q reached a server", form)
			continue
		}
		if !errors.Is(err, retry.ErrBlocked) {
			t.Errorf("GET via %q failed with %v, want the guard's refusal", form, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("loopback listener accepted %d connections, want 0", n)
	}
}

// FuzzGuardForms: whatever the address and spelling, a refused address is
// never allowed, and a spelling never changes the decision.
func FuzzGuardForms(f *testing.F) {
	for _, seed := range []struct {
		a    uint32
		form uint8
	}{{0x7f000001, 0}, {0xa9fea9fe, 3}, {0x0a000001, 7}, {0xc0a80101, 12}, {0x08080808, 20}, {0, 5}} {
		f.Add(seed.a, seed.form)
	}
	g := &Guard{}
	f.Fuzz(func(t *testing.T, n uint32, form uint8) {
		a := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		forms := v4Forms(a)
		s := forms[int(form)%len(forms)]
		got, ok := ParseHost(s)
		if !ok || !sameHost(got, a) {
			t.Fatalf("ParseHost(%q) = %v, %v; want %v", s, got, ok, a)
		}
		if g.AddrAllowed(got) != g.AddrAllowed(a) {
			t.Fatalf("%q decided differently from %v", s, a)
		}
	})
}

// FuzzParseHost: any string either is a host name or parses to an address
// the guard decides on; it never panics, and a dotted-quad reading agrees
// with netip's.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "0x7f.1", "::1%lo", "2130706433", "example.com.", "0177.0.0.01", "1.2.3", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseHost(s)
		if !ok {
			return
		}
		if a.Zone() != "" || a.Is4In6() {
			t.Fatalf("ParseHost(%q) = %v, not canonical", s, a)
		}
		if std, err := netip.ParseAddr(s); err == nil && std.Is4() && std != a {
			t.Fatalf("ParseHost(%q) = %v, netip reads %v", s, a, std)
		}
	})
}

// Hosts are decided as the transport dials them: IDNA's mapping turns
// full-width and ideographic spellings into ASCII first, and localhost
// names are loopback without asking DNS.
func TestHostsAreDecidedAsTheTransportDialsThem(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: noLookups{t}}
	for _, host := range []string{"１２７.０.０.１", "127。0。0。1", "１２７。０。０。１", "ｌｏｃａｌｈｏｓｔ", "locaLhost。", "LOCALHOST", "api.localhost",
		"１６９.２５４.１６９.２５４", "１０.０.０.１", "０ｘ７ｆ０００００１"} {
		if err := g.CheckHost(context.Background(), host); !errors.Is(err, retry.ErrBlocked) {
			t.Errorf("CheckHost(%q) (dialled as %q) = %v, want refused", host, DialHost(host), err)
		}
	}
	for host, want := range map[string]string{"１２７.０.０.１": "127.0.0.1", "127。0。0。1": "127.0.0.1", "ｌｏｃａｌｈｏｓｔ": "localhost", "Example.COM": "example.com"} {
		if got := DialHost(host); got != want {
			t.Errorf("DialHost(%q) = %q, want %q", host, got, want)
		}
	}
}

// Every block the IANA registries do not mark globally reachable is
// refused, the documentation and benchmarking ranges included; blocks
// marked reachable, even inside a refused one, are not.
func TestRegistryRanges(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: noLookups{t}}
	refused := []string{"192.0.2.1", "198.51.100.7", "203.0.113.200", "198.18.0.1", "198.19.255.255", "192.0.0.8", "192.0.0.171",
		"192.88.99.2", "255.255.255.255", "240.0.0.1", "0.0.0.0", "100.64.0.1",
		"2001:db8::1", "3fff::1", "5f00::1", "100:0:0:1::1", "2001:2::1", "2001:10::1", "64:ff9b:1::808:808", "100::1", "::", "::1"}
	allowed := []string{"192.0.0.9", "192.0.0.10", "192.31.196.1", "192.52.193.1", "192.175.48.1", "8.8.8.8",
		"2001:1::1", "2001:3::1", "2001:4:112::1", "2001:20::1", "2620:4f:8000::1", "64:ff9b::808:808", "2606:4700:4700::1111"}
	for _, a := range refused {
		if err := g.CheckHost(context.Background(), a); !errors.Is(err, retry.ErrBlocked) || !strings.Contains(err.Error(), "IANA") {
			t.Errorf("%s: %v, want refused naming its IANA block", a, err)
		}
	}
	for _, a := range allowed {
		if err := g.CheckHost(context.Background(), a); err != nil {
			t.Errorf("%s: %v, want allowed", a, err)
		}
	}
	if n := len(registry); n < 50 {
		t.Errorf("%d blocks read from the registries, want the whole files", n)
	}
}

func TestRegistryParseRefusesAnotherFile(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "a,b\n1,2\n", "Address Block,Name,RFC,Allocation Date,Termination Date,Source,Destination,Forwardable,Globally Reachable\nnot-a-block,x,,,,,,,False\n"} {
		if _, err := parseRegistry([]byte(raw)); err == nil {
			t.Errorf("parseRegistry(%q) took it", raw)
		}
	}
}
