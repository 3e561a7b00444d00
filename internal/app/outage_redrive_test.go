package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryd/retryd/handlers"
)

// outageEnv opens an endpoint after 5 failed attempts and ends a request
// that waited 1 s for it, once a probe made meanwhile failed.
func outageEnv() map[string]string {
	env := map[string]string{"BREAKER_FAIL_AFTER": "1s"}
	for k, v := range breakerEnv {
		env[k] = v
	}
	// Room for the redriven requests to reach the endpoint while its
	// probe is out.
	env["WORKER_CONCURRENCY"] = "4"
	return env
}

// failureClass reads request id's status and failure class.
func (s *healthStack) failureClass(t *testing.T, apiKey, id string) (status, class string) {
	t.Helper()
	r := s.request(t, apiKey, id)
	status, _ = r["status"].(string)
	class, _ = r["failureClass"].(string)
	return status, class
}

// The on-call path after an outage: requests that waited for an endpoint
// past BREAKER_FAIL_AFTER end as endpoint_down, having made no call, and
// only after a probe failed while they waited. The endpoint then stays
// open with nobody waiting and shows no probe time. Once the destination
// is fixed, a bulk redrive of everything (the endpoint open far longer
// than BREAKER_FAIL_AFTER) says which requests go to the open endpoint,
// sends the first as its probe, and delivers every one: none ends as
// endpoint_down again.
func TestARedriveAfterAnOutageIsDelivered(t *testing.T) {
	t.Parallel()
	s := startHealthStackWith(t, outageEnv(), breakerTuning)
	s.answer(http.StatusInternalServerError)
	s.failOnce(t, "k1", "/x", 5)
	// Probes 0.3, 0.9 and 2.1 s after the endpoint opened (the interval
	// doubling) leave most of them waiting past their 1 s.
	var waiters []string
	for range 6 {
		waiters = append(waiters, s.submit(t, "k1", "/w", `,"maxRetries":0`))
	}
	down := 0
	for _, id := range waiters {
		eventually(t, 30*time.Second, id+" ends", func() bool {
			st, _ := s.failureClass(t, "k1", id)
			return st == "failed"
		})
		if _, class := s.failureClass(t, "k1", id); class == "endpoint_down" {
			down++
			if n := s.hitsOf(id); n != 0 {
				t.Errorf("%s ended as endpoint_down after %d calls, want none", id, n)
			}
		}
	}
	if down == 0 || s.hitsOf(waiters...) == 0 {
		t.Fatalf("of the waiters %d ended as endpoint_down and %d calls were probes; want some of each", down, s.hitsOf(waiters...))
	}
	eps := s.notClosed(t, "k1")
	if len(eps) != 1 || eps[0]["state"] != "open" || eps[0]["waiting"] != 0.0 || eps[0]["nextProbeAt"] != nil {
		t.Fatalf("the endpoint after its waiters ended: %v, want open, nobody waiting, no probe time", eps)
	}

	// The destination is back, and holds its first answer (the probe's)
	// until the other redriven requests have reached the endpoint.
	held := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	s.mu.Lock()
	s.status, s.held = http.StatusOK, held
	before := len(s.hits)
	s.mu.Unlock()
	// sent counts the calls made since the redrive (of id only, when given).
	sent := func(id string) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, h := range s.hits[before:] {
			if id == "" || h == id {
				n++
			}
		}
		return n
	}
	code, body := s.call(t, "k1", "POST", "/dlq/redrive", `{"actor":"oncall","reason":"the destination is back"}`)
	var res struct {
		Redriven      []string                `json:"redriven"`
		EndpointsOpen []handlers.HeldEndpoint `json:"endpointsOpen"`
	}
	if err := json.Unmarshal([]byte(body), &res); code != http.StatusOK || err != nil {
		t.Fatalf("bulk redrive: %d %s (%v)", code, body, err)
	}
	if len(res.Redriven) != 5+len(waiters) {
		t.Fatalf("redriven %d, want %d: %s", len(res.Redriven), 5+len(waiters), body)
	}
	if len(res.EndpointsOpen) != 1 || res.EndpointsOpen[0].Endpoint != "http://"+s.host || res.EndpointsOpen[0].State != "open" ||
		len(res.EndpointsOpen[0].IDs) != len(res.Redriven) {
		t.Errorf("the redrive's answer names endpoints %+v open, want http://%s open with all %d redriven", res.EndpointsOpen, s.host, len(res.Redriven))
	}
	eventually(t, 20*time.Second, "the first redriven request is sent as the probe", func() bool { return sent("") == 1 })
	for _, id := range res.Redriven {
		eventually(t, 20*time.Second, id+" is the probe, or waits for it", func() bool {
			r := s.request(t, "k1", id)
			if r["failureClass"] == "endpoint_down" && r["status"] == "failed" {
				t.Fatalf("%s failed at once as endpoint_down while the probe was out", id)
			}
			return sent(id) == 1 || r["waitingFor"] == "endpoint_open"
		})
	}
	release()
	for _, id := range res.Redriven {
		eventually(t, 30*time.Second, id+" is delivered after the redrive", func() bool {
			st, class := s.failureClass(t, "k1", id)
			if class == "endpoint_down" && st == "failed" {
				t.Fatalf("%s failed again as endpoint_down after the redrive", id)
			}
			return st == "completed"
		})
	}
}

// A single redrive of a request whose endpoint is open says so in a
// header of its answer, and redrives it all the same.
func TestARedriveToAnOpenEndpointSaysSo(t *testing.T) {
	t.Parallel()
	// A worker reads an endpoint's state at most once per BreakerRead: the
	// one that saw the first attempt through must not still hold that
	// read (closed) when the redrive comes, which a fast run makes in
	// well under a second.
	tune := breakerTuning
	tune.Flow.BreakerRead = 10 * time.Millisecond
	s := startHealthStackWith(t, breakerEnv, tune)
	s.failOnce(t, "ka", "/fail", 1)
	var failed string
	eventually(t, 10*time.Second, "the failed request is listed", func() bool {
		_, body := s.call(t, "ka", "GET", "/dlq", "")
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(body), &page) == nil && len(page.Data) == 1 {
			failed = page.Data[0].ID
		}
		return failed != ""
	})
	if code, body := s.call(t, "ka", "POST", "/endpoints/http:"+s.host+"/open", ""); code != http.StatusOK {
		t.Fatalf("open: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.api+"/dlq/"+failed+"/redrive", strings.NewReader(`{"actor":"oncall"}`))
	req.Header.Set("Authorization", "Bearer ka")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(handlers.EndpointStateHeader) != "open" {
		t.Errorf("redrive to an endpoint an operator opened: %d, %s %q; want 202 saying open",
			resp.StatusCode, handlers.EndpointStateHeader, resp.Header.Get(handlers.EndpointStateHeader))
	}
	eventually(t, 20*time.Second, "the redriven request waits for its open endpoint", func() bool {
		return s.request(t, "ka", failed)["waitingFor"] == "endpoint_open"
	})
}
