package egress

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Every spelling of an address is reduced to one canonical form before the
// guard decides on it. An address can be written many ways that all reach
// the same host: an IPv6 zone (::1%lo), an IPv4-mapped or -compatible IPv6
// address (::ffff:127.0.0.1, ::127.0.0.1), a NAT64, 6to4 or Teredo address
// embedding an IPv4 one, the inet_aton forms of IPv4 that C resolvers and
// browsers accept (2130706433, 0x7f000001, 0177.0.0.1, 127.1), and a
// trailing dot. Deciding on one spelling and connecting to another is how
// SSRF guards get bypassed, so the guard decides only on Canonical.

// DialHost is host as Go's HTTP transport will dial it: a name that is
// not ASCII goes through IDNA's lookup mapping (UTS #46), which turns
// full-width digits and letters into ASCII and ideographic full stops into
// dots (１２７。０。０。１ is 127.0.0.1), and comes out in lower case. A
// name the mapping refuses is dialled as written, as the transport does.
// Every check decides on this, never on the host as written.
func DialHost(host string) string {
	if !isASCII(host) {
		if v, err := idna.Lookup.ToASCII(host); err == nil {
			host = v
		}
	}
	return strings.ToLower(host)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// localName reports whether host is localhost or a name under it, which
// RFC 6761 reserves for the loopback interface: it is decided as loopback,
// never asked of DNS (which would answer anything).
func localName(host string) bool {
	h := strings.TrimRight(host, ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// ParseHost reads host (as url.URL.Hostname returns it) as an IP address in
// any of the forms above. ok is false for a host name, which must be
// resolved; the address returned is canonical.
func ParseHost(host string) (addr netip.Addr, ok bool) {
	raw, ok := parseRaw(host)
	if !ok {
		return netip.Addr{}, false
	}
	return Canonical(raw), true
}

// parseRaw is ParseHost before canonicalisation: the address as written
// (an inet_aton form read as the IPv4 address it means).
func parseRaw(host string) (netip.Addr, bool) {
	h := strings.TrimRight(DialHost(host), ".")
	if h == "" {
		return netip.Addr{}, false
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false
		}
		return a, true
	}
	return parseInetAton(h)
}

// parseInetAton parses IPv4 the way inet_aton does: one to four parts,
// each decimal, octal (leading 0) or hex (0x); the last part fills the
// remaining bytes (127.1 is 127.0.0.1, 2130706433 is 127.0.0.1).
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base, digits := 10, p
	switch {
	case len(p) > 1 && (p[0:2] == "0x" || p[0:2] == "0X"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, true // "0x" alone is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	for _, c := range digits {
		if !(c >= '0' && c <= '9' || base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Translation prefixes whose addresses embed an IPv4 address.
var (
	ipv4Compatible = netip.MustParsePrefix("::/96")           // deprecated ::a.b.c.d
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT ::ffff:0:a.b.c.d
	nat64          = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052 well-known prefix
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215 local-use prefix
	sixToFour      = netip.MustParsePrefix("2002::/16")       // 6to4: 2002:AABB:CCDD::
	teredo         = netip.MustParsePrefix("2001::/32")       // client IPv4 inverted in the low 32 bits
	unspecOrLoop   = netip.MustParsePrefix("::/127")          // :: and ::1 are themselves, not IPv4
)

// Canonical returns the address a connection to a really reaches, as far as
// the guard can tell: zone dropped, IPv4-mapped unmapped, and the IPv4
// address embedded by a translation prefix extracted.
func Canonical(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if !a.Is6() {
		return a
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	switch {
	case unspecOrLoop.Contains(a):
		return a
	case ipv4Compatible.Contains(a), ipv4Translated.Contains(a), nat64.Contains(a):
		return v4(12)
	case nat64Local.Contains(a):
		// RFC 6052 /48: the IPv4 address sits in bytes 6,7 and 9,10
		// (byte 8 is the reserved "u" octet).
		return netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]})
	case sixToFour.Contains(a):
		return v4(2)
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	}
	return a
}
