// Package listeners tells every retryd process where all of retryd listens
// (APIs, workers' metrics listeners, the QStash dev listener), so that the
// egress guard refuses those addresses as destinations. Each process lists
// its own addresses in Redis, renews them every Every and reads everyone's
// back; entries of a process that stopped renewing lapse after TTL. Its
// own addresses are refused from the moment it listens, Redis or not.
package listeners

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/egress"
)

// Renewal timings: a new listener is known to every process within Every;
// a stopped one that could not say so is forgotten after TTL.
const (
	Every = 2 * time.Second
	TTL   = 30 * time.Second
)

// Registry is where processes list their listeners (record.Store).
type Registry interface {
	Listeners(ctx context.Context, own []string, now time.Time, ttl time.Duration) ([]string, error)
	ForgetListeners(ctx context.Context, own []string) error
}

// Book keeps Own up to date with this process's listeners and everyone
// else's.
type Book struct {
	registry Registry
	own      *egress.Own
	clock    clock.Clock
	log      *slog.Logger

	mu     sync.Mutex
	local  []netip.AddrPort
	others []netip.AddrPort // as last read from the registry
}

// New returns a Book that keeps own, reading and writing registry.
func New(registry Registry, own *egress.Own, c clock.Clock, log *slog.Logger) *Book {
	return &Book{registry: registry, own: own, clock: c, log: log}
}

// Addrs are the addresses a listener bound to a answers on. A wildcard
// bind (":8080", "0.0.0.0:8080", "[::]:8080") answers on every address of
// every interface of the host: it is listed as the wildcard itself (which
// stands for loopback, see egress.Own) and as each interface address, so
// that other hosts refuse this host's addresses too.
func Addrs(a net.Addr) []netip.AddrPort {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return nil
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return nil
	}
	port := uint16(tcp.Port)
	out := []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), port)}
	if !ip.IsUnspecified() {
		return out
	}
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, ia := range ifaces {
		if p, err := netip.ParsePrefix(ia.String()); err == nil {
			out = append(out, netip.AddrPortFrom(p.Addr().Unmap(), port))
		}
	}
	return out
}

// Add records a listener of this process: refused at once here, and
// listed in the registry for the others (at once if Redis answers, else
// at the next renewal).
func (b *Book) Add(ctx context.Context, a net.Addr) {
	b.mu.Lock()
	for _, ap := range Addrs(a) {
		if !slices.Contains(b.local, ap) {
			b.local = append(b.local, ap)
		}
	}
	b.publishLocked()
	b.mu.Unlock()
	if err := b.Refresh(ctx); err != nil {
		b.log.Warn("could not list this process's listeners in Redis; other retryd processes will refuse them as destinations from the next renewal", "err", err)
	}
}

// Refresh renews this process's entries and reads everyone's.
func (b *Book) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b.mu.Lock()
	own := texts(b.local)
	b.mu.Unlock()
	all, err := b.registry.Listeners(ctx, own, b.clock.Now(), TTL)
	if err != nil {
		return err
	}
	others := make([]netip.AddrPort, 0, len(all))
	for _, s := range all {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			others = append(others, ap)
		}
	}
	b.mu.Lock()
	b.others = others
	b.publishLocked()
	b.mu.Unlock()
	return nil
}

// publishLocked gives Own the union of local and others.
func (b *Book) publishLocked() {
	b.own.Set(append(slices.Clone(b.local), b.others...))
}

// Run renews every Every until ctx ends, then removes this process's
// entries (a process killed instead leaves them to lapse).
func (b *Book) Run(ctx context.Context) {
	for clock.Sleep(ctx, b.clock, Every) == nil {
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("could not renew the list of retryd's listeners; keeping the last one read", "err", err)
		}
	}
	b.mu.Lock()
	own := texts(b.local)
	b.mu.Unlock()
	fctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.registry.ForgetListeners(fctx, own); err != nil {
		b.log.Warn("could not remove this process's listeners from Redis; they lapse on their own", "err", err, "after", TTL)
	}
}

func texts(aps []netip.AddrPort) []string {
	out := make([]string, len(aps))
	for i, ap := range aps {
		out[i] = ap.String()
	}
	return out
}

// Own is the set this Book keeps up to date, for the egress guard.
func (b *Book) Own() *egress.Own { return b.own }
