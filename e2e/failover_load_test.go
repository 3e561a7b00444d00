package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ledger is what the clients and the destination of a failover run saw:
// the checker compares it with the records.
type ledger struct {
	mu sync.Mutex
	// acked: Idempotency-Key → the request id its 202 (or replayed 200) named.
	acked  map[string]string
	bodies map[string]string // Idempotency-Key → its body (for the final replay)
	// sent: request id → when the submission that got it acknowledged was sent.
	sent map[string]time.Time
	// ackTimes: when each acknowledgement arrived, by when it was sent.
	acks []ackEvent
	// canceled: ids whose DELETE answered 200, and when it did.
	canceled map[string]time.Time
	// redriven: ids whose POST /dlq/{id}/redrive answered 202, and when
	// the first call of that redrive was sent.
	redriven map[string]time.Time
	// ops: the cancels and redrives still under way.
	ops sync.WaitGroup
	// hits: the destination's calls by Retryd-Request-Id.
	hits map[string][]destHit
	// keyIDs: Idempotency-Key → the request ids that reached the destination.
	keyIDs map[string]map[string]bool

	twice        []string // keys acknowledged with two different ids
	unavailable  int      // 503 answers
	noRetryAfter int      // 503 answers without Retry-After
	unexpected   []string // answers other than 202, 200 and 503
	dropped      int      // calls a client abandoned mid-call
	abandoned    int      // submissions never acknowledged before the end
}

type ackEvent struct{ sent, at time.Time }

type destHit struct {
	at time.Time
	ok bool
	n  int // its Retryd-Attempt
}

func newLedger() *ledger {
	return &ledger{acked: map[string]string{}, bodies: map[string]string{}, sent: map[string]time.Time{},
		canceled: map[string]time.Time{}, redriven: map[string]time.Time{}, hits: map[string][]destHit{}, keyIDs: map[string]map[string]bool{}}
}

// destination answers 503 to one call in ten (so retries happen through
// the faults too) and 200 to the others, noting every call. On /flaky it
// answers 500 to a request's first call and 200 to the others: a request
// with no retries left fails, and a redrive completes it.
func (l *ledger) destination(t testing.TB) string {
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ok := rand.IntN(10) != 0
		id, key := r.Header.Get("Retryd-Request-Id"), r.Header.Get("Idempotency-Key")
		l.mu.Lock()
		if r.URL.Path == "/flaky" {
			ok = len(l.hits[id]) > 0
		}
		n, _ := strconv.Atoi(r.Header.Get("Retryd-Attempt"))
		l.hits[id] = append(l.hits[id], destHit{at: time.Now(), ok: ok, n: n})
		if l.keyIDs[key] == nil {
			l.keyIDs[key] = map[string]bool{}
		}
		l.keyIDs[key][id] = true
		l.mu.Unlock()
		if !ok && r.URL.Path == "/flaky" {
			w.WriteHeader(500)
			return
		}
		if !ok {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	})
}

// submitter submits until stop, each submission retried with its
// Idempotency-Key until acknowledged. One call in twenty is abandoned
// after a few milliseconds (a client whose connection dies mid-call); one
// submission in ten is delayed a second and canceled once acknowledged;
// one in ten goes to /flaky with no retries, fails, and is redriven (by
// another goroutine, so the load goes on).
func (l *ledger) submitter(api, dest string, next *atomic.Int64, pace time.Duration, stop *atomic.Bool) {
	for !stop.Load() {
		i := next.Add(1)
		key := fmt.Sprintf("fo-%d", i)
		extra, path, retries := "", "/job", 20
		switch i % 10 {
		case 0:
			extra = `,"delayMs":1000`
		case 5:
			path, retries = "/flaky", 0
		}
		body := fmt.Sprintf(`{"url":%q,"method":"POST","body":"job %d","maxRetries":%d,"backoffMs":100,"maxBackoffMs":1000,"timeoutMs":5000%s}`,
			dest+path, i, retries, extra)
		id := l.submit(api, key, body, time.Now().Add(2*time.Minute))
		switch {
		case id != "" && i%10 == 0:
			l.cancel(api, id, time.Now().Add(10*time.Second))
		case id != "" && i%10 == 5:
			l.ops.Add(1)
			go func() { defer l.ops.Done(); l.redriveWhenFailed(api, id, time.Now().Add(time.Minute)) }()
		}
		time.Sleep(pace)
	}
}

// submit sends one submission until it is acknowledged or until giveUp.
func (l *ledger) submit(api, key, body string, giveUp time.Time) string {
	l.mu.Lock()
	l.bodies[key] = body
	l.mu.Unlock()
	for time.Now().Before(giveUp) {
		timeout, abandon := 15*time.Second, rand.IntN(20) == 0
		if abandon {
			timeout = time.Duration(1+rand.IntN(50)) * time.Millisecond
		}
		sent := time.Now()
		status, header, raw, err := post(api+"/requests", body, key, timeout)
		switch {
		case err != nil:
			l.mu.Lock()
			l.dropped++
			l.mu.Unlock()
		case status == 202 || status == 200:
			var doc struct{ ID string }
			_ = json.Unmarshal(raw, &doc)
			l.ack(key, doc.ID, sent)
			return doc.ID
		case status == 503:
			l.mu.Lock()
			l.unavailable++
			if header.Get("Retry-After") == "" {
				l.noRetryAfter++
			}
			l.mu.Unlock()
		default:
			l.mu.Lock()
			l.unexpected = append(l.unexpected, fmt.Sprintf("%s: %d %s", key, status, raw))
			l.mu.Unlock()
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.mu.Lock()
	l.abandoned++
	l.mu.Unlock()
	return ""
}

func (l *ledger) ack(key, id string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.acked[key]; ok && prev != id {
		l.twice = append(l.twice, key)
	}
	if _, ok := l.acked[key]; !ok {
		l.acked[key], l.sent[id] = id, sent
	}
	l.acks = append(l.acks, ackEvent{sent: sent, at: time.Now()})
}

// cancel cancels id, retrying through outages; a 200 marks it canceled.
func (l *ledger) cancel(api, id string, giveUp time.Time) {
	for time.Now().Before(giveUp) {
		ctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "DELETE", api+"/requests/"+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		stop()
		if err == nil && resp.StatusCode != 503 && resp.StatusCode < 500 {
			if resp.StatusCode == 200 {
				l.mu.Lock()
				l.canceled[id] = time.Now()
				l.mu.Unlock()
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// redriveWhenFailed waits for request id to fail, then redrives it,
// retrying through outages with the redrive's own Idempotency-Key (a
// repeat of a redrive made but not confirmed answers 202 again); a 202
// marks it redriven.
func (l *ledger) redriveWhenFailed(api, id string, giveUp time.Time) {
	for {
		a, err := tryCall("GET", api+"/requests/"+id, "")
		if err == nil && a.status == 200 && a.body["status"] == "failed" {
			break
		}
		if err == nil && a.status == 200 && terminal(a.body) || time.Now().After(giveUp) {
			return // completed (its failure lost to a fault) or canceled: nothing to redrive
		}
		time.Sleep(200 * time.Millisecond)
	}
	var first time.Time
	for time.Now().Before(giveUp) {
		sent := time.Now()
		if first.IsZero() {
			first = sent
		}
		status, _, _, err := post(api+"/dlq/"+id+"/redrive", `{"actor":"failover","reason":"redrive check"}`, "redrive-"+id, 15*time.Second)
		if err == nil && status == 202 {
			l.mu.Lock()
			l.redriven[id] = first
			l.mu.Unlock()
			return
		}
		if err == nil && status != 503 && status < 500 {
			return // refused: not acknowledged
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// post submits body with an Idempotency-Key; the client gives up after
// timeout (its connection closes mid-call).
func post(url, body, key string, timeout time.Duration) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, err
}

// ackedAfter is when the first submission sent at or after from was
// acknowledged (zero: none yet).
func (l *ledger) ackedAfter(from time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, a := range l.acks {
		if !a.sent.Before(from) && (first.IsZero() || a.at.Before(first)) {
			first = a.at
		}
	}
	return first
}

// deliveredAfter is when the destination first heard of a request that
// was submitted at or after from (zero: none yet).
func (l *ledger) deliveredAfter(from time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for id, hs := range l.hits {
		if sent, ok := l.sent[id]; ok && !sent.Before(from) && len(hs) > 0 && (first.IsZero() || hs[0].at.Before(first)) {
			first = hs[0].at
		}
	}
	return first
}

func (l *ledger) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}
