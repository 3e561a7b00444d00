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
	msgs := []DLQMessage{}
	kept := 0
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		full, err := q.API.Store.Get(c.Request.Context(), r.ID) // with its attempts, for the response
		if err == nil {
			msgs = append(msgs, dlqMessage(full))
			kept += record.Footprint(full)
		}
		if kept >= record.ListBudget {
			return sel.ErrFull // the rest on the next page: bodies make messages large
		}
		return nil
	})
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
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		switch err := q.removeFailed(c, tenant.Only(r.Tenant), r.ID); {
		case err == nil:
			deleted++
		case !errors.Is(err, record.ErrNotFound):
			return err
		}
		return nil
	})
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, withCursor(gin.H{"deleted": deleted}, next))
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
const RetryActor = "qstash"

func (q *API) retryDLQ(c *gin.Context) {
	s, err := selection(c, dlqBulk)
	if err != nil {
		q.fail(c, err)
		return
	}
	responses := []gin.H{}
	next, err := q.walk(c, s, []record.Status{record.Failed}, func(r *record.Request) error {
		err := q.DLQ.Redrive(c.Request.Context(), tenant.Only(r.Tenant), r.ID, RetryActor, "dlq.retry through the QStash API")
		switch {
		case err == nil:
			responses = append(responses, gin.H{"messageId": r.ID})
		case errors.Is(err, record.ErrUnavailable):
			return err
		default:
			// At its redrive limit, or not failed: QStash leaves it out.
			q.API.Log.Info("dlq.retry skipped a message", "requestId", r.ID, "err", err)
		}
		return nil
	})
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, withCursor(gin.H{"responses": responses}, next))
}

func (q *API) cancelMessages(c *gin.Context) {
	s, err := selection(c, cancelBulk)
	if err != nil {
		q.fail(c, err)
		return
	}
	cancelled := 0
	next, err := q.walk(c, s, []record.Status{record.Pending, record.Retrying}, func(r *record.Request) error {
		switch err := q.API.Cancel(c.Request.Context(), tenant.Only(r.Tenant), r.ID, RetryActor); {
		case err == nil:
			cancelled++
		case errors.Is(err, record.ErrUnavailable):
			return err
		}
		return nil
	})
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, withCursor(gin.H{"cancelled": cancelled}, next))
}
