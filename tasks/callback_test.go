package tasks

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
)

// A QStash failure callback may go to another party than the destination
// and is often logged whole: it shows the message as every other view
// does, its shape unchanged.
func TestQStashFailureCallbackIsRedacted(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	r := &record.Request{ID: "m1", URL: "https://e.com/hook?token=s3cr3t&code=c0de&page=2", Method: "POST", CreatedAt: t0,
		Status: record.Failed, Dialect: record.DialectQStash, Body: `{"card":"4111"}`,
		Headers: map[string]string{"Authorization": "Bearer tok", "X-Upstream": "Bearer up", "X-Hidden": "h", "X-Public": "p"},
		QStash:  &record.QStash{FailureCallback: "https://e.com/failed", Redact: &record.RedactFields{Body: true, Headers: []string{"x-hidden"}}}}
	cb := qstashCallback(r)
	want := map[string][]string{"Authorization": {redact.Mask}, "X-Upstream": {redact.Mask}, "X-Hidden": {redact.Mask}, "X-Public": {"p"}}
	if diff := cmp.Diff(want, cb.SourceHeader); diff != "" {
		t.Errorf("sourceHeader (-want +got):\n%s", diff)
	}
	if cb.URL != "https://e.com/hook?token=[REDACTED]&code=[REDACTED]&page=2" {
		t.Errorf("url = %q, want its secrets masked", cb.URL)
	}
	if cb.SourceBody != "" {
		t.Errorf("sourceBody = %q, want empty (Upstash-Redact-Fields: body)", cb.SourceBody)
	}
	if cb.DLQID != "m1" || cb.SourceMessageID != "m1" || cb.Method != "POST" {
		t.Errorf("the callback lost its shape: %+v", cb)
	}

	// Without Upstash-Redact-Fields the body is there.
	r.QStash.Redact = nil
	if got, _ := base64.StdEncoding.DecodeString(qstashCallback(r).SourceBody); string(got) != r.Body {
		t.Errorf("sourceBody = %q, want the message's body", got)
	}
}
