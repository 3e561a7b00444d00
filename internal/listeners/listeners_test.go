package listeners

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// A process refuses its own listener at once, and another process on the
// same Redis refuses it from its next renewal; once the first stops, the
// second forgets it.
func TestProcessesOnOneRedisRefuseEachOthersListeners(t *testing.T) {
	t.Parallel()
	store := record.NewStore(redistest.Start(t).Client(), time.Hour)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	apiOwn, workerOwn := &egress.Own{}, &egress.Own{}
	api, worker := New(store, apiOwn, clock.Real, log), New(store, workerOwn, clock.Real, log)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); api.Run(ctx) }()

	ln := listen(t, "127.0.0.1:0")
	at := ln.Addr().(*net.TCPAddr).AddrPort()
	api.Add(context.Background(), ln.Addr())
	if !apiOwn.Has(at) {
		t.Errorf("the API does not refuse its own listener %s", at)
	}
	if workerOwn.Has(at) {
		t.Fatalf("the worker refuses %s before it read the registry", at)
	}
	if err := worker.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !workerOwn.Has(at) || !workerOwn.Has(netip.AddrPortFrom(netip.MustParseAddr("127.0.1.1"), at.Port())) {
		t.Errorf("the worker does not refuse the API's listener %s", at)
	}
	stop()
	<-done
	if err := worker.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if workerOwn.Has(at) {
		t.Errorf("the worker still refuses %s after the API stopped", at)
	}
}

// A wildcard listen is every local address on its port.
func TestWildcardListenIsEveryLocalAddress(t *testing.T) {
	t.Parallel()
	ln := listen(t, ":0")
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	own := &egress.Own{}
	own.Set(Addrs(ln.Addr()))
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range ifaces {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil {
			continue
		}
		if ap := netip.AddrPortFrom(p.Addr(), port); !own.Has(ap) {
			t.Errorf("%s (an interface address) is not refused", ap)
		}
	}
	for _, s := range []string{"127.0.0.1", "::1", "0.0.0.0"} {
		if ap := netip.AddrPortFrom(netip.MustParseAddr(s), port); !own.Has(ap) {
			t.Errorf("%s is not refused", ap)
		}
	}
}
