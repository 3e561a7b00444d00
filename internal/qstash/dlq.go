package qstash

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	sel "github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// QStash's dead-letter queue is retryd's DLQ: a dlqId is the request id.

// DLQMessage is a message of dlq.listMessages.
type DLQMessage struct {
	Message
	DLQID string `json:"dlqId"`
	// ResponseStatus is 0 when no answer came (a timeout): always there,
	// since the official Python SDK reads it unconditionally.
	ResponseStatus int    `json:"responseStatus"`
	ResponseBody   string `json:"responseBody,omitempty"`
	// The run of a workflow step (listed with source=workflow).
	WorkflowRunID     string `json:"workflowRunId,omitempty"`
	WorkflowURL       string `json:"workflowUrl,omitempty"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt,omitempty"`
}

func dlqMessage(r *record.Request) DLQMessage {
	m := DLQMessage{Message: message(r), DLQID: r.ID, ResponseStatus: r.LastStatusCode}
	if n := len(r.Attempts); n > 0 && r.Attempts[n-1].ResponseBody != nil {
		m.ResponseBody = *r.Attempts[n-1].ResponseBody
	}
	return m
}

func (q *API) listDLQ(c *gin.Context) {
	s, err := selection(c, dlqList)
	if err != nil {
		q.fail(c, err)
		return
	}
	// source=workflow (the workflow SDKs' dlq.list) lists the steps of
	// workflow runs only, of one run with workflowRunId.
	workflows, run := s.Params["source"], s.Params["workflowRunId"]
	switch {
	case workflows != "" && workflows != "workflow":
		q.fail(c, badRequest("source", "source is workflow (the steps of workflow runs only), or absent"))
		return
	case run != "" && workflows == "":
		q.fail(c, badRequest("workflowRunId", "workflowRunId selects among workflow runs: add source=workflow"))
		return
	}
	msgs := []DLQMessage{}
	kept := 0
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		if workflows != "" && (r.QStash == nil || r.QStash.WorkflowRun == "" || (run != "" && r.QStash.WorkflowRun != run)) {
			return nil
		}
		full, err := q.API.Store.Get(c.Request.Context(), r.ID) // with its attempts, for the response
		if err == nil {
			m := dlqMessage(full)
			if workflows != "" {
				q.addWorkflowRun(c, &m, full)
			}
			msgs = append(msgs, m)
			kept += record.Footprint(full)
		}
		if kept >= record.ListBudget {
			return sel.ErrFull // the rest on the next page: bodies make messages large
		}
		return nil
	}, nil)
	if err != nil {
		q.fail(c, err)
		return
	}
	out := gin.H{"messages": msgs}
	if next != "" {
		out["cursor"] = next
	}
	c.JSON(http.StatusOK, out)
}

// getDLQ serves GET /v2/dlq/{dlqId} (the Python SDK's dlq.get): the
// failed request of that id, in the caller's scope, as listDLQ shows it.
func (q *API) getDLQ(c *gin.Context) {
	id := c.Param("dlqId")
	if !ids.Valid(id) {
		q.fail(c, dlqNotFound(id))
		return
	}
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	r, err := q.API.Store.GetIn(c.Request.Context(), scope, id)
	if err == nil && r.Status != record.Failed {
		err = record.ErrNotFound // not (or no longer) in the DLQ
	}
	if errors.Is(err, record.ErrNotFound) {
		err = dlqNotFound(id)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, dlqMessage(r))
}

// dlqNotFound is the answer for a dlqId the DLQ does not hold.
func dlqNotFound(id string) error {
	return handlers.Errorf(handlers.CodeNotFound, "", "dlq message "+strconv.Quote(id)+" not found")
}

// removeFailed deletes a failed request's record of scope (QStash's
// "delete from the DLQ"); anything else is not in the DLQ.
func (q *API) removeFailed(c *gin.Context, scope tenant.Scope, id string) error {
	r, err := q.API.Store.GetIn(c.Request.Context(), scope, id)
	if err != nil {
		return err
	}
	if r.Status != record.Failed {
		return record.ErrNotFound
	}
	return q.API.Store.Remove(c.Request.Context(), r.Tenant, id, r.IdempotencyKey)
}

func (q *API) deleteDLQ(c *gin.Context) {
	id := c.Param("dlqId")
	if !ids.Valid(id) {
		q.fail(c, record.ErrNotFound)
		return
	}
	scope, err := handlers.ScopeOf(c)
	if err == nil {
		err = q.removeFailed(c, scope, id)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": 1})
}

func (q *API) deleteDLQMany(c *gin.Context) {
	s, err := selection(c, dlqBulk)
	if err != nil {
		q.fail(c, err)
		return
	}
	deleted := 0
	var skipped handlers.SkipList
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		switch err := q.removeFailed(c, tenant.Only(r.Tenant), r.ID); {
		case err == nil:
			deleted++
		case handlers.StopsBulk(err):
			return err
		default:
			skipped.Add(r.ID, err)
		}
		return nil
	}, skipped.Add)
	if q.stoppedEmpty(c, err, deleted) {
		return
	}
	c.JSON(http.StatusOK, withSkipped(withCursor(gin.H{"deleted": deleted}, next), skipped))
}

// stoppedEmpty answers err and reports true when a bulk call stopped on
// it before doing anything. A call that did something reports it: the
// caller learns what was done and, from skipped and the cursor, what was
// not.
func (q *API) stoppedEmpty(c *gin.Context, err error, done int) bool {
	if err == nil {
		return false
	}
	if done == 0 {
		q.fail(c, err)
		return true
	}
	q.API.Log.Error("bulk call stopped early; reporting what it did", "path", c.FullPath(), "done", done, "err", err)
	return false
}

// withSkipped adds what a bulk call selected and did not do, with why,
// when there is any: QStash's own answer has no such field, so a call
// that did everything it selected answers exactly as QStash does.
func withSkipped(h gin.H, skipped handlers.SkipList) gin.H {
	if len(skipped) > 0 {
		h["skipped"] = skipped
	}
	return h
}

// withCursor adds the cursor a bulk call continues from, when there is
// one.
func withCursor(h gin.H, cursor string) gin.H {
	if cursor != "" {
		h["cursor"] = cursor
	}
	return h
}

// RetryActor is the actor recorded on redrives (dlq.retry) and cancels made through the QStash API.
const RetryActor = record.QStashActor

func (q *API) retryDLQ(c *gin.Context) {
	s, err := selection(c, dlqBulk)
	if err != nil {
		q.fail(c, err)
		return
	}
	responses := []gin.H{}
	var skipped handlers.SkipList
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		err := q.DLQ.Redrive(c.Request.Context(), tenant.Only(r.Tenant), r.ID, RetryActor, "dlq.retry through the QStash API")
		switch {
		case err == nil:
			responses = append(responses, gin.H{"messageId": r.ID})
		case handlers.StopsBulk(err):
			return err
		default:
			// At its redrive limit, not failed any more or gone: not in
			// QStash's responses, and said why under skipped.
			skipped.Add(r.ID, err)
		}
		return nil
	}, skipped.Add)
	if q.stoppedEmpty(c, err, len(responses)) {
		return
	}
	c.JSON(http.StatusOK, withSkipped(withCursor(gin.H{"responses": responses}, next), skipped))
}

func (q *API) cancelMessages(c *gin.Context) {
	s, err := selection(c, cancelBulk)
	if err != nil {
		q.fail(c, err)
		return
	}
	cancelled := 0
	var skipped handlers.SkipList
	next, err := q.walk(c, s, []record.Status{record.Pending, record.Retrying}, func(r *record.Request) error {
		switch err := q.API.Cancel(c.Request.Context(), tenant.Only(r.Tenant), r.ID, RetryActor); {
		case err == nil:
			cancelled++
		case handlers.StopsBulk(err):
			return err
		default:
			skipped.Add(r.ID, err)
		}
		return nil
	}, skipped.Add)
	if q.stoppedEmpty(c, err, cancelled) {
		return
	}
	c.JSON(http.StatusOK, withSkipped(withCursor(gin.H{"cancelled": cancelled}, next), skipped))
}
