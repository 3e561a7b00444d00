package apidoc

import (
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
)

// nextRetryAt is when retryd starts the request: never a time already
// past, and null when an event (a resume, a free slot) starts it, an
// attempt is under way or the request is finished.
func TestNextRetryAtIsWhenRetrydStartsIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 7, 6, 1, 0, time.UTC)
	later := now.Add(10152 * time.Millisecond)
	for _, c := range []struct {
		name string
		r    record.Request
		want *string
	}{
		{"due later", record.Request{Status: record.Retrying, NextAttemptAt: later}, str("2026-01-02T07:06:11.152Z")},
		{"due already: a free worker slot starts it, not its past due time", record.Request{Status: record.Pending, NextAttemptAt: now.Add(-5 * time.Minute)}, nil},
		{"held by a paused key since its submission", record.Request{Status: record.Pending, NextAttemptAt: now.Add(-5 * time.Minute),
			WaitingFor: record.WaitingPaused}, nil},
		{"waiting for a parallel slot", record.Request{Status: record.Retrying, NextAttemptAt: now.Add(-time.Second), WaitingFor: record.WaitingParallelism}, nil},
		{"waiting for its rate turn", record.Request{Status: record.Pending, NextAttemptAt: now.Add(-time.Second), WaitingFor: record.WaitingRate,
			WaitUntil: later}, str("2026-01-02T07:06:11.152Z")},
		{"an attempt under way", record.Request{Status: record.Pending, NextAttemptAt: now.Add(-time.Second), InFlight: true}, nil},
		{"finished", record.Request{Status: record.Completed, NextAttemptAt: later}, nil},
	} {
		d := NewDocument(&c.r, false, now)
		switch {
		case c.want == nil && d.NextRetryAt != nil:
			t.Errorf("%s: nextRetryAt %s, want null", c.name, *d.NextRetryAt)
		case c.want != nil && (d.NextRetryAt == nil || *d.NextRetryAt != *c.want):
			t.Errorf("%s: nextRetryAt %v, want %s", c.name, deref(d.NextRetryAt), *c.want)
		}
		if w := c.r.WaitingFor; w != "" && (d.WaitingFor == nil || *d.WaitingFor != w) {
			t.Errorf("%s: waitingFor %v, want %s", c.name, deref(d.WaitingFor), w)
		}
	}
}

func str(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
