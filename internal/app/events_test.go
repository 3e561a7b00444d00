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

// A request that fails is told to the operator's events URL: signed like
// deliveries, with its id, tenant, host and why.
func TestFailedRequestIsToldToTheOperator(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	signer, err := sign.ParseSecrets([]string{secret})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []events.Event
	ops := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(sign.HeaderTimestamp), 10, 64)
		if r.Header.Get(sign.HeaderSignature) != signer.Signature(r.Header.Get(sign.HeaderID), ts, body) {
			t.Errorf("operator event with a bad signature: %s", r.Header.Get(sign.HeaderSignature))
		}
		var b events.Body
		if err := json.Unmarshal(body, &b); err != nil {
			t.Errorf("operator event body %s: %v", body, err)
		}
		mu.Lock()
		got = append(got, b.Events...)
		mu.Unlock()
	}))
	t.Cleanup(ops.Close)
	s := startTransitStack(t, map[string]string{"OPERATOR_EVENTS_URL": ops.URL, "SIGNING_SECRETS": secret})
	id := s.submit(t, "/bad", `,"maxRetries":0`)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no operator event 15 s after the request was submitted")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	e := got[0]
	if e.Type != events.RequestFailed || e.Data["requestId"] != id || e.Data["host"] != "127.0.0.1" || e.Data["failureClass"] == "" {
		t.Errorf("operator event %+v, want request.failed of %s with its host and failure class", e, id)
	}
}
