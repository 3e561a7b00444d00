package egress

import (
	"errors"
	"net/netip"
	"sync/atomic"
)

// ErrOwnListener marks a destination that is one of retryd's own
// listeners (an API, a worker's metrics listener, the QStash dev
// listener): retryd never delivers to itself, whatever ranges are allowed.
// Errors that carry it carry retry.ErrBlocked too.
var ErrOwnListener = errors.New("is where retryd itself listens; retryd does not deliver to itself " +
	"(a delivery could read its metrics or make a request that makes another, without end)")

// Own is the set of addresses retryd's own listeners answer on, as this
// process last learnt them. It is replaced whole (Set) and read without a
// lock at every dial.
//
// An entry on a loopback or unspecified address stands for every loopback
// and unspecified address on its port: a socket bound to 0.0.0.0:P or
// [::]:P answers on all of them, and one bound to 127.0.0.1:P is reached
// through names (localhost, a host name in /etc/hosts) that may resolve
// to another loopback address. Such an entry may refuse a loopback port
// that another host's process listens on, never the other way round.
type Own struct {
	set atomic.Pointer[ownSet]
}

type ownSet struct {
	exact map[netip.AddrPort]bool
	local map[uint16]bool // ports listened on by loopback or wildcard
}

// Set replaces the listeners with addrs.
func (o *Own) Set(addrs []netip.AddrPort) {
	s := &ownSet{exact: make(map[netip.AddrPort]bool, len(addrs)), local: map[uint16]bool{}}
	for _, ap := range addrs {
		a := Canonical(ap.Addr())
		if a.IsLoopback() || a.IsUnspecified() {
			s.local[ap.Port()] = true
			continue
		}
		s.exact[netip.AddrPortFrom(a, ap.Port())] = true
	}
	o.set.Store(s)
}

// Has reports whether a connection to ap, in any spelling, reaches one of
// retryd's listeners. A nil Own has none.
func (o *Own) Has(ap netip.AddrPort) bool {
	if o == nil {
		return false
	}
	s := o.set.Load()
	if s == nil {
		return false
	}
	a := Canonical(ap.Addr())
	if a.IsLoopback() || a.IsUnspecified() {
		// Connecting to 0.0.0.0 or :: reaches the local host.
		return s.local[ap.Port()]
	}
	return s.exact[netip.AddrPortFrom(a, ap.Port())]
}
