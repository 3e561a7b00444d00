package tasks

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/retry"
)

// What an attempt tells flow control of its endpoint: load (429, 503,
// 408, a timeout), the endpoint's own failure (other 5xx, a connection
// error), or nothing about it (a client error, a redirect); a blocked
// address made no call at all. Only the first two count against the
// endpoint's breaker.
func TestFlowOutcomeOfAnAttempt(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		name   string
		status int
		err    error
		want   flow.Outcome
	}{
		{"2xx", 200, nil, flow.Succeeded},
		{"429", 429, nil, flow.Overloaded},
		{"503", 503, nil, flow.Overloaded},
		{"408", 408, nil, flow.Overloaded},
		{"timeout", 0, context.DeadlineExceeded, flow.Overloaded},
		{"500", 500, nil, flow.Failed},
		{"502", 502, nil, flow.Failed},
		{"connection refused", 0, errors.New("dial tcp: connection refused"), flow.Failed},
		{"400", 400, nil, flow.Other},
		{"404", 404, nil, flow.Other},
		{"redirect", 302, nil, flow.Other},
		{"blocked", 0, retry.ErrBlocked, flow.NoCall},
	} {
		var resp *http.Response
		if c.err == nil {
			resp = &http.Response{StatusCode: c.status, Header: http.Header{}}
		}
		if got := flowOutcome(resp, retry.Classify(resp, c.err, now)); got != c.want {
			t.Errorf("%s: outcome %d, want %d", c.name, got, c.want)
		}
	}
}
