package qstash

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
)

// QStash's queues: a queue's messages start in the order they were
// enqueued, at most its parallelism at once, and wait while it is paused
// (internal/flow/queue.go). A queue is its tenant's.

// QueueStore lists each tenant's queues.
type QueueStore interface {
	AddQueueName(ctx context.Context, tenant, name string) error
	RemoveQueueName(ctx context.Context, tenant, name string) error
	QueueNames(ctx context.Context, scope tenant.Scope) (map[string][]string, error)
}

// QueueDoc is a queue as the client reads it.
type QueueDoc struct {
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	Lag         int64  `json:"lag"`
	Paused      bool   `json:"paused"`
	CreatedAt   int64  `json:"createdAt"`
	UpdatedAt   int64  `json:"updatedAt"`
}

// MaxQueueParallelism bounds a queue's parallelism.
const MaxQueueParallelism = 1000

func (q *API) queueDoc(c *gin.Context, owner, name string) (QueueDoc, error) {
	s, err := flow.ReadQueue(c.Request.Context(), q.Flows.RDB, tenant.Qualify(owner, name))
	if errors.Is(err, flow.ErrNoQueue) {
		err = handlers.Errorf(handlers.CodeNotFound, "", "queue "+names.Quote(name)+" not found")
	}
	if err != nil {
		return QueueDoc{}, err
	}
	return QueueDoc{Name: name, Parallelism: s.Parallelism, Lag: s.Lag, Paused: s.Paused, CreatedAt: s.CreatedAt.UnixMilli(), UpdatedAt: s.UpdatedAt.UnixMilli()}, nil
}

// ensureQueue makes queue name (parallelism 1) if it does not exist, as
// enqueueing to an unknown queue does in QStash.
func (q *API) ensureQueue(c *gin.Context, owner, name string) error {
	ctx := c.Request.Context()
	made, err := flow.EnsureQueue(ctx, q.Flows.RDB, tenant.Qualify(owner, name), q.API.Now())
	if err != nil || !made {
		return err
	}
	return q.Queues.AddQueueName(ctx, owner, name)
}

func validQueue(name string) error {
	if err := names.Queue.Check("queueName", name); err != nil {
		return err
	}
	if handlers.ValidTopicName(name) != nil {
		return badRequest("queueName", "a queue's name is 1 to 128 of letters, digits, _ . : and -")
	}
	return nil
}

// pathQueue is the queue name the path's param names, refused (400) when
// it holds a control character or is too long.
func pathQueue(c *gin.Context, param string) (string, error) {
	name := c.Param(param)
	return name, names.Queue.Check(param, name)
}

func (q *API) upsertQueue(c *gin.Context) {
	raw, ok := q.readBody(c)
	if !ok {
		return
	}
	var in struct {
		QueueName   string `json:"queueName"`
		Parallelism *int   `json:"parallelism"`
		Paused      bool   `json:"paused"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		q.fail(c, badRequest("", `body must be {"queueName": "...", "parallelism": 1, "paused": false}`))
		return
	}
	p := 1
	if in.Parallelism != nil {
		p = *in.Parallelism
	}
	err := validQueue(in.QueueName)
	if err == nil && (p < 1 || p > MaxQueueParallelism) {
		err = badRequest("parallelism", "parallelism must be between 1 and 1000")
	}
	var owner string
	if err == nil {
		owner, err = handlers.OwnTenant(c)
	}
	if err == nil {
		err = flow.SetQueue(c.Request.Context(), q.Flows.RDB, q.Flows.Waker, tenant.Qualify(owner, in.QueueName), p, in.Paused, q.API.Now())
	}
	if err == nil {
		err = q.Queues.AddQueueName(c.Request.Context(), owner, in.QueueName)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (q *API) getQueue(c *gin.Context) {
	name, err := pathQueue(c, "name")
	var owner string
	if err == nil {
		owner, err = handlers.OwnTenant(c)
	}
	var d QueueDoc
	if err == nil {
		d, err = q.queueDoc(c, owner, name)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func (q *API) listQueues(c *gin.Context) {
	scope, err := handlers.ScopeOf(c)
	var names map[string][]string
	if err == nil {
		names, err = q.Queues.QueueNames(c.Request.Context(), scope)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	out := []QueueDoc{}
	for owner, list := range names {
		for _, name := range list {
			if d, err := q.queueDoc(c, owner, name); err == nil {
				out = append(out, d)
			}
		}
	}
	c.JSON(http.StatusOK, out)
}

func (q *API) deleteQueue(c *gin.Context) {
	name, err := pathQueue(c, "name")
	var owner string
	if err == nil {
		owner, err = handlers.OwnTenant(c)
	}
	if err == nil {
		err = flow.DeleteQueue(c.Request.Context(), q.Flows.RDB, q.Flows.Waker, tenant.Qualify(owner, name))
	}
	if err == nil {
		err = q.Queues.RemoveQueueName(c.Request.Context(), owner, name)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (q *API) pauseQueue(c *gin.Context)  { q.setQueuePaused(c, true) }
func (q *API) resumeQueue(c *gin.Context) { q.setQueuePaused(c, false) }

func (q *API) setQueuePaused(c *gin.Context, paused bool) {
	name, err := pathQueue(c, "name")
	var owner string
	if err == nil {
		owner, err = handlers.OwnTenant(c)
	}
	if err == nil {
		_, err = q.queueDoc(c, owner, name) // 404 for an unknown queue
	}
	if err == nil {
		err = flow.SetQueuePaused(c.Request.Context(), q.Flows.RDB, q.Flows.Waker, tenant.Qualify(owner, name), paused, q.API.Now())
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

// enqueue serves POST /v2/enqueue/{queue}/{destination}: a publish whose
// message keeps the queue's order.
func (q *API) enqueue(c *gin.Context) {
	name, err := pathQueue(c, "queue")
	if err != nil {
		q.fail(c, err)
		return
	}
	body, ok := q.readBody(c)
	if !ok {
		return
	}
	c.Request.Header.Set("Upstash-Queue-Name", name)
	q.publishTo(c, rawTail(c, "/v2/enqueue/"+name+"/"), body)
}

// queued puts the accepted message r in its queue's line, at its place,
// making the queue if it does not exist.
func (q *API) queued(c *gin.Context, r *record.Request) error {
	if r.QStash == nil || r.QStash.Queue == "" {
		return nil
	}
	return flow.JoinQueue(c.Request.Context(), q.Flows.RDB, tenant.Qualify(r.Tenant, r.QStash.Queue), r.ID, r.CreatedAt)
}
