package tasks

// What the handler tells flow control and the owner of waiting of a
// request, and what it hears back: when an attempt was owed its start.

import (
	"context"
	"net/http"
	"time"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/waiting"
)

// leftFlow tells flow control that finished request id will not start.
// Its task ran because it was woken, typically: canceled while it waited
// for a parallelism slot (or while being parked, too late for the cancel
// to delete its task), it was handed one, which would otherwise idle out
// its HandOverLease.
func (h *Handler) leftFlow(ctx context.Context, id string) {
	if h.Flow == nil {
		return
	}
	r, err := h.Store.Get(ctx, id)
	if err != nil {
		h.Log.Debug("could not read a finished request for flow control; a slot handed to it ends with its lease", "requestId", id, "err", err)
		return
	}
	h.Flow.LeaveSlot(ctx, FlowRequest(r))
}

// at sets request id's task to start at due; without Waiting asynq's own
// due time does.
func (h *Handler) at(ctx context.Context, id string, due time.Time) error {
	if h.Waiting == nil {
		return nil
	}
	return h.Waiting.Hand(ctx, id, waiting.Verdict{DueAt: due})
}

// FlowRequest is what flow control needs of a request.
func FlowRequest(r *record.Request) flow.Request {
	fr := flow.Request{ID: r.ID, HostPort: r.HostPort(), Endpoint: r.Endpoint(), Tenant: r.Tenant, Key: r.FlowKey(), Created: r.CreatedAt,
		Timeout: time.Duration(r.TimeoutMs) * time.Millisecond}
	if fc := r.FlowControl; fc != nil {
		fr.Parallelism, fr.Rate, fr.Period = fc.Parallelism, fc.Rate, time.Duration(fc.PeriodMs)*time.Millisecond
		fr.Named = fc.Key != ""
	}
	if q := r.QStash; q != nil && q.Queue != "" {
		fr.Queue = tenant.Qualify(r.Tenant, q.Queue)
	}
	return fr
}

// flowOutcome is what an attempt's result tells flow control about its
// destination's load.
func flowOutcome(resp *http.Response, res retry.Result) flow.Outcome {
	switch {
	case res.NoCall:
		return flow.NoCall
	case res.Kind == retry.Success:
		return flow.Succeeded
	case res.Class == retry.RateLimited || res.Class == retry.Timeout || (resp != nil && resp.StatusCode == http.StatusServiceUnavailable):
		return flow.Overloaded
	case res.Class == retry.ServerError || res.Class == retry.Network:
		return flow.Failed
	}
	return flow.Other
}

// owed is when begun attempt b, admitted with ticket (nil: no flow
// control), was owed a start, for its lateness (record.Outcome.Due): its
// due time, or the later turn a wait for a rate gave it; zero when an
// event released it from a wait, whose moment is not known. Only a rate's
// wait ends at a time retryd set: an open endpoint's shows its next probe,
// but a probe that fails keeps it waiting, and others wait for no time.
func owed(b *record.Begin, ticket *flow.Ticket) time.Time {
	due := b.Request.NextAttemptAt
	switch {
	case b.WaitedFor == "":
	case b.WaitedFor == record.WaitingRate && !b.WaitedUntil.IsZero():
		due = laterOf(due, b.WaitedUntil)
	default:
		due = time.Time{}
	}
	if ticket != nil && !ticket.Turn().IsZero() {
		due = laterOf(due, ticket.Turn())
	}
	return due
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
