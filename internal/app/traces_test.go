package app_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/tracing"
)

// collector is an OTLP/HTTP trace collector: it keeps the spans it gets.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("collector: %v", err)
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// spansOf are the spans named name of request id.
func (c *collector) spansOf(name, id string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.Name != name {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == tracing.AttrRequestID && a.Value.GetStringValue() == id {
				out = append(out, s)
			}
		}
	}
	return out
}

// attr is span s's integer attribute key.
func attr(s *tracepb.Span, key string) int64 {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.GetIntValue()
		}
	}
	return -1
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a submission and its attempts (a
// request that fails twice, then succeeds) are spans of the submitter's
// trace, each a child of the submitter's span, and the destination
// receives a traceparent naming the attempt's span.
func TestAttemptsAreSpansOfTheSubmittersTrace(t *testing.T) {
	var c collector
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.start(t))
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	traces, err := tracing.New(context.Background(), "retryd-api")
	if err != nil || traces == nil {
		t.Fatalf("tracing.New = %v, %v; want a tracer", traces, err)
	}
	t.Cleanup(func() { _ = traces.Shutdown(context.Background()) })
	s := startTransitStackWith(t, nil, app.EngineOptions{Traces: traces})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	code, body := s.call(t, "POST", "/requests", `{"url":"`+s.dest+`/flaky","backoffMs":100,"maxBackoffMs":200}`,
		"traceparent", "00-"+traceID+"-"+parentID+"-01")
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	id := jsonField(t, body, "id")
	if s.hit(id, 10*time.Second).IsZero() {
		t.Fatal("the request never reached its destination")
	}
	var submits, attempts []*tracepb.Span
	for deadline := time.Now().Add(15 * time.Second); len(submits) < 1 || len(attempts) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("spans: %d submit, %d attempts; want 1 and 3", len(submits), len(attempts))
		}
		submits, attempts = c.spansOf("retryd.submit", id), c.spansOf("retryd.attempt", id)
	}
	seen := map[int64]bool{}
	var attempt *tracepb.Span
	for i, sp := range append(submits, attempts...) {
		if got := hex.EncodeToString(sp.TraceId); got != traceID {
			t.Errorf("span %d (%s) in trace %s, want the submitter's %s", i, sp.Name, got, traceID)
		}
		if got := hex.EncodeToString(sp.ParentSpanId); got != parentID {
			t.Errorf("span %d (%s): parent %s, want the submitter's span %s", i, sp.Name, got, parentID)
		}
		if sp.Name == "retryd.attempt" {
			n := attr(sp, tracing.AttrAttempt)
			seen[n] = true
			if n == 3 {
				attempt = sp
			}
			if want := map[int64]int64{1: 500, 2: 500, 3: 200}[n]; attr(sp, tracing.AttrStatus) != want {
				t.Errorf("attempt %d's span: status code %d, want %d", n, attr(sp, tracing.AttrStatus), want)
			}
		}
	}
	if len(seen) != 3 || attempt == nil {
		t.Fatalf("attempt spans of attempts %v, want 1, 2 and 3", seen)
	}
	s.mu.Lock()
	got := s.headers[id].Get("traceparent")
	s.mu.Unlock()
	if want := "00-" + traceID + "-" + hex.EncodeToString(attempt.SpanId) + "-"; !strings.HasPrefix(got, want) {
		t.Errorf("the destination got traceparent %q, want one naming the attempt's span (%s…)", got, want)
	}
}

// A collector that cannot be reached costs deliveries nothing: they go on
// while the spans are dropped.
func TestUnreachableCollectorNeverHoldsDeliveries(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there any more
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	traces, err := tracing.New(context.Background(), "retryd-api")
	if err != nil || traces == nil {
		t.Fatalf("tracing.New = %v, %v; want a tracer", traces, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = traces.Shutdown(ctx)
	})
	s := startTransitStackWith(t, nil, app.EngineOptions{Traces: traces})
	var ids []string
	for range 30 {
		ids = append(ids, s.submit(t, "/ok", ""))
	}
	for _, id := range ids {
		if s.hit(id, 20*time.Second).IsZero() {
			t.Fatalf("request %s was not delivered while the collector was unreachable", id)
		}
	}
}
