package qstash

// Upstash Workflow over the publish path: a message with
// Upstash-Workflow-RunId joins its run's log, and its deliveries carry
// that log (tasks); the SDK ends or cancels a run with DELETE
// /v2/workflows/runs/{id}, and reads its log with GET.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/workflow"
)

// wfMessage is what a publish's Upstash-Workflow-* headers say.
type wfMessage struct {
	Run      string
	Init     bool
	URL      string
	CallType string
	// Invoke starts a run whose result returns to another (Invoker).
	Invoke  bool
	Invoker []byte
	// Config, for an init, is what the run's later steps inherit.
	Config []byte
}

// workflowOf reads a publish's workflow headers; nil when it has none.
func workflowOf(h http.Header, dest string) (*wfMessage, error) {
	run := h.Get("Upstash-Workflow-RunId")
	if run == "" {
		if h.Get("Upstash-Workflow-Init") != "" {
			return nil, badRequest("Upstash-Workflow-RunId", "Upstash-Workflow-Init needs Upstash-Workflow-RunId")
		}
		return nil, nil
	}
	if err := names.WorkflowRun.Check("Upstash-Workflow-RunId", run); err != nil {
		return nil, err
	}
	m := &wfMessage{Run: run, URL: h.Get("Upstash-Workflow-Url"), CallType: h.Get("Upstash-Workflow-CallType")}
	switch v := strings.ToLower(h.Get("Upstash-Workflow-Init")); v {
	case "true":
		m.Init = true
	case "false", "":
	default:
		return nil, badRequest("Upstash-Workflow-Init", "Upstash-Workflow-Init must be true or false, got "+names.Quote(v))
	}
	switch m.CallType {
	case "", workflow.CallStep, workflow.CallToCallback, workflow.CallFromCallback:
	default:
		return nil, badRequest("Upstash-Workflow-CallType", "Upstash-Workflow-CallType must be step, toCallback or fromCallback, got "+names.Quote(m.CallType))
	}
	if m.URL == "" {
		m.URL = dest
	}
	if _, err := egress.ValidateURL(m.URL); err != nil {
		return nil, badRequest("Upstash-Workflow-Url", "Upstash-Workflow-Url "+err.Error())
	}
	switch v := strings.ToLower(h.Get("Upstash-Workflow-Invoke")); v {
	case "true":
		// A child run whose result returns to the run that invoked it.
		if !m.Init {
			return nil, badRequest("Upstash-Workflow-Invoke", "Upstash-Workflow-Invoke starts a run: it needs Upstash-Workflow-Init: true")
		}
		m.Invoke = true
	case "false", "":
	default:
		return nil, badRequest("Upstash-Workflow-Invoke", "Upstash-Workflow-Invoke must be true or false, got "+names.Quote(v))
	}
	if m.Init && m.CallType == workflow.CallToCallback {
		return nil, badRequest("Upstash-Workflow-Init", "a run starts with a message to the workflow, not a call to a third party")
	}
	if m.delivers() && m.URL != dest {
		// Its delivery carries the run's log: to the run's URL only.
		return nil, badRequest("Upstash-Workflow-Url", "a step of a workflow run is published to its Upstash-Workflow-Url ("+names.Quote(redact.URL(m.URL))+"), not to another destination")
	}
	return m, nil
}

// delivers says whether the message is a delivery to the workflow itself,
// which carries the run's log; a call to a third party carries its own
// body.
func (m *wfMessage) delivers() bool { return m.CallType != workflow.CallToCallback }

// forwardedHeaders are the headers a callback's call carries, from the
// publish's Upstash-<prefix>-Forward-* (as named) and
// Upstash-<prefix>-Workflow-* (as Upstash-Workflow-*): how the workflow
// SDKs tell their callback which run and step it answers.
func forwardedHeaders(h http.Header, prefix string) map[string]string {
	out := map[string]string{}
	fwd, wf := strings.ToLower(prefix+"Forward-"), strings.ToLower(prefix+"Workflow-")
	for name, values := range h {
		lower := strings.ToLower(name)
		switch {
		case strings.HasPrefix(lower, fwd):
			if n := http.CanonicalHeaderKey(name[len(fwd):]); !submit.Framing(n) {
				out[n] = strings.Join(values, ", ")
			}
		case strings.HasPrefix(lower, wf):
			out["Upstash-Workflow-"+http.CanonicalHeaderKey(name[len(wf):])] = strings.Join(values, ", ")
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// publishWorkflow accepts r, a message of workflow run m: counted among
// the run's messages first (an init starts the run), so a cancel of the
// run finds it.
func (q *API) publishWorkflow(c *gin.Context, r *record.Request, m *wfMessage, idemKey string, raw, body []byte) (*Published, error) {
	if q.Workflows == nil {
		return nil, handlers.Errorf(handlers.CodeInvalid, "Upstash-Workflow-RunId", "workflows are not served by this API")
	}
	r.ID = q.API.NewID(r.CreatedAt, idemKey)
	url := m.URL
	if !m.delivers() {
		url = ""
	}
	ctx := c.Request.Context()
	msg := workflow.Message{Tenant: handlers.TenantOf(c), Run: m.Run, Init: m.Init, URL: url, ID: r.ID, Body: body,
		Due: r.NextAttemptAt.Sub(r.CreatedAt), Invoker: m.Invoker, Config: m.Config}
	pub, err := q.Workflows.Publish(ctx, msg, r.CreatedAt)
	if err != nil {
		return nil, workflowError(err)
	}
	if pub.Duplicate {
		return &Published{MessageID: pub.FirstID, URL: redact.URL(r.URL), Deduplicated: true}, nil
	}
	if m.delivers() {
		r.QStash.WorkflowRun = m.Run
	}
	replay, err := q.API.Accept(c, r, idemKey, raw, r.CreatedAt)
	if err != nil || replay != nil {
		// Refused (or the replay of another message): not the run's. A
		// refused start leaves no run, so starting it again is no
		// duplicate of nothing.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if ferr := q.Workflows.Forget(fctx, msg); ferr != nil {
			q.API.Log.Warn("could not take a refused message back from its workflow run", "run", m.Run, "err", ferr)
		}
	}
	if err != nil {
		return nil, err
	}
	if replay != nil {
		return &Published{MessageID: replay.ID, URL: redact.URL(r.URL), Deduplicated: true}, nil
	}
	if !m.Init {
		// A cancel of the run between the count and the record missed
		// this message: cancel it now (a call to a third party must not
		// go out for a canceled run).
		run, err := q.Workflows.Info(ctx, msg.Tenant, m.Run)
		if err == nil && !run.Found {
			if scope, serr := handlers.ScopeOf(c); serr == nil {
				if cerr := q.API.Cancel(context.WithoutCancel(ctx), scope, r.ID, RetryActor); cerr != nil && !errors.Is(cerr, record.ErrConflict) {
					q.API.Log.Warn("could not cancel a message of a run that ended", "run", m.Run, "requestId", r.ID, "err", cerr)
				}
			}
			return nil, workflowError(fmt.Errorf("workflow run %s: %w", m.Run, workflow.ErrNoRun))
		}
	}
	return &Published{MessageID: r.ID, URL: redact.URL(r.URL)}, nil
}

// workflowError is the API's answer to a workflow store's refusal.
func workflowError(err error) error {
	var conflict *workflow.URLConflictError
	var full *workflow.LogFullError
	switch {
	case errors.Is(err, workflow.ErrNoRun):
		return handlers.Errorf(handlers.CodeNotFound, "Upstash-Workflow-RunId", err.Error()+": start it with Upstash-Workflow-Init: true")
	case errors.As(err, &conflict):
		return handlers.Errorf(handlers.CodeConflict, "Upstash-Workflow-Url", err.Error()+": a run id belongs to one workflow URL; start a new run with a new id")
	case errors.As(err, &full):
		return handlers.Errorf(handlers.CodeTooLarge, "", err.Error())
	}
	return err
}

// runID is the :id of a /v2/workflows/runs route, checked.
func runID(c *gin.Context) (string, error) {
	id := c.Param("id")
	if err := names.WorkflowRun.Check("workflow run id", id); err != nil || id == "" {
		return "", handlers.Errorf(handlers.CodeInvalid, "id", "a workflow run id is 1 to 128 bytes without control characters")
	}
	return id, nil
}

// getRun answers a run's log, as deliveries carry it (the SDKs fetch it
// when a delivery comes without one).
func (q *API) getRun(c *gin.Context) {
	id, err := runID(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	run, err := q.Workflows.Steps(c.Request.Context(), handlers.TenantOf(c), id, "")
	if err != nil {
		q.fail(c, err)
		return
	}
	if !run.Found {
		q.fail(c, handlers.Errorf(handlers.CodeNotFound, "", "workflow run "+names.Quote(id)+" not found (never started, or ended)"))
		return
	}
	c.Data(http.StatusOK, "application/json", run.Log)
}

// endRun ends a run (the SDK's last step does), or cancels it
// (?cancel=true): its log goes, and with cancel its messages not yet
// delivered are canceled.
func (q *API) endRun(c *gin.Context) {
	id, err := runID(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	cancelRun := false
	switch v := c.Query("cancel"); v {
	case "true":
		cancelRun = true
	case "false", "":
	default:
		q.fail(c, badRequest("cancel", "cancel must be true or false, got "+names.Quote(v)))
		return
	}
	var result []byte
	if !cancelRun {
		// The run's result, for the run that invoked it (if one did).
		body, ok := q.readBody(c)
		if !ok {
			return
		}
		if len(body) > 0 {
			result = body
		}
	}
	ok, err := q.finishRun(c, id, cancelRun, result)
	if err != nil {
		q.fail(c, err)
		return
	}
	if !ok {
		q.fail(c, handlers.Errorf(handlers.CodeNotFound, "", "workflow run "+names.Quote(id)+" not found (never started, or ended)"))
		return
	}
	c.JSON(http.StatusOK, gin.H{"workflowRunId": id})
}
