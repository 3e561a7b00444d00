package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/events"
	"github.com/retryd/retryd/internal/sign"
)

// operatorEndpoint is an operator's events URL: it checks each POST's
// signature (signer nil: none) and keeps the events.
func operatorEndpoint(t *testing.T, signer *sign.Webhooks) (url string, got func() []events.Event) {
	var mu sync.Mutex
	var all []events.Event
	ops := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if signer != nil {
			ts, _ := strconv.ParseInt(r.Header.Get(sign.HeaderTimestamp), 10, 64)
			if r.Header.Get(sign.HeaderSignature) != signer.Signature(r.Header.Get(sign.HeaderID), ts, body) {
				t.Errorf("operator event with a bad signature: %s", r.Header.Get(sign.HeaderSignature))
			}
		}
		var b events.Body
		if err := json.Unmarshal(body, &b); err != nil {
			t.Errorf("operator event body %s: %v", body, err)
		}
		mu.Lock()
		all = append(all, b.Events...)
		mu.Unlock()
	}))
	t.Cleanup(ops.Close)
	return ops.URL, func() []events.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]events.Event(nil), all...)
	}
}

// A request that fails is told to the operator's events URL: signed like
// deliveries, with its id, tenant, host and why.
func TestFailedRequestIsToldToTheOperator(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	signer, err := sign.ParseSecrets([]string{secret})
	if err != nil {
		t.Fatal(err)
	}
	url, got := operatorEndpoint(t, signer)
	s := startTransitStack(t, map[string]string{"OPERATOR_EVENTS_URL": url, "SIGNING_SECRETS": secret})
	id := s.submit(t, "/bad", `,"maxRetries":0`)
	for deadline := time.Now().Add(15 * time.Second); len(got()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no operator event 15 s after the request was submitted")
		}
	}
	e := got()[0]
	if e.Type != events.RequestFailed || e.Data["requestId"] != id || e.Data["host"] != "127.0.0.1" || e.Data["failureClass"] == "" {
		t.Errorf("operator event %+v, want request.failed of %s with its host and failure class", e, id)
	}
}
