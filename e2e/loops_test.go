package e2e

import (
	"fmt"
	"net"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// submitUntilRefused submits body until the API refuses it with 422
// loop_detected: a listener another process opened is known to every
// process within a few seconds. It fails if body is still accepted then.
func submitUntilRefused(t *testing.T, api, body string) {
	t.Helper()
	var a answer
	deadline := time.Now().Add(6 * time.Second)
	for {
		a = call(t, "POST", api+"/requests", body)
		if a.status == 422 && strings.Contains(a.raw, "loop_detected") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d %s, want 422 loop_detected", body, a.status, a.raw)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// localName is this host's name if it resolves to a local address (as
// "runsc" does in a gVisor sandbox), else "".
func localName(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return ""
	}
	return host
}

// With private destinations allowed, no destination reads a worker's
// /metrics (every tenant's figures): not by its address in any spelling,
// not by a name that resolves to it, not through a proxy, and not when the
// listener opened after the request was accepted.
func TestDestinationsNeverReachAWorkersMetrics(t *testing.T) {
	t.Parallel()
	mport := freePort(t)
	s := startStackWith(t, 0, []string{"ALLOW_PRIVATE_TARGETS=true"},
		[]string{"ALLOW_PRIVATE_TARGETS=true", fmt.Sprintf("METRICS_ADDR=:%d", mport)})
	// Accepted while nothing listens there; due once the worker is up.
	late := s.submit(t, fmt.Sprintf(`{"url":"http://127.0.0.1:%d/metrics","method":"GET","delayMs":3000}`, mport))
	s.startWorker(t)
	metrics := fmt.Sprintf("http://127.0.0.1:%d", mport)
	waitFor(t, 10*time.Second, "the worker's metrics listener", func() bool { return statusOf(metrics+"/healthz") == 200 })

	for _, u := range []string{metrics + "/metrics", fmt.Sprintf("http://localhost:%d/metrics", mport),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/metrics", mport), fmt.Sprintf("http://2130706433:%d/metrics", mport)} {
		submitUntilRefused(t, s.api, fmt.Sprintf(`{"url":%q,"method":"GET"}`, u))
	}
	if host := localName(t); host != "" {
		submitUntilRefused(t, s.api, fmt.Sprintf(`{"url":"http://%s:%d/metrics","method":"GET"}`, host, mport))
	}

	// At dial time: the request accepted before the listener existed.
	doc := s.waitTerminal(t, late, 20*time.Second)
	if doc["status"] != "failed" || doc["failureClass"] != "blocked_destination" || !strings.Contains(fmt.Sprint(doc), "retryd itself listens") {
		t.Errorf("a delivery to the metrics listener accepted before it opened: %.600v", doc)
	}

	// Through a proxy the address is the proxy's: the listener itself
	// refuses what retryd sends.
	target, _ := url.Parse(metrics)
	proxy := newServer(t, httputil.NewSingleHostReverseProxy(target).ServeHTTP)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"method":"GET","maxRetries":0}`, proxy+"/metrics"))
	doc = s.waitTerminal(t, id, 20*time.Second)
	raw := call(t, "GET", s.api+"/requests/"+id, "").raw
	if doc["status"] != "failed" || doc["lastStatusCode"] != 403.0 || strings.Contains(raw, "# HELP") || strings.Contains(raw, "retryd_") {
		t.Errorf("a delivery through a proxy to the metrics listener: %.600s", raw)
	}
}

// Loop detection covers names that resolve to the API and every other
// retryd API on the same Redis.
func TestLoopDetectionCoversNamesAndOtherAPIs(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	port := s.api[strings.LastIndex(s.api, ":")+1:]
	if host := localName(t); host != "" {
		for _, body := range []string{
			fmt.Sprintf(`{"url":"http://%s:%s/requests","method":"POST"}`, host, port),
			fmt.Sprintf(`{"url":"https://example.com","callbackUrl":"http://%s.:%s/requests"}`, host, port),
		} {
			if a := call(t, "POST", s.api+"/requests", body); a.status != 422 || !strings.Contains(a.raw, "loop_detected") {
				t.Errorf("%s: %d %s, want 422 loop_detected", body, a.status, a.raw)
			}
		}
	} else {
		t.Log("this host's name does not resolve: the name case is left to the unit tests")
	}
	other := startStackOn(t, s.redis, 0)
	submitUntilRefused(t, s.api, fmt.Sprintf(`{"url":%q,"method":"POST"}`, other.api+"/requests"))
	submitUntilRefused(t, other.api, fmt.Sprintf(`{"url":%q}`, s.api+"/metrics"))
}

// -dev's QStash dev listener is one of retryd's listeners too.
func TestDevQStashListenerIsNotADestination(t *testing.T) {
	t.Parallel()
	port, qport := freePort(t), freePort(t)
	startProc(t, "api-dev", bin.api, []string{fmt.Sprintf("PORT=%d", port), "API_KEYS=", "LOG_LEVEL=info"},
		"-dev", fmt.Sprintf("-qstash-dev=127.0.0.1:%d", qport))
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, 20*time.Second, "the dev API", func() bool { return statusOf(api+"/healthz") == 200 })
	for _, u := range []string{fmt.Sprintf("http://127.0.0.1:%d/v2/keys", qport), fmt.Sprintf("http://localhost:%d/v2/keys", qport)} {
		submitUntilRefused(t, api, fmt.Sprintf(`{"url":%q,"method":"GET"}`, u))
	}
}
