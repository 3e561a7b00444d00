package qstash

// context.invoke: a run started with Upstash-Workflow-Invoke: true,
// whose body says which step of which run invoked it. The child runs on
// the body's payload; its end returns its result to the parent as one
// more message of the parent run (package invoke).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
)

// invokeRequest is the body of a publish that invokes a run, as the
// workflow SDK sends it.
type invokeRequest struct {
	WorkflowURL   string              `json:"workflowUrl"`
	WorkflowRunID string              `json:"workflowRunId"`
	Headers       map[string][]string `json:"headers"`
	Step          json.RawMessage     `json:"step"`
	Body          *string             `json:"body"`
}

// invokeHint is what an invoke's body must be, for its errors.
const invokeHint = "a publish with Upstash-Workflow-Invoke: true carries the workflow SDK's " +
	"{workflowUrl, workflowRunId, headers, step, body}"

// invokerOf reads an invoke's body: the child run's payload, and what
// returns its result to the parent run (invoke.Invoker, as JSON),
// checked now so that a bad one is refused, not found at the child's end.
func (q *API) invokerOf(c *gin.Context, body []byte) ([]byte, []byte, error) {
	if q.Workflows == nil {
		return nil, nil, handlers.Errorf(handlers.CodeInvalid, "Upstash-Workflow-RunId", "workflows are not served by this API")
	}
	var req invokeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, badRequest("", invokeHint+": "+err.Error())
	}
	var step map[string]json.RawMessage
	if json.Unmarshal(req.Step, &step) != nil || step == nil {
		return nil, nil, badRequest("step", invokeHint+": step must be the invoking step, a JSON object")
	}
	if req.WorkflowURL == "" || req.WorkflowRunID == "" {
		return nil, nil, badRequest("workflowRunId", invokeHint+": workflowUrl and workflowRunId name the invoking run")
	}
	h := http.Header{}
	for k, vs := range req.Headers {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	m, err := workflowOf(h, req.WorkflowURL)
	if err != nil {
		return nil, nil, prefixed("the invoke's headers: ", err)
	}
	if m == nil || m.Init || m.Invoke || !m.delivers() || m.Run != req.WorkflowRunID {
		return nil, nil, badRequest("headers", invokeHint+": headers are those of a step of the invoking run "+
			"(Upstash-Workflow-RunId "+names.Quote(req.WorkflowRunID)+", Upstash-Workflow-Init: false)")
	}
	ctx := c.Request.Context()
	parent, err := q.Workflows.Info(ctx, handlers.TenantOf(c), req.WorkflowRunID)
	if err != nil {
		return nil, nil, err
	}
	if !parent.Found {
		return nil, nil, handlers.Errorf(handlers.CodeNotFound, "workflowRunId", "the invoking workflow run "+names.Quote(req.WorkflowRunID)+
			" not found (never started, or ended): only a running workflow can invoke another")
	}
	if parent.URL != req.WorkflowURL {
		return nil, nil, badRequest("workflowUrl", "the invoking workflow run "+names.Quote(req.WorkflowRunID)+" runs at another URL than workflowUrl")
	}
	// The result is a step of the parent: it inherits its start's
	// settings, as the parent's own steps do.
	sub, extra, err := submission(inherit(h, parent.Config), req.WorkflowURL, nil)
	if err != nil {
		return nil, nil, prefixed("the invoke's headers: ", err)
	}
	if extra.Queue != "" {
		return nil, nil, badRequest("headers", "the invoke's headers: the result of an invoke is not published to a queue (Upstash-Queue-Name)")
	}
	inv := invoke.Invoker{Run: req.WorkflowRunID, URL: req.WorkflowURL, CreatedAt: parent.CreatedAt.UnixMilli(), Spec: sub, QStash: extra, Step: req.Step}
	// The result message it would make, checked as a publish is.
	r, _, err := inv.Request(nil, q.API.Now())
	if err != nil {
		return nil, nil, prefixed("the invoke's headers: ", err)
	}
	if err := q.API.Check(c, r); err != nil {
		return nil, nil, prefixed("the invoke's headers: ", err)
	}
	stored, err := json.Marshal(inv)
	if err != nil {
		return nil, nil, err
	}
	var payload []byte
	if req.Body != nil {
		payload = []byte(*req.Body)
	}
	return payload, stored, nil
}

// prefixed is err with its message prefixed, its status kept.
func prefixed(prefix string, err error) error {
	var e *handlers.Error
	if errors.As(err, &e) {
		return handlers.Errorf(e.Code, e.Field, prefix+e.Message)
	}
	return badRequest("", prefix+err.Error())
}

// returnResult returns run's outcome to the run that invoked it, if one
// did. A parent that has ended waits for nothing: that is no error.
func (q *API) returnResult(ctx context.Context, t, run string, o invoke.Outcome) error {
	if q.Invokes == nil {
		return nil
	}
	_, err := q.Invokes.Return(ctx, t, run, o)
	if errors.Is(err, invoke.ErrParentEnded) {
		q.API.Log.Info("an invoked workflow run ended after the run that invoked it", "run", run, "err", err)
		return nil
	}
	var full *workflow.LogFullError
	if errors.As(err, &full) {
		return workflowError(err)
	}
	return err
}
