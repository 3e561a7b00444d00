// Package tracing exports a request's journey as OpenTelemetry traces: a
// span for its submission and one per attempt, children of the
// submitter's traceparent when one was sent (kept in the record, so
// across retries, redrives and workers), and the destination receives a
// traceparent naming the attempt's span.
//
// It is on only when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (OTLP/HTTP; the standard
// OTEL_* variables apply). Off, a nil *Tracer does nothing and costs
// nothing per request. On, spans leave through a batch processor whose
// queue is bounded: an unreachable collector drops spans, and never slows
// a delivery nor grows memory.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Attribute names of retryd's spans.
const (
	AttrRequestID = "retryd.request_id"
	AttrTenant    = "retryd.tenant"
	AttrEndpoint  = "retryd.endpoint"
	AttrAttempt   = "retryd.attempt"
	AttrStatus    = "http.response.status_code"
	AttrOutcome   = "retryd.outcome"
)

// Tracer starts retryd's spans; nil is off.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
}

// Configured says whether getenv asks for traces.
func Configured(getenv func(string) string) bool {
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// New returns the tracer of service (its default service.name;
// OTEL_SERVICE_NAME wins) when the environment asks for traces, else nil.
func New(ctx context.Context, service string) (*Tracer, error) {
	if !Configured(os.Getenv) {
		return nil, nil
	}
	exp, err := otlptracehttp.New(context.WithoutCancel(ctx)) // it dials nothing yet
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		res = resource.Default()
	}
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName(name)))
	}
	// The batch processor's queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE,
	// 2048 by default) and drops when full: an exporter that cannot
	// reach its collector holds neither a delivery nor memory.
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{provider: p, tracer: p.Tracer("github.com/retryd/retryd")}, nil
}

// Shutdown flushes what waits (within ctx) and stops exporting.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Submit starts the span of a submission whose HTTP headers are h: a child
// of the submitter's traceparent when h carries one. It returns the
// traceparent the request's attempts are children of (the submitter's,
// else the submission span's: "" when off) and the function that ends the
// span with the request's id, tenant and endpoint, and the submission's
// error.
func (t *Tracer) Submit(ctx context.Context, h http.Header) (parent string, end func(id, tenant, endpoint string, err error)) {
	if t == nil {
		return "", func(string, string, string, error) {}
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	sent := trace.SpanContextFromContext(ctx).IsValid()
	ctx, span := t.tracer.Start(ctx, "retryd.submit", trace.WithSpanKind(trace.SpanKindServer))
	if sent {
		parent = h.Get("traceparent")
	} else {
		parent = t.traceparent(ctx)
	}
	return parent, func(id, tenant, endpoint string, err error) {
		span.SetAttributes(attribute.String(AttrRequestID, id), attribute.String(AttrTenant, tenant),
			attribute.String(AttrEndpoint, endpoint))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Attempt starts the span of attempt n of request id, a child of parent
// (the traceparent its submission kept; none: a root), and sets the
// traceparent naming it on out, the destination's request headers. end
// ends it with the destination's status code (0: none) and the outcome.
func (t *Tracer) Attempt(ctx context.Context, parent, id, tenant, endpoint string, n int, out http.Header) (end func(status int, outcome string, failed bool)) {
	if t == nil {
		return func(int, string, bool) {}
	}
	if parent != "" {
		ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(http.Header{"Traceparent": []string{parent}}))
	}
	ctx, span := t.tracer.Start(ctx, "retryd.attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(AttrRequestID, id), attribute.String(AttrTenant, tenant),
			attribute.String(AttrEndpoint, endpoint), attribute.Int(AttrAttempt, n)))
	t.prop.Inject(ctx, propagation.HeaderCarrier(out))
	return func(status int, outcome string, failed bool) {
		span.SetAttributes(attribute.Int(AttrStatus, status), attribute.String(AttrOutcome, outcome))
		if failed {
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
}

// traceparent is the W3C traceparent of ctx's span.
func (t *Tracer) traceparent(ctx context.Context) string {
	h := http.Header{}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
	return h.Get("traceparent")
}
