package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/retryd/retryd/internal/retry"
)

// listenerAt is a real listener on loopback that counts the calls it gets.
func listenerAt(t *testing.T) (*httptest.Server, uint16, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, uint16(srv.Listener.Addr().(*net.TCPAddr).Port), &hits
}

func TestOwnMatchesEverySpellingOfAListener(t *testing.T) {
	t.Parallel()
	var o Own
	o.Set([]netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:3000"), netip.MustParseAddrPort("10.0.0.5:9090"),
		netip.MustParseAddrPort("[::1]:8080")})
	for _, s := range []string{"127.0.0.1:3000", "127.1.2.3:3000", "[::1]:3000", "0.0.0.0:3000", "[::ffff:127.0.0.1]:3000",
		"10.0.0.5:9090", "[::ffff:10.0.0.5]:9090", "127.0.0.1:8080", "[64:ff9b::7f00:1]:8080"} {
		if !o.Has(netip.MustParseAddrPort(s)) {
			t.Errorf("%s is not a listener, want it one", s)
		}
	}
	for _, s := range []string{"127.0.0.1:3001", "10.0.0.6:9090", "10.0.0.5:3001", "93.184.216.34:3000"} {
		if o.Has(netip.MustParseAddrPort(s)) {
			t.Errorf("%s is a listener, want not", s)
		}
	}
	var none *Own
	if none.Has(netip.MustParseAddrPort("127.0.0.1:3000")) {
		t.Error("a nil Own has listeners")
	}
}

// A name that resolves to a listener is refused at submit, on any of its
// addresses, even with private destinations allowed; another port of the
// same host is not.
func TestCheckTargetRefusesNamesThatResolveToAListener(t *testing.T) {
	t.Parallel()
	own := &Own{}
	own.Set([]netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:3000")})
	g := &Guard{AllowPrivate: true, Own: own, Resolver: fakeResolver{
		"runsc":    {netip.MustParseAddr("127.0.1.1")},
		"two.test": {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("::1")},
	}}
	for _, host := range []string{"runsc", "two.test", "localhost", "127.0.0.1", "2130706433", "::1"} {
		err := g.CheckTarget(context.Background(), host, 3000)
		if !errors.Is(err, ErrOwnListener) || !errors.Is(err, retry.ErrBlocked) {
			t.Errorf("CheckTarget(%s, 3000) = %v, want ErrOwnListener", host, err)
		}
		if err := g.CheckTarget(context.Background(), host, 3001); err != nil {
			t.Errorf("CheckTarget(%s, 3001) = %v, want allowed", host, err)
		}
	}
}

// At dial time the address connected to decides: a name that resolved
// elsewhere at submit and resolves to a listener now is not connected.
func TestClientNeverConnectsToAListener(t *testing.T) {
	t.Parallel()
	_, port, hits := listenerAt(t)
	own := &Own{}
	own.Set([]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)})
	g := &Guard{AllowPrivate: true, Own: own, Resolver: fakeResolver{"rebind.test": {netip.MustParseAddr("127.0.0.1")}}}
	for _, u := range []string{"http://127.0.0.1:%d/metrics", "http://localhost:%d/metrics", "http://rebind.test:%d/metrics", "http://[::ffff:127.0.0.1]:%d/metrics"} {
		_, err := g.Client().Get(fmt.Sprintf(u, port))
		if !errors.Is(err, ErrOwnListener) {
			t.Errorf("GET %s: %v, want ErrOwnListener", fmt.Sprintf(u, port), err)
		}
		if res := retry.Classify(nil, err, timeNow()); res.Kind != retry.Permanent {
			t.Errorf("classified as %+v, want permanent", res)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the listener was reached %d times", n)
	}
}

// Everything the client sends carries the marker retryd's listeners
// refuse, and a caller's request is not changed by it.
func TestClientMarksEveryCall(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got.Store(r.Header.Get(RequestIDHeader)) }))
	defer srv.Close()
	c := (&Guard{AllowPrivate: true}).Client()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, _ := got.Load().(string); v == "" {
		t.Errorf("a call without %s reached the destination unmarked", RequestIDHeader)
	}
	if req.Header.Get(RequestIDHeader) != "" {
		t.Error("the client changed the caller's request")
	}
	req.Header.Set(RequestIDHeader, "01abc")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, _ := got.Load().(string); v != "01abc" {
		t.Errorf("%s = %q, want the caller's 01abc", RequestIDHeader, v)
	}
}
