package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
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
	// canceled: ids whose DELETE answered 200.
	canceled map[string]bool
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
}

func newLedger() *ledger {
	return &ledger{acked: map[string]string{}, bodies: map[string]string{}, sent: map[string]time.Time{},
		canceled: map[string]bool{}, hits: map[string][]destHit{}, keyIDs: map[string]map[string]bool{}}
}

// destination answers 503 to one call in ten (so retries happen through
// the faults too) and 200 to the others, noting every call.
func (l *ledger) destination(t testing.TB) string {
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ok := rand.IntN(10) != 0
		id, key := r.Header.Get("Retryd-Request-Id"), r.Header.Get("Idempotency-Key")
		l.mu.Lock()
		l.hits[id] = append(l.hits[id], destHit{at: time.Now(), ok: ok})
		if l.keyIDs[key] == nil {
			l.keyIDs[key] = map[string]bool{}
		}
		l.keyIDs[key][id] = true
		l.mu.Unlock()
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
// submission in ten is delayed a second and canceled once acknowledged.
func (l *ledger) submitter(api, dest string, next *atomic.Int64, pace time.Duration, stop *atomic.Bool) {
	for !stop.Load() {
		i := next.Add(1)
		key := fmt.Sprintf("fo-%d", i)
		extra := ""
		if i%10 == 0 {
			extra = `,"delayMs":1000`
		}
		body := fmt.Sprintf(`{"url":%q,"method":"POST","body":"job %d","maxRetries":20,"backoffMs":100,"maxBackoffMs":1000,"timeoutMs":5000%s}`,
			dest+"/job", i, extra)
		id := l.submit(api, key, body, time.Now().Add(2*time.Minute))
		if id != "" && i%10 == 0 {
			l.cancel(api, id, time.Now().Add(10*time.Second))
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
				l.canceled[id] = true
				l.mu.Unlock()
			}
			return
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
