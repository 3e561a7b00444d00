package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests attack the built programs the way the security review did,
// with default settings unless a test says otherwise.

// countingListener is a loopback server that counts connections: the
// target an SSRF would reach.
func countingListener(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int64{}
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
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

func TestSSRFSpellingsOfLoopbackAreRefused(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, nil, nil) // private destinations refused
	port, accepted := countingListener(t)
	hosts := []string{
		"[::1%25lo]", "[::1%25eth0]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[64:ff9b::7f00:1]",
		"[64:ff9b::127.0.0.1]", "[2002:7f00:1::1]", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.0.0.1", "127.1", "127.0.1",
		"127.0.0.1.", "[::]", "0.0.0.0", "0", "[fe80::1%25lo]", "169.254.169.254", "0xa9fea9fe", "[::ffff:169.254.169.254]",
		// What IDNA maps onto loopback: the transport dials 127.0.0.1.
		"１２７.０.０.１", "127。0。0。1", "ｌｏｃａｌｈｏｓｔ", "locaLhost。", "app.localhost",
		// Not globally reachable per IANA: documentation, benchmarking.
		"192.0.2.1", "198.51.100.1", "203.0.113.1", "[2001:db8::1]", "198.18.0.1", "[64:ff9b:1::808:808]",
	}
	for _, h := range hosts {
		target := fmt.Sprintf("http://%s:%d/", h, port)
		for field, body := range map[string]string{
			"url":         fmt.Sprintf(`{"url":%q}`, target),
			"callbackUrl": fmt.Sprintf(`{"url":"https://example.com","callbackUrl":%q}`, target),
		} {
			a := call(t, "POST", s.api+"/requests", body)
			if a.status != 422 || !strings.Contains(a.raw, `"blocked_destination"`) || !strings.Contains(a.raw, `"field":"`+field+`"`) {
				t.Errorf("%s as %s: %d %s, want 422 blocked_destination", target, field, a.status, a.raw)
			}
		}
		a := call(t, "POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"@every 1s","request":{"url":%q}}`, target))
		if a.status != 422 {
			t.Errorf("%s in a schedule: %d %s, want 422", target, a.status, a.raw)
		}
	}
	if list := call(t, "GET", s.api+"/requests", ""); len(list.body["data"].([]any)) != 0 {
		t.Errorf("refused destinations were stored: %s", list.raw)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the loopback target was connected %d times", n)
	}
}

// One submission whose callback points back at retryd's API (through a
// proxy, as a load balancer's public name would) makes no further request.
func TestCallbackAimedAtTheAPIMakesNoChain(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	dest := newDestination(t)
	apiURL, _ := url.Parse(s.api)
	proxy := newServer(t, httputil.NewSingleHostReverseProxy(apiURL).ServeHTTP)

	// Aimed at the API's own address: refused at once.
	a := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"callbackUrl":%q}`, dest.script("/ok", 200), s.api+"/requests"))
	if a.status != 422 || !strings.Contains(a.raw, "loop_detected") {
		t.Errorf("callbackUrl = the API: %d %s, want 422 loop_detected", a.status, a.raw)
	}
	// Through the proxy the API cannot see it is itself: the callback
	// reaches it, and is refused there.
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"callbackUrl":%q}`, dest.script("/ok", 200), proxy+"/requests"))
	var cb map[string]any
	waitFor(t, 30*time.Second, "the callback to fail for good", func() bool {
		cb, _ = s.get(t, id)["callback"].(map[string]any)
		return cb != nil && cb["status"] == "failed"
	})
	if cb["lastStatusCode"] != 422.0 {
		t.Errorf("callback state %v, want refused with 422", cb)
	}
	// A delivery aimed at the API through the proxy fails the same way.
	d := s.submit(t, fmt.Sprintf(`{"url":%q,"method":"POST","headers":{"Content-Type":"application/json"},"body":%q}`,
		proxy+"/requests", fmt.Sprintf(`{"url":%q}`, dest.URL+"/again")))
	doc := s.waitTerminal(t, d, 30*time.Second)
	if doc["status"] != "failed" || doc["lastStatusCode"] != 422.0 {
		t.Errorf("delivery to the API: status %v code %v, want failed with 422", doc["status"], doc["lastStatusCode"])
	}
	if list := call(t, "GET", s.api+"/requests", ""); len(list.body["data"].([]any)) != 2 {
		t.Errorf("%d requests exist, want the 2 submitted: %s", len(list.body["data"].([]any)), list.raw)
	}
}

func TestFailedAuthenticationIsThrottledAcrossAPIProcesses(t *testing.T) {
	t.Parallel()
	env := []string{"API_KEYS=the-key"}
	s := startStackWith(t, 0, env, env)
	port := freePort(t)
	second := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProc(t, "api2", bin.api, append(append([]string{}, s.env...), fmt.Sprintf("PORT=%d", port)))
	waitFor(t, 20*time.Second, "second API", func() bool {
		resp, err := http.Get(second + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	statuses := map[int]int{}
	for i := 0; i < 30; i++ {
		base := s.api
		if i%2 == 1 {
			base = second
		}
		a := call(t, "GET", base+"/requests", "", "Authorization", fmt.Sprintf("Bearer guess-%d", i))
		statuses[a.status]++
		if a.status == 429 && a.header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if statuses[401] != 20 || statuses[429] != 10 {
		t.Errorf("answers to 30 wrong keys over two APIs: %v, want 20×401 then 10×429", statuses)
	}
	for _, base := range []string{s.api, second} {
		if a := call(t, "GET", base+"/requests", "", "Authorization", "Bearer the-key"); a.status != 200 {
			t.Errorf("valid key at %s after the throttle: %d", base, a.status)
		}
	}
	// The dashboard refuses a cross-site state change even with the key.
	a := call(t, "POST", s.api+"/monitoring/api/queues/retryd:pause", "", "Authorization", "Bearer the-key", "Origin", "https://evil.example")
	if a.status != 403 {
		t.Errorf("cross-origin dashboard pause: %d %s, want 403", a.status, a.raw)
	}
}

// A secret in a destination's query string reaches the destination and
// nothing else: not the document, not the error text, not the dashboard,
// not the logs.
func TestQuerySecretsAreRedactedEverywhereButTheDestination(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	closed := freePort(t)
	failing := s.submit(t, fmt.Sprintf(`{"url":"http://127.0.0.1:%d/x?token=SECRET-ONE&page=1","maxRetries":0}`, closed))
	var query atomic.Value
	hook := newServer(t, func(w http.ResponseWriter, r *http.Request) { query.Store(r.URL.RawQuery) })
	ok := s.submit(t, fmt.Sprintf(`{"url":%q}`, hook+"/hook?api_key=SECRET-TWO"))
	s.waitTerminal(t, failing, 20*time.Second)
	s.waitTerminal(t, ok, 20*time.Second)
	if q, _ := query.Load().(string); q != "api_key=SECRET-TWO" {
		t.Errorf("the destination got query %q, want the real api_key=SECRET-TWO", q)
	}
	full := call(t, "GET", s.api+"/requests/"+failing, "").raw
	if !strings.Contains(full, "connection refused") || !strings.Contains(full, "page=1") {
		t.Errorf("redaction hid too much: %s", full)
	}
	views := map[string]string{
		"document":  full,
		"list":      call(t, "GET", s.api+"/requests", "").raw,
		"dlq":       call(t, "GET", s.api+"/dlq", "").raw,
		"dashboard": call(t, "GET", s.api+"/monitoring/api/queues/retryd/archived_tasks", "").raw,
	}
	for _, p := range append([]*proc{s.apiProc}, s.workers...) {
		b, _ := os.ReadFile(p.log)
		views[p.name+" log"] = string(b)
	}
	for name, v := range views {
		for _, secret := range []string{"SECRET-ONE", "SECRET-TWO"} {
			if strings.Contains(v, secret) {
				t.Errorf("%s shows %s", name, secret)
			}
		}
	}
}

// -dev opens loopback and private ranges only, and listens on loopback.
func TestDevModeKeepsMetadataRefusedAndListensOnLoopback(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	startProc(t, "api-dev", bin.api, []string{fmt.Sprintf("PORT=%d", port), "API_KEYS=", "LOG_LEVEL=info"}, "-dev")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, 20*time.Second, "dev API", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1%25lo]/", "http://[::ffff:169.254.169.254]/"} {
		if a := call(t, "POST", base+"/requests", fmt.Sprintf(`{"url":%q}`, u)); a.status != 422 {
			t.Errorf("-dev accepted %s: %d %s", u, a.status, a.raw)
		}
	}
	dest := newDestination(t)
	a := call(t, "POST", base+"/requests", fmt.Sprintf(`{"url":%q}`, dest.script("/local", 200)))
	if a.status != 202 {
		t.Fatalf("-dev refused a loopback destination: %d %s", a.status, a.raw)
	}
	waitFor(t, 10*time.Second, "the loopback delivery", func() bool { return len(dest.calls("/local")) == 1 })
	// DNS rebinding: a page of rebind.attacker.example whose name now
	// points at 127.0.0.1 reaches the port, with its own Host and Origin.
	for _, host := range []string{"rebind.attacker.example", fmt.Sprintf("rebind.attacker.example:%d", port), "127.0.0.1.nip.io", "localhost.attacker.example"} {
		for _, method := range []string{"GET", "POST"} {
			req, _ := http.NewRequest(method, base+"/requests", strings.NewReader(fmt.Sprintf(`{"url":%q}`, dest.script("/rebound", 200))))
			req.Host = host
			req.Header.Set("Origin", "http://"+host)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 403 {
				t.Errorf("%s /requests with Host %s: %d, want 403", method, host, resp.StatusCode)
			}
		}
	}
	for _, host := range []string{"localhost", fmt.Sprintf("LOCALHOST:%d", port), fmt.Sprintf("[::1]:%d", port), "127.0.0.1"} {
		req, _ := http.NewRequest("GET", base+"/requests", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET /requests with Host %s: %d, want 200", host, resp.StatusCode)
		}
	}
	if n := len(dest.calls("/rebound")); n != 0 {
		t.Errorf("a rebound page got %d deliveries made", n)
	}
	// Not reachable on any other address of this machine.
	addrs, _ := net.InterfaceAddrs()
	for _, ad := range addrs {
		ip, _, _ := net.ParseCIDR(ad.String())
		if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), fmt.Sprint(port)), time.Second)
		if err == nil {
			c.Close()
			t.Errorf("-dev API reachable on %s", ip)
		}
	}
}
