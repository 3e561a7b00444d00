package qstash

// The workflow DLQ (the SDKs' client.dlq): a run whose step failed for
// good is in the DLQ by that step's message. Resume redrives the step (the
// run goes on from it); restart starts the run over, under its id, from
// its payload; delete removes the message.

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/record"
	sel "github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// wfDLQBulk is what the workflow DLQ's actions select by: dlqIds, the
// DLQ's filters, or everything (the SDKs' {all: true}).
var wfDLQBulk = sel.Route{IDs: "dlqIds", Filters: dlqFilters, CountParam: "count", DefaultCount: 100, MaxCount: handlers.MaxBulkLimit,
	Cursor: true, NothingIsAll: true}

// errNotWorkflowStep is a DLQ message a workflow DLQ action selected that
// is not a workflow run's step.
var errNotWorkflowStep = handlers.Errorf(handlers.CodeConflict, "dlqIds", "not a workflow run's step: act on it with /v2/dlq")

// runRef names a run in the workflow DLQ's answers.
type runRef struct {
	WorkflowRunID     string `json:"workflowRunId"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt"`
}

// workflowDLQ runs act on each workflow step the call selects in the DLQ
// and answers what it made of them under name (with the cursor to go on
// from and, when some were not acted on, why).
func (q *API) workflowDLQ(c *gin.Context, name string, act func(r *record.Request) (any, error)) {
	s, err := selection(c, wfDLQBulk)
	if err != nil {
		q.fail(c, err)
		return
	}
	done := []any{}
	var skipped handlers.SkipList
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		if r.QStash == nil || r.QStash.WorkflowRun == "" {
			skipped.Add(r.ID, errNotWorkflowStep)
			return nil
		}
		out, err := act(r)
		switch {
		case err == nil:
			done = append(done, out)
		case handlers.StopsBulk(err):
			return err
		default:
			skipped.Add(r.ID, err)
		}
		return nil
	}, skipped.Add)
	if q.stoppedEmpty(c, err, len(done)) {
		return
	}
	var res gin.H
	if name == "deleted" {
		res = gin.H{"deleted": len(done)}
	} else {
		res = gin.H{name: done}
	}
	c.JSON(http.StatusOK, withSkipped(withCursor(res, next), skipped))
}

// noOverrides refuses a resume or restart that would change the run's
// retries or flow control: the run goes on as it was published.
func noOverrides(c *gin.Context) error {
	for _, h := range []string{"Upstash-Retries", "Upstash-Flow-Control-Key", "Upstash-Flow-Control-Value"} {
		if c.GetHeader(h) != "" {
			return badRequest(h, "a resume or restart with other retries or flow control is not served: the run goes on as it was published")
		}
	}
	return nil
}

func (q *API) resumeWorkflows(c *gin.Context) {
	if err := noOverrides(c); err != nil {
		q.fail(c, err)
		return
	}
	q.workflowDLQ(c, "workflowRuns", func(r *record.Request) (any, error) {
		ctx := c.Request.Context()
		run, err := q.Workflows.Info(ctx, r.Tenant, r.QStash.WorkflowRun)
		if err != nil {
			return nil, err
		}
		if !run.Found {
			return nil, handlers.Errorf(handlers.CodeConflict, "dlqIds", "workflow run "+r.QStash.WorkflowRun+" has ended: restart it instead")
		}
		if err := q.DLQ.Redrive(ctx, tenant.Only(r.Tenant), r.ID, RetryActor, "workflow dlq.resume through the QStash API"); err != nil {
			return nil, err
		}
		return runRef{WorkflowRunID: r.QStash.WorkflowRun, WorkflowCreatedAt: run.CreatedAt.UnixMilli()}, nil
	})
}

func (q *API) restartWorkflows(c *gin.Context) {
	if err := noOverrides(c); err != nil {
		q.fail(c, err)
		return
	}
	q.workflowDLQ(c, "workflowRuns", func(r *record.Request) (any, error) {
		return q.restartRun(c, r)
	})
}

// restartRun starts the run of r, a failed step, over: the run ends (its
// pending messages canceled, the one that invoked it not told), r leaves
// the DLQ, and the run starts again under its id with its first payload,
// its settings and its invoker.
func (q *API) restartRun(c *gin.Context, r *record.Request) (any, error) {
	ctx, id := c.Request.Context(), r.QStash.WorkflowRun
	if r.Tenant != handlers.TenantOf(c) {
		return nil, handlers.Errorf(handlers.CodeForbidden, "dlqIds", "restart another tenant's run with that tenant's key: the run starts as its caller's")
	}
	h, err := q.Workflows.Get(ctx, r.Tenant, id)
	if err != nil {
		return nil, err
	}
	run, err := q.Workflows.Info(ctx, r.Tenant, id)
	if err != nil {
		return nil, err
	}
	if h.ID == "" || len(h.Entries) == 0 {
		return nil, handlers.Errorf(handlers.CodeConflict, "dlqIds", "workflow run "+id+" is no longer kept: its payload is gone")
	}
	payload, err := base64.StdEncoding.DecodeString(h.Entries[0].Body)
	if err != nil {
		return nil, err
	}
	if run.Found {
		if _, err := q.closeRun(ctx, tenant.Only(r.Tenant), r.Tenant, id, true, nil, false); err != nil {
			return nil, err
		}
	}
	if err := q.removeFailed(c, tenant.Only(r.Tenant), r.ID); err != nil && !errors.Is(err, record.ErrNotFound) {
		return nil, err
	}
	hd := inherit(http.Header{}, run.Config)
	wr, raw, err := q.translate(c, h.URL, hd, payload)
	if err != nil {
		return nil, err
	}
	m := &wfMessage{Run: id, Init: true, URL: h.URL, Invoker: run.Invoker, Config: run.Config}
	if _, err := q.publishWorkflow(c, wr, m, "", raw, payload); err != nil {
		return nil, err
	}
	again, err := q.Workflows.Info(context.WithoutCancel(ctx), r.Tenant, id)
	if err != nil {
		return nil, err
	}
	return runRef{WorkflowRunID: id, WorkflowCreatedAt: again.CreatedAt.UnixMilli()}, nil
}

func (q *API) deleteWorkflowDLQ(c *gin.Context) {
	q.workflowDLQ(c, "deleted", func(r *record.Request) (any, error) {
		return nil, q.removeFailed(c, tenant.Only(r.Tenant), r.ID)
	})
}

// retryFailureFunction answers POST /v2/workflows/dlq/callback/{dlqId}:
// retryd retries a failure function's call itself, with the step's
// retries, and does not call it again once it failed.
func (q *API) retryFailureFunction(c *gin.Context) {
	q.fail(c, badRequest("dlqId", "retrying a failure function's call is not served: retryd retries it with the step's retries; "+
		"restart the run, or resume it, to run the workflow again"))
}

// addWorkflowRun adds to m, a DLQ message, the workflow run of r, its
// step.
func (q *API) addWorkflowRun(c *gin.Context, m *DLQMessage, r *record.Request) {
	m.WorkflowRunID, m.WorkflowURL = r.QStash.WorkflowRun, m.URL
	if q.Workflows == nil {
		return
	}
	if run, err := q.Workflows.Info(c.Request.Context(), r.Tenant, r.QStash.WorkflowRun); err == nil && run.Found {
		m.WorkflowCreatedAt = run.CreatedAt.UnixMilli()
	}
}
