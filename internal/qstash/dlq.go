package qstash

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// QStash's dead-letter queue is retryd's DLQ: a dlqId is the request id.

// DLQMessage is a message of dlq.listMessages.
type DLQMessage struct {
	Message
	DLQID          string `json:"dlqId"`
	ResponseStatus int    `json:"responseStatus,omitempty"`
	ResponseBody   string `json:"responseBody,omitempty"`
}

// idsOf reads the repeated query parameter name, keeping valid ids only.
func idsOf(c *gin.Context, name string) []string {
	var out []string
	for _, id := range c.QueryArray(name) {
		if ids.Valid(id) {
			out = append(out, id)
		}
	}
	return out
}

func dlqMessage(r *record.Request) DLQMessage {
	m := DLQMessage{Message: message(r), DLQID: r.ID, ResponseStatus: r.LastStatusCode}
	if n := len(r.Attempts); n > 0 && r.Attempts[n-1].ResponseBody != nil {
		m.ResponseBody = *r.Attempts[n-1].ResponseBody
	}
	return m
}

func (q *API) listDLQ(c *gin.Context) {
	ctx := c.Request.Context()
	out := gin.H{"messages": []DLQMessage{}}
	if want := idsOf(c, "dlqIds"); len(want) > 0 {
		msgs := []DLQMessage{}
		for _, id := range want {
			r, err := q.API.Store.Get(ctx, id)
			if err == nil && r.Status == record.Failed {
				msgs = append(msgs, dlqMessage(r))
			}
		}
		out["messages"] = msgs
		c.JSON(http.StatusOK, out)
		return
	}
	count, cursor, err := pageOf(c, 500)
	if err != nil {
		q.fail(c, err)
		return
	}
	f, err := filterOf(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	page, err := q.DLQ.Store.ListFailed(ctx, record.DLQFilter{}, cursor, count)
	if err != nil {
		q.fail(c, err)
		return
	}
	msgs := []DLQMessage{}
	for _, r := range page.Requests {
		full, err := q.API.Store.Get(ctx, r.ID) // with its attempts, for the response
		if err != nil || !f.match(full) {
			continue
		}
		msgs = append(msgs, dlqMessage(full))
	}
	out["messages"] = msgs
	if page.NextCursor != "" {
		out["cursor"] = page.NextCursor
	}
	c.JSON(http.StatusOK, out)
}

// removeFailed deletes a failed request's record (QStash's "delete from the
// DLQ"); anything else is not in the DLQ.
func (q *API) removeFailed(c *gin.Context, id string) error {
	r, err := q.API.Store.Get(c.Request.Context(), id)
	if err != nil {
		return err
	}
	if r.Status != record.Failed {
		return record.ErrNotFound
	}
	return q.API.Store.Remove(c.Request.Context(), id, r.IdempotencyKey)
}

func (q *API) deleteDLQ(c *gin.Context) {
	id := c.Param("dlqId")
	if !ids.Valid(id) {
		q.fail(c, record.ErrNotFound)
		return
	}
	if err := q.removeFailed(c, id); err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": 1})
}

// selected is the ids a bulk call names in the repeated parameter name,
// or, without any, those of status its filter (or "all") selects.
func (q *API) selected(c *gin.Context, name string, status record.Status) ([]string, error) {
	if want := idsOf(c, name); len(want) > 0 || len(c.QueryArray(name)) > 0 {
		return want, nil
	}
	f, err := filterOf(c)
	if err != nil {
		return nil, err
	}
	var out []string
	statuses := []record.Status{status}
	if status == record.Pending {
		statuses = append(statuses, record.Retrying) // "pending" here means not finished
	}
	for _, st := range statuses {
		err := q.each(c.Request.Context(), st, f, func(r *record.Request) error {
			out = append(out, r.ID)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (q *API) deleteDLQMany(c *gin.Context) {
	want, err := q.selected(c, "dlqIds", record.Failed)
	if err != nil {
		q.fail(c, err)
		return
	}
	deleted := 0
	for _, id := range want {
		switch err := q.removeFailed(c, id); {
		case err == nil:
			deleted++
		case !errors.Is(err, record.ErrNotFound):
			q.fail(c, err)
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"deleted": deleted})
}

// RetryActor is the actor recorded on redrives made through dlq.retry.
const RetryActor = "qstash"

func (q *API) retryDLQ(c *gin.Context) {
	want, err := q.selected(c, "dlqIds", record.Failed)
	if err != nil {
		q.fail(c, err)
		return
	}
	responses := []gin.H{}
	for _, id := range want {
		err := q.DLQ.Redrive(c.Request.Context(), id, RetryActor, "dlq.retry through the QStash API")
		switch {
		case err == nil:
			responses = append(responses, gin.H{"messageId": id})
		case errors.Is(err, record.ErrUnavailable):
			q.fail(c, err)
			return
		default:
			// At its redrive limit, or not failed: QStash leaves it out.
			q.API.Log.Info("dlq.retry skipped a message", "requestId", id, "err", err)
		}
	}
	c.JSON(http.StatusOK, gin.H{"responses": responses})
}

func (q *API) cancelMessages(c *gin.Context) {
	want, err := q.selected(c, "messageIds", record.Pending)
	if err != nil {
		q.fail(c, err)
		return
	}
	cancelled := 0
	for _, id := range want {
		switch err := q.API.Cancel(c.Request.Context(), id); {
		case err == nil:
			cancelled++
		case errors.Is(err, record.ErrUnavailable):
			q.fail(c, err)
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"cancelled": cancelled})
}
