// Package events tells an operator's own endpoints what happened
// (OPERATOR_EVENTS_URL): a request failed, an endpoint opened or closed.
// Each URL gets at most one POST a second, carrying every event since the
// last, signed like deliveries (Standard Webhooks, SIGNING_SECRETS).
//
// Events never slow deliveries: Emit only appends to a bounded buffer in
// memory, and the posting runs beside the work. A POST that fails is sent
// again with a doubling pause, for up to GiveUpAfter; the events of one
// given up (or dropped from a full buffer) are counted (GivenUp), never
// kept. The URLs are the operator's configuration, so the destination
// rules of deliveries do not apply to them. A process that stops loses
// the events it had not sent: they are a notification, not a record (the
// records and /metrics hold the facts).
package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retryd/retryd/internal/sign"
	"github.com/retryd/retryd/internal/tuning"
)

// The event types.
const (
	RequestFailed  = "request.failed"
	EndpointOpened = "endpoint.opened"
	EndpointClosed = "endpoint.closed"
	// CredentialExpiring: a credential's certificate is within 14 days of
	// its notAfter; CredentialFailing: its token endpoint keeps failing.
	CredentialExpiring = "credential.expiring"
	CredentialFailing  = "credential.failing"
)

// Event is one thing that happened.
type Event struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// Tuning are the notifier's timings and bounds; a zero field takes
// DefaultTuning's.
type Tuning struct {
	// Every is the least time between two POSTs to one URL.
	Every time.Duration
	// Retry is the first pause after a failed POST, doubling up to
	// RetryMax; GiveUpAfter is how long a batch is tried.
	Retry, RetryMax, GiveUpAfter time.Duration
	// Timeout bounds one POST.
	Timeout time.Duration
	// Buffer is how many events wait per URL at most; Batch how many one
	// POST carries at most.
	Buffer, Batch int
}

// DefaultTuning are the notifier's defaults.
var DefaultTuning = Tuning{Every: time.Second, Retry: time.Second, RetryMax: time.Minute, GiveUpAfter: 10 * time.Minute,
	Timeout: 10 * time.Second, Buffer: 10000, Batch: 500}

func (t Tuning) withDefaults() Tuning {
	d := tuning.WithDefaults(t, DefaultTuning)
	if d.Buffer <= 0 {
		d.Buffer = DefaultTuning.Buffer
	}
	if d.Batch <= 0 {
		d.Batch = DefaultTuning.Batch
	}
	return d
}

// Notifier posts events to the operator's URLs. The zero value and a nil
// *Notifier take events and send nothing.
type Notifier struct {
	sinks []*sink
	// givenUp counts the events given up or dropped, for GivenUp.
	givenUp func(n int)
	log     *slog.Logger
	wg      sync.WaitGroup
}

// New returns the notifier of urls (none: a notifier that sends nothing),
// signing with signer (nil: unsigned), counting what it gives up with
// givenUp (nil: not counted). Run sends.
func New(urls []string, signer *sign.Webhooks, givenUp func(n int), log *slog.Logger, tune Tuning) *Notifier {
	tune = tune.withDefaults()
	n := &Notifier{givenUp: givenUp, log: log}
	client := &http.Client{Timeout: tune.Timeout}
	for _, u := range urls {
		n.sinks = append(n.sinks, &sink{url: u, signer: signer, client: client, tune: tune, wake: make(chan struct{}, 1), n: n})
	}
	return n
}

// Emit queues an event of type typ for every URL. It never blocks: an
// event that finds a URL's buffer full is dropped and counted.
func (n *Notifier) Emit(typ string, data map[string]any) {
	if n == nil || len(n.sinks) == 0 {
		return
	}
	e := Event{Type: typ, Timestamp: time.Now().UTC(), Data: data}
	for _, s := range n.sinks {
		s.add(e)
	}
}

// Run posts until ctx ends, then tries once more to send what waits
// (within a Timeout).
func (n *Notifier) Run(ctx context.Context) {
	if n == nil {
		return
	}
	for _, s := range n.sinks {
		n.wg.Add(1)
		go func() { defer n.wg.Done(); s.run(ctx) }()
	}
	n.wg.Wait()
}

// gaveUp counts k events given up.
func (n *Notifier) gaveUp(k int, url string, why error) {
	if k == 0 {
		return
	}
	if n.log != nil {
		n.log.Warn("operator events given up", "url", url, "events", k, "err", why)
	}
	if n.givenUp != nil {
		n.givenUp(k)
	}
}

// sink is one URL's buffer and sender.
type sink struct {
	url    string
	signer *sign.Webhooks
	client *http.Client
	tune   Tuning
	wake   chan struct{}
	n      *Notifier

	mu      sync.Mutex
	waiting []Event
}

func (s *sink) add(e Event) {
	s.mu.Lock()
	full := len(s.waiting) >= s.tune.Buffer
	if !full {
		s.waiting = append(s.waiting, e)
	}
	s.mu.Unlock()
	if full {
		s.n.gaveUp(1, s.url, fmt.Errorf("buffer of %d events full", s.tune.Buffer))
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take removes up to Batch waiting events.
func (s *sink) take() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := min(len(s.waiting), s.tune.Batch)
	batch := s.waiting[:k:k]
	s.waiting = s.waiting[k:]
	return batch
}

func (s *sink) run(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			s.flush()
			return
		case <-s.wake:
		}
		// At most one POST per Every: events that come meanwhile join it.
		if wait := time.Until(last.Add(s.tune.Every)); wait > 0 {
			select {
			case <-ctx.Done():
				s.flush()
				return
			case <-time.After(wait):
			}
		}
		for batch := s.take(); len(batch) > 0; batch = s.take() {
			last = time.Now()
			s.deliver(ctx, batch)
			if s.pending() {
				select {
				case <-ctx.Done():
					s.flush()
					return
				case <-time.After(s.tune.Every):
				}
			}
		}
	}
}

func (s *sink) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting) > 0
}

// flush sends what waits once, as the process stops.
func (s *sink) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), s.tune.Timeout)
	defer cancel()
	if batch := s.take(); len(batch) > 0 {
		if err := s.post(ctx, batch); err != nil {
			s.n.gaveUp(len(batch), s.url, err)
		}
	}
}

// deliver posts batch, again with a doubling pause while it fails, for up
// to GiveUpAfter.
func (s *sink) deliver(ctx context.Context, batch []Event) {
	pause := s.tune.Retry
	end := time.Now().Add(s.tune.GiveUpAfter)
	for {
		err := s.post(ctx, batch)
		if err == nil {
			return
		}
		if time.Now().Add(pause).After(end) || ctx.Err() != nil {
			s.n.gaveUp(len(batch), s.url, err)
			return
		}
		jittered := pause/2 + time.Duration(rand.Int64N(int64(pause/2)+1))
		select {
		case <-ctx.Done():
			s.n.gaveUp(len(batch), s.url, err)
			return
		case <-time.After(jittered):
		}
		pause = min(2*pause, s.tune.RetryMax)
	}
}

// Body is what one POST carries.
type Body struct {
	Events []Event `json:"events"`
}

// post sends batch once: a 2xx answer is success.
func (s *sink) post(ctx context.Context, batch []Event) error {
	body, err := json.Marshal(Body{Events: batch})
	if err != nil {
		return fmt.Errorf("encode events: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.tune.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("operator events URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "retryd-events")
	id := "evt_" + strconv.FormatInt(batch[0].Timestamp.UnixNano(), 36) + strconv.FormatUint(rand.Uint64()%1e6, 36)
	s.signer.Sign(req.Header, id, time.Now(), body)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("post events: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("post events: %s answered %d", s.url, resp.StatusCode)
	}
	return nil
}
