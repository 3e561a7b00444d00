package qstash

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"10s": 10 * time.Second, "5m": 5 * time.Minute, "2h": 2 * time.Hour, "1d": 24 * time.Hour, "30": 30 * time.Second,
		// Compound durations, as the official Python SDK sends them.
		"1h30m3s": time.Hour + 30*time.Minute + 3*time.Second, "1d2h": 26 * time.Hour, "1500ms": 1500 * time.Millisecond,
		"2m30s": 150 * time.Second, " 1h1s ": time.Hour + time.Second} {
		if got, err := duration(in); err != nil || got != want {
			t.Errorf("duration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Out of range is refused, never wrapped: 18446744073710s was stored
	// as 448 ms, 213504d as about 25 minutes.
	for _, in := range []string{"", "s", "10x", "-5m", "abc", "+5s", "18446744073710s", "213504d", "9223372036854775807", "99999999999999999999s", "36501d",
		"1h30", "h1", "1hh", "1h-5m", "36500d1s"} {
		if _, err := duration(in); err == nil {
			t.Errorf("duration(%q) accepted", in)
		}
	}
}

func TestDedupKey(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	if dedupKey(h, "https://e.com", []byte("a")) != "" {
		t.Error("a key without deduplication headers")
	}
	h.Set("Upstash-Deduplication-Id", "d1")
	if dedupKey(h, "https://e.com", []byte("a")) != "qstash:d1" {
		t.Error("deduplication id not used")
	}
	c := http.Header{}
	c.Set("Upstash-Content-Based-Deduplication", "true")
	c.Set("Upstash-Forward-X-A", "1")
	k1 := dedupKey(c, "https://e.com", []byte("a"))
	k2 := dedupKey(c, "https://e.com", []byte("b"))
	c.Set("Upstash-Forward-X-A", "2")
	k3 := dedupKey(c, "https://e.com", []byte("a"))
	if k1 == "" || k1 == k2 || k1 == k3 {
		t.Errorf("content keys %q %q %q must differ by body and forwarded headers", k1, k2, k3)
	}
}

// Every header a publish can get wrong is refused with a 400 that names it.
func TestPublishHeaderRejections(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ header, value, extraHeader, extraValue string }{
		{"Upstash-Retries", "three", "", ""},
		{"Upstash-Timeout", "soon", "", ""},
		{"Upstash-Not-Before", "tomorrow", "", ""},
		{"Upstash-Delay", "10y", "", ""},
		{"Upstash-Retry-Delay", "1..1000000", "", ""},
		{"Upstash-Retry-Delay", "now()", "", ""},
		{"Upstash-Failure-Callback", "not a url", "", ""},
		{"Upstash-Failure-Callback", "ftp://e.com/x", "", ""},
		{"Upstash-Flow-Control-Value", "parallelism=2", "", ""}, // no key
		{"Upstash-Flow-Control-Value", "parallelism=0", "Upstash-Flow-Control-Key", "k"},
		{"Upstash-Flow-Control-Value", "rate=ten", "Upstash-Flow-Control-Key", "k"},
		{"Upstash-Flow-Control-Value", "period=0s", "Upstash-Flow-Control-Key", "k"},
		{"Upstash-Flow-Control-Value", "burst=3", "Upstash-Flow-Control-Key", "k"},
		{"Upstash-Flow-Control-Value", "parallelism", "Upstash-Flow-Control-Key", "k"},
		{"Upstash-Flow-Control-Key", "k", "", ""}, // no value
		{"Upstash-Redact-Fields", "body,headers", "", ""},
		{"Upstash-Redact-Fields", "header[]", "", ""},
		{"Upstash-Label", "l0,l1,l2,l3,l4,l5,l6,l7,l8,l9,l10,l11,l12,l13,l14,l15,l16,l17,l18,l19,l20", "", ""}, // 21 labels
		{"Upstash-Label", strings.Repeat("l", 257), "", ""},
		{"Upstash-Label", "ok,a\x1fb", "", ""},
		{"Upstash-Deduplication-Id", strings.Repeat("d", 257), "", ""},
		{"Upstash-Deduplication-Id", "d\x00", "", ""},
		{"Upstash-Flow-Control-Key", "acme\x1fk", "Upstash-Flow-Control-Value", "parallelism=1"},
		{"Upstash-Flow-Control-Key", strings.Repeat("k", 256), "Upstash-Flow-Control-Value", "parallelism=1"},
		{"Upstash-Queue-Name", "q\x1f", "", ""},
		{"Upstash-Schedule-Id", strings.Repeat("s", 129), "", ""},
		{"Upstash-Redact-Fields", strings.Repeat("body,", 67) + "body", "", ""},
		{"Upstash-Redact-Fields", "header[" + strings.Repeat("h", 257) + "]", "", ""},
		{"Upstash-Redact-Fields", strings.Repeat("x", 900_000), "", ""},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		if tc.extraHeader != "" {
			h.Set(tc.extraHeader, tc.extraValue)
		}
		_, _, err := submission(h, "https://e.com/x", nil)
		var e *handlers.Error
		var n *names.Error
		switch {
		case errors.As(err, &n):
			if n.Field != tc.header || !strings.HasPrefix(n.Message, tc.header) {
				t.Errorf("%s: %s refused naming %q: %v", tc.header, names.Quote(tc.value), n.Field, err)
			}
		case !errors.As(err, &e) || e.Code != handlers.CodeInvalid || !strings.Contains(e.Message, "Upstash-"):
			t.Errorf("%s: %s accepted or refused unclearly: %v", tc.header, names.Quote(tc.value), err)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: a refusal of %d bytes echoes the value", tc.header, len(err.Error()))
		}
	}
}

func TestPublishHeadersMapOntoTheRequest(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	for k, v := range map[string]string{
		"Upstash-Method": "put", "Upstash-Retries": "2", "Upstash-Timeout": "30s", "Upstash-Delay": "1m",
		"Upstash-Retry-Delay": "pow(2, retried) * 1000", "Upstash-Callback": "https://e.com/cb",
		"Upstash-Failure-Callback": "https://e.com/fail", "Upstash-Label": "nightly",
		"Upstash-Flow-Control-Key": "tenant-1", "Upstash-Flow-Control-Value": "parallelism=2, rate=10, period=1m",
		"Upstash-Forward-X-Trace": "abc", "Content-Type": "text/plain", "Upstash-Telemetry-Sdk": "x",
	} {
		h.Set(k, v)
	}
	sub, q, err := submission(h, "https://e.com/x", []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"url": "https://e.com/x", "method": "PUT", "maxRetries": 2, "timeoutMs": int64(30000), "delayMs": int64(60000),
		"callbackUrl": "https://e.com/cb", "body": "hi", "headers": map[string]string{"X-Trace": "abc", "Content-Type": "text/plain"},
		"flowControl": map[string]any{"key": "tenant-1", "parallelism": 2, "rate": 10, "periodMs": int64(60000)}}
	if diff := cmp.Diff(want, sub); diff != "" {
		t.Errorf("submission (-want +got):\n%s", diff)
	}
	wantQ := &record.QStash{RetryDelay: "pow(2, retried) * 1000", FailureCallback: "https://e.com/fail", Label: "nightly", FlowControlKey: "tenant-1"}
	if diff := cmp.Diff(wantQ, q); diff != "" {
		t.Errorf("QStash fields (-want +got):\n%s", diff)
	}
	fc, err := flowControl("tenant-1", "parallelism=2, rate=10, period=1m")
	if err != nil || fc != (FlowControl{Key: "tenant-1", Parallelism: 2, Rate: 10, Period: time.Minute}) {
		t.Errorf("flowControl = %+v, %v", fc, err)
	}
}

// Several labels, the first of them the legacy one; redact fields.
func TestLabelsAndRedactFields(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Upstash-Label", "a, b,a")
	h.Add("Upstash-Label", "c")
	h.Set("Upstash-Redact-Fields", "body, header[X-Secret],header[authorization]")
	_, q, err := submission(h, "https://e.com/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &record.QStash{Label: "a", Labels: []string{"a", "b", "c"},
		Redact: &record.RedactFields{Body: true, Headers: []string{"X-Secret", "authorization"}}}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("QStash fields (-want +got):\n%s", diff)
	}
	r := &record.Request{ID: "01m8mhyychtfy2pdj6g7", Body: "secret body", QStash: q,
		Headers: map[string]string{"X-Secret": "s", "Authorization": "Bearer x", "X-Public": "p"}}
	m := message(r)
	if m.Body != "" || m.Header["X-Secret"][0] != "[REDACTED]" || m.Header["Authorization"][0] != "[REDACTED]" || m.Header["X-Public"][0] != "p" {
		t.Errorf("message shows what it asked to hide: %+v", m)
	}
	if m.Label != "a" || strings.Join(m.Labels, ",") != "a,b,c" {
		t.Errorf("labels %q %v", m.Label, m.Labels)
	}
}

func TestEventsOfARequestsLife(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	d := int64(5)
	r := &record.Request{ID: "m1", URL: "https://e.com/x", CreatedAt: t0, Status: record.Failed, CompletedAt: t0.Add(3 * time.Second),
		LastError: "destination answered 500", Attempts: []record.Attempt{
			{N: 1, StartedAt: t0.Add(time.Second), DurationMs: &d, Outcome: "retryable", StatusCode: 503, Error: "503"},
			{N: 2, StartedAt: t0.Add(2 * time.Second), DurationMs: &d, Outcome: "retryable", StatusCode: 500, Error: "500"},
		}}
	var states []string
	for _, e := range eventsOf(r) {
		states = append(states, e.State)
	}
	want := []string{StateCreated, StateError, StateRetry, StateError, StateFailed}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if e := eventsOf(r)[2]; e.NextDeliveryTime != t0.Add(2*time.Second).UnixMilli() {
		t.Errorf("the RETRY event's next delivery: %d", e.NextDeliveryTime)
	}
}

// The publish headers retryd reads are decoded without a panic, and a
// refusal is always a clear 400 naming its header.
func FuzzPublishHeaders(f *testing.F) {
	for _, seed := range [][4]string{
		{"a,b", "body,header[X]", "orders", "parallelism=2, rate=10, period=1m"},
		{"", "header", "", ""},
		{",,,", "header[]", "bad queue name", "rate=0"},
		{strings.Repeat("l,", 30), "body,,", "q:1", "period=1d"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, label, redactFields, queue, fc string) {
		h := http.Header{}
		for k, v := range map[string]string{"Upstash-Label": label, "Upstash-Redact-Fields": redactFields,
			"Upstash-Queue-Name": queue, "Upstash-Flow-Control-Value": fc} {
			if v != "" {
				h.Set(k, v)
			}
		}
		if fc != "" {
			h.Set("Upstash-Flow-Control-Key", "k")
		}
		_, q, err := submission(h, "https://e.com/x", nil)
		if err != nil {
			var e *handlers.Error
			if !errors.As(err, &e) || e.Code != handlers.CodeInvalid || !strings.Contains(e.Message, "Upstash-") {
				t.Fatalf("refused unclearly: %v", err)
			}
			return
		}
		if len(q.AllLabels()) > MaxLabels || (q.Label != "" && q.AllLabels()[0] != q.Label) {
			t.Fatalf("labels %q %v", q.Label, q.Labels)
		}
	})
}

// A header of many distinct short labels is refused as soon as it passes
// MaxLabels, not after the whole header is split and searched.
func TestManyLabelsAreRefusedQuickly(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&b, "l%d,", i)
	}
	h := http.Header{}
	h.Set("Upstash-Label", b.String())
	start := time.Now()
	_, err := extras(h)
	var e *handlers.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "at most 20 labels") {
		t.Fatalf("200,000 labels: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing 200,000 labels took %v", d)
	}
}

// FuzzExtras: whatever headers a publish carries, what extras accepts
// holds only names within their limits and free of control characters,
// and what it refuses it refuses briefly.
func FuzzExtras(f *testing.F) {
	for _, seed := range [][4]string{
		{"a,b", "d1", "k", "q"},
		{"acme\x1facmeflow", "", "acme\x1fk", ""},
		{strings.Repeat("l", 257), strings.Repeat("d", 257), strings.Repeat("k", 256), strings.Repeat("q", 129)},
		{" , ,x", "\x00", "\x7f", "q.1:2-3_"},
		{"é,ü\u0085", "d", "", "é"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, label, dedup, key, queue string) {
		h := http.Header{}
		h["Upstash-Label"] = []string{label}
		h["Upstash-Deduplication-Id"] = []string{dedup}
		h["Upstash-Flow-Control-Key"] = []string{key}
		h["Upstash-Queue-Name"] = []string{queue}
		q, err := extras(h)
		if err != nil {
			if len(err.Error()) > 300 {
				t.Fatalf("a refusal of %d bytes", len(err.Error()))
			}
			return
		}
		all := append(q.AllLabels(), dedup, q.FlowControlKey, q.Queue)
		if len(q.AllLabels()) > MaxLabels {
			t.Fatalf("%d labels accepted", len(q.AllLabels()))
		}
		for _, v := range all {
			if names.ControlAt(v) >= 0 || len(v) > names.MaxLabel {
				t.Fatalf("accepted %q", v)
			}
		}
		if len(q.FlowControlKey) > names.MaxFlowKey || len(q.Queue) > names.MaxQueue {
			t.Fatalf("accepted key %q, queue %q", q.FlowControlKey, q.Queue)
		}
	})
}

// An expunged message says so in the /v2 views, message and DLQ alike:
// its missing body and headers are erased, not empty.
func TestExpungedMessageSaysSo(t *testing.T) {
	t.Parallel()
	r := &record.Request{ID: "01m8mhyychtfy2pdj6g7", URL: "https://e.com/x", Method: "POST", Status: record.Failed, Expunged: true,
		Headers: map[string]string{}, Attempts: []record.Attempt{{N: 1, StatusCode: 500, Outcome: "permanent"}}}
	if m := message(r); !m.Expunged || m.Body != "" || len(m.Header) != 0 {
		t.Errorf("message %+v", m)
	}
	if d := dlqMessage(r); !d.Expunged || d.ResponseBody != "" {
		t.Errorf("DLQ message %+v", d)
	}
	if m := message(&record.Request{ID: "01m8mhyychtfy2pdj6g8", Body: "b"}); m.Expunged {
		t.Errorf("a message not expunged says it is: %+v", m)
	}
}
