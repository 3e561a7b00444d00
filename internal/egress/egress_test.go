package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/retry"
)

func TestAddrAllowedRefusesEveryReservedRange(t *testing.T) {
	t.Parallel()
	g := &Guard{}
	blockedAddrs := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.254",
		"127.0.0.1", "127.8.8.8", "169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255",
		"192.168.0.1", "192.168.255.255", "224.0.0.1", "239.255.255.255", "255.255.255.255",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::ffff:192.168.1.1", "::ffff:0.0.0.0",
		"64:ff9b::7f00:1", "2002:7f00:1::",
	}
	for _, s := range blockedAddrs {
		if g.AddrAllowed(netip.MustParseAddr(s)) {
			t.Errorf("%s allowed, want refused", s)
		}
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
		"192.167.255.255", "169.253.255.255", "2606:4700:4700::1111", "::ffff:8.8.8.8"}
	for _, s := range allowed {
		if !g.AddrAllowed(netip.MustParseAddr(s)) {
			t.Errorf("%s refused, want allowed", s)
		}
	}
}

func TestOptIns(t *testing.T) {
	t.Parallel()
	if !(&Guard{AllowPrivate: true}).AddrAllowed(netip.MustParseAddr("127.0.0.1")) {
		t.Error("AllowPrivate does not allow loopback")
	}
	g := &Guard{Allowed: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	if !g.AddrAllowed(netip.MustParseAddr("10.1.2.3")) || !g.AddrAllowed(netip.MustParseAddr("::ffff:10.1.2.3")) {
		t.Error("ALLOWED_CIDRS 10.1.0.0/16 does not allow 10.1.2.3")
	}
	if g.AddrAllowed(netip.MustParseAddr("10.2.0.1")) {
		t.Error("ALLOWED_CIDRS 10.1.0.0/16 allows 10.2.0.1")
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestCheckHost(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: fakeResolver{
		"public.test":  {netip.MustParseAddr("93.184.216.34")},
		"private.test": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.5")},
	}}
	ctx := context.Background()
	for host, wantBlocked := range map[string]bool{
		"public.test": false, "private.test": true, "127.0.0.1": true, "169.254.169.254": true,
		"::1": true, "8.8.8.8": false, "unresolvable.test": false,
	} {
		err := g.CheckHost(ctx, host)
		if got := errors.Is(err, retry.ErrBlocked); got != wantBlocked {
			t.Errorf("CheckHost(%s) = %v, want blocked=%v", host, err, wantBlocked)
		}
	}
}

// The DNS-rebinding case: the name is public when the request is checked,
// private when the worker dials. The dial-time check must refuse it.
func TestClientRefusesPrivateAddressAtDialTime(t *testing.T) {
	t.Parallel()
	hit := false
	dest := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer dest.Close()
	port := dest.URL[strings.LastIndex(dest.URL, ":")+1:]

	answers := fakeResolver{"rebind.test": {netip.MustParseAddr("93.184.216.34")}}
	g := &Guard{Resolver: answers}
	if err := g.CheckHost(context.Background(), "rebind.test"); err != nil {
		t.Fatalf("submit-time check refused the public answer: %v", err)
	}
	answers["rebind.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	_, err := g.Client().Get("http://rebind.test:" + port + "/")
	if !errors.Is(err, retry.ErrBlocked) {
		t.Fatalf("dial to rebound private address: err %v, want ErrBlocked", err)
	}
	if res := retry.Classify(nil, err, timeNow()); res.Kind != retry.Permanent || res.Class != retry.BlockedDestination {
		t.Errorf("classified as %+v, want permanent blocked_destination", res)
	}
	if hit {
		t.Error("the destination was reached")
	}
}

func TestClientDoesNotFollowRedirectsOrUseProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	defer target.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	}))
	defer redir.Close()
	resp, err := (&Guard{AllowPrivate: true}).Client().Get(redir.URL)
	if err != nil {
		t.Fatalf("Get: %v (a proxy from the environment was used?)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Errorf("status %d, want the 302 itself", resp.StatusCode)
	}
}

func TestReadCapped(t *testing.T) {
	t.Parallel()
	data, trunc, err := ReadCapped(strings.NewReader("abcdef"), 4)
	if err != nil || string(data) != "abcd" || !trunc {
		t.Errorf("ReadCapped over limit = %q, %v, %v", data, trunc, err)
	}
	data, trunc, err = ReadCapped(strings.NewReader("abcd"), 4)
	if err != nil || string(data) != "abcd" || trunc {
		t.Errorf("ReadCapped at limit = %q, %v, %v", data, trunc, err)
	}
}

func timeNow() time.Time { return time.Now() }
