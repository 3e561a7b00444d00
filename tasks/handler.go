package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/delayexpr"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/events"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/sign"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/tracing"
	"github.com/retryd/retryd/internal/waiting"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
)

// Response capture limits.
const (
	// ResultLimit bounds the stored body of a successful response.
	ResultLimit = 64 << 10
	// AttemptBodyLimit bounds the response body kept on each attempt.
	AttemptBodyLimit = 1 << 10
	// ResponseHeaderLimit bounds the response headers kept on an attempt
	// of a QStash message with a callback (which reports them): past it,
	// the rest are left out.
	ResponseHeaderLimit = 1 << 10
)

// WorkflowLogs are the Upstash Workflow runs' logs (workflow.Store).
type WorkflowLogs interface {
	// Deliver is the log message id's delivery carries (it joins the log
	// at its first).
	Deliver(ctx context.Context, tenant, run, id string, body []byte) (workflow.Run, error)
	// Steps is the log as it stands, up to message id.
	Steps(ctx context.Context, tenant, run, id string) (workflow.Run, error)
}

// Invokes return a workflow run's result to the run that invoked it
// (invoke.Returner).
type Invokes interface {
	Return(ctx context.Context, tenant, run string, o invoke.Outcome) (bool, error)
}

// Store is the part of the record store the handler needs.
type Store interface {
	Begin(ctx context.Context, id string, now time.Time) (*record.Begin, error)
	Unbegin(ctx context.Context, id string, n int, waitingFor string, until time.Time) error
	Finish(ctx context.Context, id string, o record.Outcome, now time.Time) (record.FinishResult, error)
	Redrive(ctx context.Context, id string, in record.RedriveInput) (*record.RedriveResult, error)
	Get(ctx context.Context, id string) (*record.Request, error)
}

// Waiting takes the handler's verdict on a task it returns to asynq:
// parked, or due at a time (waiting.Owner's one entry point for it).
type Waiting interface {
	Hand(ctx context.Context, id string, v waiting.Verdict) error
}

// Callbacks schedules outcome callbacks.
type Callbacks interface {
	EnqueueCallback(ctx context.Context, id string) error
}

// DashboardActor is the actor of a redrive started by running a task again
// from the asynqmon dashboard.
const DashboardActor = record.DashboardActor

// Handler performs one attempt of a request per task run.
type Handler struct {
	Store     Store
	Callbacks Callbacks
	Client    *http.Client
	Log       *slog.Logger
	// RedriveLimit bounds redrives started from the dashboard too.
	RedriveLimit int
	// Stopping ends when the worker is shutting down and in-flight calls
	// must give up; nil means never.
	Stopping context.Context
	// Faults are the crash-test fault points (nil in production).
	Faults *faultpoint.Points
	// Signer signs every delivery (Standard Webhooks) of a tenant without
	// signing secrets of its own; nil signs nothing.
	Signer *sign.Webhooks
	// Credentials are the tenants' credentials, proxies and signing
	// secrets; nil: none (every call through Client, signed by Signer).
	Credentials *credentials.Book
	// QStash signs deliveries of requests made through /v2; nil signs
	// nothing.
	QStash *sign.QStash
	// Workflows hold the Upstash Workflow runs whose logs their steps'
	// deliveries carry; nil delivers every body as submitted.
	Workflows WorkflowLogs
	// Invokes hear of a workflow run whose step failed for good: a run
	// another invoked returns that failure to it. Nil: none is told.
	Invokes Invokes
	// Waiting starts a task again at a time, to the millisecond, and
	// parks it; nil leaves both to asynq's whole seconds.
	Waiting Waiting
	// Flow decides when an attempt may start (flow control); nil starts
	// every attempt at once.
	Flow *flow.Controller
	// Clock and Rand are the clock and the jitter source (U(0,1)); tests
	// fix them.
	Clock clock.Clock
	Rand  func() float64
	// Traces exports a span per attempt, and tells the destination its
	// traceparent (nil: off).
	Traces *tracing.Tracer
	// Events tells the operator's endpoints of each request that failed
	// (OPERATOR_EVENTS_URL); nil tells nobody.
	Events *events.Notifier
	// EarlyWait bounds how long a task handed over early is waited out
	// (waiting.Tuning's); zero is waiting.DefaultTuning's.
	EarlyWait time.Duration
	// InTransit, when set, is called with a parked request's id after its
	// park is decided and before its task goes back to asynq: a test hook
	// that holds a waiter in transit. nil in production.
	InTransit func(ctx context.Context, id string)
}

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	id := string(t.Payload())
	var b *record.Begin
	for {
		var err error
		b, err = h.Store.Begin(ctx, id, h.Clock.Now())
		if err != nil {
			return fmt.Errorf("%w: begin attempt of %s: %w", retry.ErrInfrastructure, id, err)
		}
		if b.State != record.NotDue {
			break
		}
		// The timer hands tasks over a little early (waiting.Tuning's Early);
		// wait out that much (and a clock a few milliseconds off between
		// workers), else give the task back to the timer for its due time.
		wait := b.Due.Sub(h.Clock.Now())
		if wait > h.earlyWait() {
			if err := h.at(ctx, id, b.Due); err != nil {
				return fmt.Errorf("%w: set the timer of %s: %w", retry.ErrInfrastructure, id, err)
			}
			return retry.At(b.Due, retry.ErrNotDue)
		}
		if err := clock.Sleep(ctx, h.Clock, wait); err != nil {
			return fmt.Errorf("%w: %w", retry.ErrInfrastructure, err)
		}
	}
	switch b.State {
	case record.Missing:
		h.Log.Warn("task for unknown request dropped", "requestId", id)
		return nil
	case record.Finished:
		if run, ok := asynq.GetRetryCount(ctx); ok && b.Status == record.Failed && b.FailedRun == run {
			return h.dashboardRedrive(ctx, t, id)
		}
		h.leftFlow(ctx, id)
		return nil
	case record.Poisoned:
		return h.endPoisoned(ctx, b)
	}
	if h.Flow == nil {
		return h.attempt(ctx, b, nil)
	}
	ticket, err := h.Flow.Admit(ctx, FlowRequest(b.Request))
	var parked *flow.Parked
	if errors.As(err, &parked) {
		// Not an attempt: take it back, and sleep (holding no slot) until
		// woken or until the fallback deadline.
		if err := h.Store.Unbegin(ctx, id, b.N, parked.Reason, parked.Starts); err != nil {
			return fmt.Errorf("%w: take back attempt %d of %s: %w", retry.ErrInfrastructure, b.N, id, err)
		}
		h.Log.Debug("waiting for a flow-control slot", "requestId", id, "reason", parked.Reason, "key", b.Request.FlowKey(), "untilMs", parked.Until.Sub(h.Clock.Now()).Milliseconds())
		if h.InTransit != nil {
			h.InTransit(ctx, id)
		}
		if h.Waiting != nil {
			// Noted last, as the task goes back to asynq: the owner looks
			// at it as it lands (a wake meanwhile starts it then).
			if err := h.Waiting.Hand(ctx, id, waiting.Verdict{Parked: true}); err != nil {
				// It waits all the same, listed among asynq's retries.
				h.Log.Warn("could not note a park", "requestId", id, "err", err)
			}
		}
		return retry.At(parked.Until, retry.ErrParked)
	}
	if errors.Is(err, flow.ErrEndpointDown) {
		return h.endEndpointDown(ctx, b, err)
	}
	if err != nil {
		// Redis could not say; take the attempt back and try again soon
		// (asynq's retry of the task starts it), keeping what it waited
		// for before, so that wait is not then counted as lateness.
		if uerr := h.Store.Unbegin(ctx, id, b.N, b.WaitedFor, b.WaitedUntil); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return fmt.Errorf("%w: flow control of %s: %w", retry.ErrInfrastructure, id, err)
	}
	return h.attempt(ctx, b, ticket)
}

// earlyWait is how long a task handed over early is waited out.
func (h *Handler) earlyWait() time.Duration {
	if h.EarlyWait > 0 {
		return h.EarlyWait
	}
	return waiting.DefaultTuning.EarlyWait
}

// dashboardRedrive handles a failed request's archived task being run again
// from the dashboard: the same task run count that failed the request comes
// back, which no crash recovery produces (asynq counts a lease-expired run
// as a failure). It is audited as a redrive like one through the API.
func (h *Handler) dashboardRedrive(ctx context.Context, t *asynq.Task, id string) error {
	_, err := h.Store.Redrive(ctx, id, record.RedriveInput{
		Scope: tenant.All, Actor: DashboardActor, Reason: "task run again from the asynqmon dashboard", Limit: h.RedriveLimit, Now: h.Clock.Now(),
		FromDashboard: true,
	})
	switch {
	case errors.Is(err, record.ErrRedriveLimit):
		h.Log.Warn("dashboard redrive refused: redrive limit reached", "requestId", id)
		return fmt.Errorf("redrive from the dashboard refused: %w: %w", err, asynq.SkipRetry)
	case errors.Is(err, record.ErrNotFailed):
		return nil // someone else redrove it first
	case err != nil:
		return fmt.Errorf("%w: dashboard redrive of %s: %w", retry.ErrInfrastructure, id, err)
	}
	h.Log.Info("request redriven", "requestId", id, "actor", DashboardActor)
	h.Faults.Hit(faultpoint.MidRedrive)
	return h.ProcessTask(ctx, t)
}

func (h *Handler) attempt(ctx context.Context, b *record.Begin, ticket *flow.Ticket) error {
	r, n := b.Request, b.N
	h.Faults.Hit(faultpoint.BeforeCall)
	var traced http.Header // the attempt span's traceparent, when traces are on
	endSpan := func(int, string, bool) {}
	if h.Traces != nil {
		traced = http.Header{}
		endSpan = h.Traces.Attempt(ctx, r.TraceParent, r.ID, r.Tenant, r.HostPort(), n, traced)
	}
	start := h.Clock.Now()
	resp, body, truncated, use, callErr := h.call(ctx, r, n, traced)
	end := h.Clock.Now()
	res := classify(r, use, resp, callErr, end)
	if ticket != nil {
		// The slot is free as soon as the destination answered: whoever
		// waits for it need not wait for the record write.
		ticket.Done(ctx, flowOutcome(resp, res))
	}
	if callErr != nil && h.Stopping != nil && h.Stopping.Err() != nil {
		// The worker is shutting down and cut the call short. Leave the
		// attempt marked in flight: the next run records it as
		// interrupted (it does not count against the budget) and repeats it.
		h.Log.Info("attempt interrupted by shutdown", "requestId", r.ID, "attempt", n)
		endSpan(0, string(retry.Interrupted), true)
		return retry.At(end, ErrShutdown)
	}
	h.Faults.Hit(faultpoint.AfterCall)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	endSpan(status, string(res.Kind), res.Kind != retry.Success)

	a := record.Attempt{N: n, StartedAt: start, Outcome: string(res.Kind), FailureClass: string(res.Class), NotCalled: res.NoCall}
	if use != nil {
		a.Credential, a.Proxy = use.Credential, use.Proxy
	}
	if !res.NoCall {
		dur := end.Sub(start).Milliseconds()
		a.DurationMs = &dur
	}
	if resp != nil {
		a.StatusCode = resp.StatusCode
		kept := body
		if len(kept) > AttemptBodyLimit {
			kept = kept[:AttemptBodyLimit]
		}
		s := string(kept)
		a.ResponseBody = &s
		if r.Dialect == record.DialectQStash && r.HasCallback() {
			a.ResponseHeaders = responseHeaders(resp.Header) // its callbacks report them
		}
	}
	switch {
	case callErr != nil:
		// Go's client quotes the URL in its errors: the stored text (and
		// what asynq's dashboard shows) must not carry its secrets.
		a.Error = redact.Text(callErr.Error())
	case res.Kind != retry.Success:
		a.Error = fmt.Sprintf("destination answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}

	run, ok := asynq.GetRetryCount(ctx)
	if !ok {
		run = -1
	}
	o := record.Outcome{Attempt: a, Run: run, Due: owed(b, ticket), Host: r.Host, Tenant: r.Tenant, Labels: r.Labels()}
	var next error
	switch res.Kind {
	case retry.Success:
		o.Status = record.Completed
		s := string(body)
		o.Result, o.ResultTruncated = &s, truncated
	case retry.Permanent:
		o.Status = record.Failed
		keepFailedAnswer(r, &o, resp, body, truncated)
		next = fmt.Errorf("permanent failure (%s): %s: %w", res.Class, a.Error, asynq.SkipRetry)
	default:
		failures := r.BudgetUsed + 1 // finished attempts in this run, this one included
		if failures >= r.MaxRetries+1 {
			o.Status, o.Attempt.Outcome = record.Failed, string(retry.Exhausted)
			keepFailedAnswer(r, &o, resp, body, truncated)
			next = fmt.Errorf("retry budget spent after %d attempts (%s): %s: %w", failures, res.Class, a.Error, asynq.SkipRetry)
			break
		}
		p := retry.Policy{Base: time.Duration(r.BackoffMs) * time.Millisecond, Max: time.Duration(r.MaxBackoffMs) * time.Millisecond}
		o.Status = record.Retrying
		o.NextAttemptAt = end.Add(h.retryWait(r, p, failures, res))
		next = retry.At(o.NextAttemptAt, errors.New(a.Error))
	}

	return h.record(ctx, r, o, next)
}

// endPoisoned ends a request whose attempts crashed workers
// record.MaxInterruptions times (an answer that gets the worker killed for
// memory, say): the last interrupted attempt is recorded as the request's
// end, failed, redrivable like any failure.
func (h *Handler) endPoisoned(ctx context.Context, b *record.Begin) error {
	r := b.Request
	msg := fmt.Sprintf("%d attempts in a row were interrupted (the worker stopped during each: a crash, or killed for memory); "+
		"the request was ended so it cannot keep killing workers; redrive it once the cause is fixed", record.MaxInterruptions)
	run, ok := asynq.GetRetryCount(ctx)
	if !ok {
		run = -1
	}
	o := record.Outcome{
		Attempt: record.Attempt{N: b.N, StartedAt: b.StartedAt, Outcome: string(retry.Interrupted), FailureClass: string(retry.InterruptedClass), Error: msg},
		Status:  record.Failed, Run: run, Host: r.Host, Tenant: r.Tenant, Labels: r.Labels(),
	}
	h.Log.Warn("request ended after repeated interruptions", "requestId", r.ID, "interruptions", record.MaxInterruptions)
	return h.record(ctx, r, o, fmt.Errorf("%s: %w", msg, asynq.SkipRetry))
}

// endEndpointDown ends a request whose endpoint has been open longer than
// BREAKER_FAIL_AFTER: failed, with failureClass endpoint_down, redrivable
// like any failure. Its begun attempt is recorded as that end, marked as
// making no call: nothing was sent, so it is not counted as an attempt.
func (h *Handler) endEndpointDown(ctx context.Context, b *record.Begin, cause error) error {
	r := b.Request
	msg := cause.Error() + "; no attempt was made; redrive it once the endpoint is back"
	run, ok := asynq.GetRetryCount(ctx)
	if !ok {
		run = -1
	}
	o := record.Outcome{
		Attempt: record.Attempt{N: b.N, StartedAt: h.Clock.Now(), Outcome: string(retry.Permanent), FailureClass: string(retry.EndpointDown), Error: msg,
			NotCalled: true},
		Status: record.Failed, Run: run, Host: r.Host, Tenant: r.Tenant, Labels: r.Labels(),
	}
	return h.record(ctx, r, o, fmt.Errorf("%s: %w", msg, asynq.SkipRetry))
}

// logAttempt writes the line of an attempt of r that ended with o: one a
// delivery, so built without boxing (LogAttrs), and with the fields that
// say nothing on a plain success (a failure class, not called, stale)
// left out when empty.
func (h *Handler) logAttempt(ctx context.Context, r *record.Request, o record.Outcome, durMs int64, stale bool) {
	a := o.Attempt
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("requestId", r.ID), slog.String("host", r.Host), slog.Int("attempt", a.N),
		slog.Int("statusCode", a.StatusCode), slog.String("outcome", a.Outcome), slog.Int64("durationMs", durMs),
		slog.String("status", string(o.Status)))
	if a.FailureClass != "" {
		attrs = append(attrs, slog.String("failureClass", a.FailureClass))
	}
	if a.NotCalled {
		attrs = append(attrs, slog.Bool("called", false))
	}
	if stale {
		attrs = append(attrs, slog.Bool("stale", true))
	}
	if !o.Due.IsZero() {
		attrs = append(attrs, slog.Int64("lateMs", a.StartedAt.Sub(o.Due).Milliseconds()))
	}
	h.Log.LogAttrs(ctx, slog.LevelInfo, "attempt", attrs...)
}

// record stores outcome o of an attempt of r, hands its callback on when
// it is due, and returns next, what asynq is told.
func (h *Handler) record(ctx context.Context, r *record.Request, o record.Outcome, next error) error {
	a := o.Attempt
	// The record write must happen even if the task's context is ending
	// (shutdown): the attempt already reached the destination.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	fin, err := h.Store.Finish(wctx, r.ID, o, h.Clock.Now())
	if err != nil {
		return fmt.Errorf("%w: record attempt %d of %s: %w", retry.ErrInfrastructure, a.N, r.ID, err)
	}
	var dur int64
	if a.DurationMs != nil {
		dur = *a.DurationMs
	}
	h.logAttempt(ctx, r, o, dur, fin == record.Stale)
	h.Faults.Hit(faultpoint.AfterRecord)
	switch fin {
	case record.Stale, record.CanceledMeanwhile:
		return nil
	}
	if o.Status == record.Failed {
		made := a.N // attempts numbered from 1; one that made no call gave its number back
		if a.NotCalled {
			made--
		}
		h.Events.Emit(events.RequestFailed, map[string]any{"requestId": r.ID, "tenant": r.Tenant, "host": r.Host,
			"attempts": made, "failureClass": a.FailureClass, "statusCode": a.StatusCode, "lastError": a.Error})
	}
	switch fin {
	case record.RecordedCallback:
		if err := h.Callbacks.EnqueueCallback(wctx, r.ID); err != nil {
			// The record says the callback is pending; the sweeper
			// re-enqueues callbacks left pending without a task.
			h.Log.Error("could not enqueue the outcome callback", "requestId", r.ID, "err", err)
		}
	}
	if o.Status.Terminal() && h.Flow != nil {
		// Finished: its place in its queue goes to the next.
		h.Flow.QueueDone(wctx, FlowRequest(r))
	}
	if o.Status == record.Failed {
		h.runFailed(ctx, r)
	}
	if o.Status == record.Retrying {
		if h.Flow != nil {
			// A key cut by adaptive backpressure: the retry waits in its
			// line for a turn at or after its due time, not in the timer.
			if until, ok := h.Flow.LineRetry(wctx, FlowRequest(r), o.NextAttemptAt); ok {
				var due *retry.DueError
				if errors.As(next, &due) {
					due.Due = until // asynq's deadline: only the safety net
				}
				return next
			}
		}
		// The next attempt waits in retryd's timer, holding no slot.
		if err := h.at(wctx, r.ID, o.NextAttemptAt); err != nil {
			// asynq's own due time starts it, a little late.
			h.Log.Warn("could not set the retry's timer", "requestId", r.ID, "err", err)
		}
	}
	return next
}

// runFailed tells Invokes of r, a step of a workflow run that failed for
// good: a run another invoked has failed, and returns that to it.
// A step with a failure callback (the SDKs give an invoked run's steps
// one) returns it again with that callback, which is retried until done.
func (h *Handler) runFailed(ctx context.Context, r *record.Request) {
	if h.Invokes == nil || r.QStash == nil || r.QStash.WorkflowRun == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := h.Invokes.Return(rctx, r.Tenant, r.QStash.WorkflowRun, invoke.Outcome{Failed: true})
	if err != nil && !errors.Is(err, invoke.ErrParentEnded) {
		h.Log.Error("could not return a failed workflow run to the run that invoked it", "run", r.QStash.WorkflowRun, "requestId", r.ID, "err", err)
	}
}

// classify judges an attempt of r made with use. A 401 to a call that
// carried an OAuth2 token is retried (the token was dropped; the next
// attempt gets a new one) where the rules would end the request.
func classify(r *record.Request, use *credentials.Use, resp *http.Response, callErr error, end time.Time) retry.Result {
	res := rulesOf(r).Classify(resp, callErr, end)
	if resp != nil && resp.StatusCode == http.StatusUnauthorized && res.Kind == retry.Permanent && use.OAuth2() {
		res.Kind = retry.Retryable
	}
	var perr *egress.ProxyError
	if errors.As(callErr, &perr) {
		// Nothing reached the destination. A proxy that refuses the
		// credentials it was given will not take them next time either.
		res.NoCall = true
		if perr.StatusCode == http.StatusProxyAuthRequired {
			res.Kind, res.Class = retry.Permanent, retry.CredentialFailed
		}
	}
	return res
}

// rulesOf is whose retry rules judge r's attempts: QStash's for a message
// of the /v2 API (whose clients count on QStash's retries), retryd's own
// for everything else.
func rulesOf(r *record.Request) retry.Rules {
	if r.Dialect == record.DialectQStash {
		return retry.QStashRules
	}
	return retry.RetrydRules
}

// retryWait is the wait before the next attempt after failures finished
// attempts: a QStash message's retry-delay expression (retried = failures
// before this one, so 0 before the first retry) when it has one, else
// retryd's jittered backoff. Retry-After wins over both, and the
// request's maxBackoffMs caps both; but on a QStash message, whose
// Retry-After QStash honours up to a day, the classification's own cap
// is the one that holds.
func (h *Handler) retryWait(r *record.Request, p retry.Policy, failures int, res retry.Result) time.Duration {
	if res.HasRetryAfter && rulesOf(r) == retry.QStashRules {
		return res.RetryAfter
	}
	if q := r.QStash; q != nil && q.RetryDelay != "" && !res.HasRetryAfter {
		e, err := delayexpr.Cached(q.RetryDelay)
		if err == nil {
			var d time.Duration
			if d, err = e.Delay(failures-1, p.Max); err == nil {
				return d
			}
		}
		h.Log.Warn("retry delay expression failed; using the default backoff", "requestId", r.ID, "err", err)
	}
	return p.Next(failures, h.Rand(), res)
}

// keepFailedAnswer keeps the whole body of the answer that failed a
// QStash message with a failure callback as its result: the callback
// reports it (an attempt keeps only AttemptBodyLimit bytes of it, and a
// workflow's failure function parses the error it holds).
func keepFailedAnswer(r *record.Request, o *record.Outcome, resp *http.Response, body []byte, truncated bool) {
	if resp == nil || r.Dialect != record.DialectQStash || r.QStash == nil || r.QStash.FailureCallback == "" {
		return
	}
	s := string(body)
	o.Result, o.ResultTruncated = &s, truncated
}

// responseHeaders are the headers of an answer a QStash message's
// callbacks report: secret ones masked, at most ResponseHeaderLimit bytes
// of them, in name order (so which are left out does not vary).
func responseHeaders(h http.Header) map[string]string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out, size := map[string]string{}, 0
	for _, k := range names {
		v := strings.Join(h[k], ", ")
		if size+len(k)+len(v) > ResponseHeaderLimit {
			continue // one large header leaves the rest in
		}
		size += len(k) + len(v)
		out[k] = v
	}
	return redact.Headers(out)
}
