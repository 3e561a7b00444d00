package qstash

// The workflow DLQ (the SDKs' client.dlq): a run whose step failed for
// good is in the DLQ by that step's message. Resume redrives the step (the
// run goes on from it); restart starts the run over, under its id, from
// its payload; delete removes the message.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/names"
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
	var why error // the last reason a message was skipped
	skip := func(id string, err error) { skipped.Add(id, err); why = err }
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		if r.QStash == nil || r.QStash.WorkflowRun == "" {
			skip(r.ID, errNotWorkflowStep)
			return nil
		}
		out, err := act(r)
		switch {
		case err == nil:
			done = append(done, out)
		case handlers.StopsBulk(err):
			return err
		default:
			skip(r.ID, err)
		}
		return nil
	}, skip)
	if q.stoppedEmpty(c, err, len(done)) {
		return
	}
	if len(done) == 0 && len(s.IDs) == 1 && why != nil {
		// One message named (the SDKs' single dlqId), not acted on: the
		// answer says why, not an empty list.
		q.fail(c, why)
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
			return nil, handlers.Errorf(handlers.CodeConflict, "dlqIds", "workflow run "+names.Quote(r.QStash.WorkflowRun)+" has ended: restart it instead")
		}
		if r.CreatedAt.Before(run.CreatedAt) {
			return nil, earlierRun(r)
		}
		if err := q.DLQ.Redrive(ctx, tenant.Only(r.Tenant), r.ID, RetryActor, "workflow dlq.resume through the QStash API"); err != nil {
			return nil, err
		}
		return runRef{WorkflowRunID: r.QStash.WorkflowRun, WorkflowCreatedAt: run.CreatedAt.UnixMilli()}, nil
	})
}

// earlierRun is a DLQ message of a run whose id has started again since.
func earlierRun(r *record.Request) error {
	return handlers.Errorf(handlers.CodeConflict, "dlqIds", "this message is a step of an earlier run of "+names.Quote(r.QStash.WorkflowRun)+
		", started again since: delete it")
}

func (q *API) restartWorkflows(c *gin.Context) {
	if err := noOverrides(c); err != nil {
		q.fail(c, err)
		return
	}
	restarted := map[string]bool{}
	q.workflowDLQ(c, "workflowRuns", func(r *record.Request) (any, error) {
		if restarted[r.Tenant+"\x00"+r.QStash.WorkflowRun] {
			return nil, handlers.Errorf(handlers.CodeConflict, "dlqIds", "workflow run "+names.Quote(r.QStash.WorkflowRun)+
				" was restarted by another of the messages selected: this one is a step of its earlier run; delete it")
		}
		ref, err := q.restartRun(c, r)
		if err == nil {
			restarted[r.Tenant+"\x00"+r.QStash.WorkflowRun] = true
		}
		return ref, err
	})
}

// restartRun starts the run of r, a failed step, over: the run ends (its
// pending messages canceled, the one that invoked it not told) and starts
// again under its id with its first payload, its start's settings and
// its invoker; then r leaves the DLQ. The new start is checked before the
// run ends, and a start then refused puts the ended run back.
func (q *API) restartRun(c *gin.Context, r *record.Request) (any, error) {
	ctx, id := c.Request.Context(), r.QStash.WorkflowRun
	if r.Tenant != handlers.TenantOf(c) {
		return nil, handlers.Errorf(handlers.CodeForbidden, "dlqIds", "restart another tenant's run with that tenant's key: the run starts as its caller's")
	}
	h, err := q.Workflows.Get(ctx, r.Tenant, id)
	if err != nil {
		return nil, err
	}
	if h.ID == "" || len(h.Entries) == 0 {
		return nil, handlers.Errorf(handlers.CodeConflict, "dlqIds", "workflow run "+names.Quote(id)+" is no longer kept (past its retention): its payload is gone; trigger it again")
	}
	if r.CreatedAt.Before(h.CreatedAt) {
		return nil, earlierRun(r)
	}
	payload, err := base64.StdEncoding.DecodeString(h.Entries[0].Body)
	if err != nil {
		return nil, fmt.Errorf("read the payload of workflow run %s: %w", id, err)
	}
	wr, raw, err := q.translate(c, h.URL, inherit(http.Header{}, h.Config), payload)
	if err == nil {
		err = q.API.Check(c, wr)
	}
	if err != nil {
		return nil, prefixed("the run's start is no longer accepted: ", err)
	}
	if h.State == "" {
		if _, err := q.closeRun(ctx, tenant.Only(r.Tenant), r.Tenant, id, true, nil, false); err != nil {
			return nil, err
		}
	}
	m := &wfMessage{Run: id, Init: true, URL: h.URL, Invoker: h.Invoker, Config: h.Config}
	if _, err := q.publishWorkflow(c, wr, m, "", raw, payload); err != nil {
		return nil, err
	}
	if err := q.removeFailed(c, tenant.Only(r.Tenant), r.ID); err != nil && !errors.Is(err, record.ErrNotFound) {
		q.API.Log.Warn("a restarted run's failed message stays in the DLQ", "run", id, "dlqId", r.ID, "err", err)
	}
	return runRef{WorkflowRunID: id, WorkflowCreatedAt: wr.CreatedAt.UnixMilli()}, nil
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
