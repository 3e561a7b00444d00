package workflow

// waitForEvent and notify: a run waits for an event (POST /v2/wait/{id}),
// with a timeout; a notify (POST /v2/notify/{id}) hands each waiter the
// event's data as the result of its step.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/retryd/retryd/internal/luascript"
	"github.com/retryd/retryd/internal/tenant"
)

var (
	takeWaitersScript = luascript.Load(scripts, "", "take_waiters")
	waitScript        = luascript.Load(scripts, "", "wait")
)

// MaxWaiters bounds the runs one event may have waiting: a notify hands
// the event to each of them in one call.
const MaxWaiters = 1000

// ErrTooManyWaiters is a wait for an event that has MaxWaiters already.
var ErrTooManyWaiters = fmt.Errorf("the event has %d waiters already, the most it may have", MaxWaiters)

// Waiter is a run waiting for an event.
type Waiter struct {
	Run string `json:"run"`
	URL string `json:"url"`
	// Deadline is when it stops waiting (Unix ms); its timeout message
	// (TimeoutID) is delivered then.
	Deadline  int64  `json:"deadline"`
	TimeoutID string `json:"timeoutId"`
	// TimeoutURL is where the timeout goes.
	TimeoutURL string `json:"timeoutUrl"`
	// Step is the waiting step, to which a notify adds the event's data.
	Step json.RawMessage `json:"step"`
	// Headers are the publish headers of the step's result (the wait
	// call's own).
	Headers map[string][]string `json:"headers"`
	// TimeoutHeaders are what the SDK asked the timeout to carry.
	TimeoutHeaders map[string][]string `json:"timeoutHeaders,omitempty"`
}

// eventKey is the waiters of event id of tenant t.
func eventKey(t, id string) string {
	sum := sha1.Sum([]byte(tenant.Of(t) + "\x00" + id))
	return "{retryd-wf-event:" + hex.EncodeToString(sum[:10]) + "}:waiters"
}

// Wait adds w to the waiters of event id, at now. A run may wait for one
// event in several steps at once (each has its own timeout message).
func (s *Store) Wait(ctx context.Context, t, id string, w Waiter, now time.Time) error {
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("encode a waiter of event %s: %w", id, err)
	}
	keep := time.UnixMilli(w.Deadline).Sub(now) + s.Keep
	ok, err := waitScript.Run(ctx, s.rdb, []string{eventKey(t, id)}, w.Run+"\n"+w.TimeoutID, b, keep.Milliseconds(), MaxWaiters).Int()
	if err != nil {
		return fmt.Errorf("wait for event %s: %w", id, err)
	}
	if ok == 0 {
		return fmt.Errorf("wait for event %s: %w", id, ErrTooManyWaiters)
	}
	return nil
}

// Take removes and returns the waiters of event id (only run's when run
// is not ""), those whose deadline has passed left out: their timeout is
// theirs already.
func (s *Store) Take(ctx context.Context, t, id, run string, now time.Time) ([]Waiter, error) {
	raw, err := takeWaitersScript.Run(ctx, s.rdb, []string{eventKey(t, id)}, run).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("take the waiters of event %s: %w", id, err)
	}
	return decodeWaiters(raw, now)
}

// Waiters are the runs waiting for event id.
func (s *Store) Waiters(ctx context.Context, t, id string, now time.Time) ([]Waiter, error) {
	raw, err := s.rdb.HVals(ctx, eventKey(t, id)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the waiters of event %s: %w", id, err)
	}
	return decodeWaiters(raw, now)
}

func decodeWaiters(raw []string, now time.Time) ([]Waiter, error) {
	out := make([]Waiter, 0, len(raw))
	for _, r := range raw {
		var w Waiter
		if err := json.Unmarshal([]byte(r), &w); err != nil {
			return nil, fmt.Errorf("decode a waiter: %w", err)
		}
		if w.Deadline > now.UnixMilli() {
			out = append(out, w)
		}
	}
	return out, nil
}
