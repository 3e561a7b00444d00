package events

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/sign"
)

// received collects what an operator's endpoint got.
type received struct {
	mu     sync.Mutex
	posts  []Body
	at     []time.Time
	sigs   []string
	failed atomic.Int32 // answers 500 to this many POSTs first
}

func (r *received) server(t *testing.T, signer *sign.Webhooks) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.failed.Load() > 0 {
			r.failed.Add(-1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if signer != nil {
			n, _ := strconv.ParseInt(req.Header.Get(sign.HeaderTimestamp), 10, 64)
			if req.Header.Get(sign.HeaderSignature) != signer.Signature(req.Header.Get(sign.HeaderID), n, body) {
				t.Errorf("a POST with a signature that does not verify: %q", req.Header.Get(sign.HeaderSignature))
			}
		}
		var b Body
		if err := json.Unmarshal(body, &b); err != nil {
			t.Errorf("a POST that is not an events body: %s", body)
		}
		r.mu.Lock()
		r.posts = append(r.posts, b)
		r.at = append(r.at, time.Now())
		r.sigs = append(r.sigs, req.Header.Get(sign.HeaderSignature))
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (r *received) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, b := range r.posts {
		out = append(out, b.Events...)
	}
	return out
}

func waitEvents(t *testing.T, r *received, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(r.events()) < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("received %d events, want %d", len(r.events()), n)
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Events reach every URL, signed, batched into at most one POST per
// Every per URL, in the order they came.
func TestEventsAreBatchedSignedAndSentToEveryURL(t *testing.T) {
	t.Parallel()
	signer, err := sign.ParseSecrets([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		t.Fatal(err)
	}
	var a, b received
	n := New([]string{a.server(t, signer).URL, b.server(t, signer).URL}, signer, nil, quiet, Tuning{Every: 300 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { stop(); <-done }()
	for i := range 50 {
		n.Emit(RequestFailed, map[string]any{"requestId": i})
	}
	waitEvents(t, &a, 50)
	waitEvents(t, &b, 50)
	for i, e := range a.events() {
		if e.Type != RequestFailed || e.Data["requestId"] != float64(i) {
			t.Fatalf("event %d = %+v, want request.failed of %d", i, e, i)
		}
	}
	a.mu.Lock()
	posts, at := len(a.posts), a.at
	a.mu.Unlock()
	if posts > 2 {
		t.Errorf("50 events made %d POSTs, want them batched (at most 2)", posts)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 250*time.Millisecond {
			t.Errorf("two POSTs %v apart, want at least Every (300ms)", gap)
		}
	}
}

// A URL that fails is tried again with backoff; one that keeps failing is
// given up after GiveUpAfter, counted, and never holds Emit.
func TestFailingURLIsRetriedThenGivenUpAndCounted(t *testing.T) {
	t.Parallel()
	var ok, down received
	ok.failed.Store(2)
	down.failed.Store(1 << 30)
	var givenUp atomic.Int64
	n := New([]string{ok.server(t, nil).URL, down.server(t, nil).URL}, nil, func(k int) { givenUp.Add(int64(k)) }, quiet,
		// Long enough that the URL failing twice gets its event on two
		// busy cores; the other is given up after it all the same.
		Tuning{Every: 10 * time.Millisecond, Retry: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond, GiveUpAfter: 3 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { stop(); <-done }()
	start := time.Now()
	n.Emit(EndpointOpened, map[string]any{"endpoint": "https://partner.example"})
	if d := time.Since(start); d > time.Second {
		t.Errorf("Emit took %v", d)
	}
	waitEvents(t, &ok, 1)
	for deadline := time.Now().Add(30 * time.Second); givenUp.Load() < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the event to a URL that keeps failing was never given up")
		}
	}
	if g := givenUp.Load(); g != 1 {
		t.Errorf("%d events given up, want 1", g)
	}
}

// A full buffer drops (and counts) what does not fit; a nil notifier
// takes events and does nothing.
func TestFullBufferDropsAndCounts(t *testing.T) {
	t.Parallel()
	var givenUp atomic.Int64
	n := New([]string{"http://127.0.0.1:1/never"}, nil, func(k int) { givenUp.Add(int64(k)) }, quiet, Tuning{Buffer: 3})
	for range 5 {
		n.Emit(RequestFailed, nil)
	}
	if g := givenUp.Load(); g != 2 {
		t.Errorf("%d events dropped, want 2", g)
	}
	var none *Notifier
	none.Emit(RequestFailed, nil)
	none.Run(context.Background())
}
