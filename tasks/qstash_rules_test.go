package tasks

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/submit"
)

// submitQStash creates a request as the /v2 API does: of QStash's dialect.
func (b *testBundle) submitQStash(t *testing.T, body string) *record.Request {
	t.Helper()
	now := time.Now()
	r, err := submit.Parse([]byte(body), now)
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	r.ID = ids.New(now)
	r.Dialect, r.QStash = record.DialectQStash, &record.QStash{}
	if _, err := b.store.Create(context.Background(), r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	return r
}

// A QStash message is retried on any non-2xx answer, as QStash retries it;
// the same answers fail a request of retryd's own API at once.
func TestQStashMessageIsRetriedOnA4xx(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 404, 410, 301, 489} {
		h, b := setup(t, func(_ int, w http.ResponseWriter) { w.Header().Set("Location", "/elsewhere"); w.WriteHeader(code) })
		r := b.submitQStash(t, `{"url":"`+b.dest.URL+`","maxRetries":3}`)
		err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
		var due *retry.DueError
		if !errors.As(err, &due) || errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%d: err %v, want a DueError (a retry)", code, err)
		}
		if got := b.get(t, r.ID); got.Status != record.Retrying || got.Attempts[0].Outcome != string(retry.Retryable) {
			t.Errorf("%d: status %s, attempts %+v; want retrying", code, got.Status, got.Attempts)
		}
	}
}

// 489 with Upstash-NonRetryable-Error: true fails a QStash message at its
// first attempt, whatever its retries.
func TestQStashNonRetryableErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Upstash-NonRetryable-Error", "true")
		w.WriteHeader(489)
	})
	r := b.submitQStash(t, `{"url":"`+b.dest.URL+`","maxRetries":5}`)
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("err %v, want SkipRetry", err)
	}
	got := b.get(t, r.ID)
	if got.Status != record.Failed || got.AttemptCount != 1 || got.LastStatusCode != 489 || got.Attempts[0].Outcome != string(retry.Permanent) {
		t.Errorf("record %+v, want failed after one attempt", got)
	}
	if n := b.hitCount(); n != 1 {
		t.Errorf("the destination was called %d times, want 1", n)
	}
}

// On a QStash message Retry-After is honoured up to a day, in any of its
// forms, beyond the request's maxBackoffMs (an hour by default).
func TestQStashRetryAfterIsHonouredUpToADay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		header, value string
		want          time.Duration
	}{
		{"Retry-After", "6m5s", 6*time.Minute + 5*time.Second},
		{"Retry-After", "7200", 2 * time.Hour},
		{"X-RateLimit-Reset-Requests", "3h", 3 * time.Hour},
		{"X-RateLimit-Reset-Tokens", "90", 90 * time.Second},
		{"X-RateLimit-Reset", "300000", 24 * time.Hour},
	}
	for _, c := range cases {
		h, b := setup(t, func(_ int, w http.ResponseWriter) { w.Header().Set(c.header, c.value); w.WriteHeader(429) })
		r := b.submitQStash(t, `{"url":"`+b.dest.URL+`","maxRetries":3}`)
		start := time.Now()
		err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
		var due *retry.DueError
		if !errors.As(err, &due) {
			t.Fatalf("%s: %s: err %v, want a DueError", c.header, c.value, err)
		}
		if d := due.Due.Sub(start); d < c.want || d > c.want+time.Second {
			t.Errorf("%s: %s: next attempt in %v, want %v", c.header, c.value, d, c.want)
		}
	}
}
