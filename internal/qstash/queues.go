package qstash

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	sel "github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// QStash's queues: a queue's messages start in the order they were
// enqueued, at most its parallelism at once, and wait while it is paused
// (internal/flow/queue.go). A queue is its tenant's.

// QueueStore lists each tenant's queues.
type QueueStore interface {
	// AddQueueName lists a queue, or returns record.ErrQueueLimit when
	// the tenant has limit queues already (0: no limit).
	AddQueueName(ctx context.Context, tenant, name string, limit int) error
	RemoveQueueName(ctx context.Context, tenant, name string) error
	QueuePage(ctx context.Context, scope tenant.Scope, after record.QueueRef, n int) ([]record.QueueRef, bool, error)
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
// enqueueing to an unknown queue does in QStash, within the tenant's
// queue limit.
func (q *API) ensureQueue(c *gin.Context, owner, name string) error {
	if err := q.listQueue(c, owner, name); err != nil {
		return err
	}
	_, err := flow.EnsureQueue(c.Request.Context(), q.Flows.RDB, tenant.Qualify(owner, name), q.API.Now())
	return err
}

// listQueue lists queue name of owner before its settings are made, so a
// queue past the tenant's limit is refused with nothing made. (A failure
// between the two leaves a listed name without settings: it counts
// toward the limit, is not shown, and the next upsert or enqueue makes
// its settings.)
func (q *API) listQueue(c *gin.Context, owner, name string) error {
	err := q.Queues.AddQueueName(c.Request.Context(), owner, name, q.QueueLimit)
	if errors.Is(err, record.ErrQueueLimit) {
		return handlers.Errorf(handlers.CodeConflict, "queueName", "queue limit reached: this tenant has "+strconv.Itoa(q.QueueLimit)+
			" queues (QUEUE_LIMIT); delete one before making "+strconv.Quote(name))
	}
	return err
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
		err = q.listQueue(c, owner, in.QueueName)
	}
	if err == nil {
		err = flow.SetQueue(c.Request.Context(), q.Flows.RDB, q.Flows.Mover, q.API.Log, tenant.Qualify(owner, in.QueueName), p, in.Paused, q.API.Now())
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

// Queue list pages: the official clients read GET /v2/queues as one JSON
// array and send no parameters, so the first page is the default answer,
// as large as a tenant's default queue limit. A page with more after it
// says where they are in a Link header (rel="next"), whose cursor
// continues the list.
const (
	DefaultQueuePage = 1000
	MaxQueuePage     = 1000
)

// queuesRoute is what GET /v2/queues takes.
var queuesRoute = []string{"count", "cursor", sel.TenantParam}

func (q *API) listQueues(c *gin.Context) {
	count, after, err := queuePaging(c)
	var scope tenant.Scope
	if err == nil {
		scope, err = handlers.ScopeOf(c)
	}
	var page []record.QueueRef
	var more bool
	if err == nil {
		page, more, err = q.Queues.QueuePage(c.Request.Context(), scope, after, count)
	}
	var out []QueueDoc
	if err == nil {
		out, err = q.queueDocs(c, page)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	if more {
		last := page[len(page)-1]
		next := url.Values{"cursor": {last.Tenant + "/" + last.Name}, "count": {strconv.Itoa(count)}}
		if t := c.Query(sel.TenantParam); t != "" {
			next.Set(sel.TenantParam, t)
		}
		c.Header("Link", "</v2/queues?"+next.Encode()+`>; rel="next"`)
	}
	c.JSON(http.StatusOK, out)
}

// queueDocs reads the queues of a page. A name listed without settings
// (made between the two steps of an upsert, or deleted meanwhile) is
// left out.
func (q *API) queueDocs(c *gin.Context, page []record.QueueRef) ([]QueueDoc, error) {
	out := []QueueDoc{}
	for _, ref := range page {
		d, err := q.queueDoc(c, ref.Tenant, ref.Name)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// queuePaging reads count and cursor of GET /v2/queues; any other
// parameter is refused, as on every list.
func queuePaging(c *gin.Context) (int, record.QueueRef, error) {
	query := c.Request.URL.Query()
	keys := slices.Sorted(maps.Keys(query)) // the same key named first every time
	for _, k := range keys {
		v := query[k]
		if !slices.Contains(queuesRoute, k) {
			return 0, record.QueueRef{}, badRequest(k, "unknown parameter "+strconv.Quote(k)+"; this call takes "+strings.Join(queuesRoute, ", "))
		}
		if len(v) > 1 {
			return 0, record.QueueRef{}, badRequest(k, k+" is given more than once; give it once")
		}
	}
	count := DefaultQueuePage
	if v, ok := query["count"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxQueuePage {
			return 0, record.QueueRef{}, badRequest("count", "count must be an integer between 1 and "+strconv.Itoa(MaxQueuePage))
		}
		count = n
	}
	var after record.QueueRef
	if v := query.Get("cursor"); v != "" {
		t, name, ok := strings.Cut(v, "/")
		if !ok || !tenant.Valid(t) || name == "" {
			return 0, record.QueueRef{}, badRequest("cursor", "cursor is not one this API returned (it comes from the Link header of the previous page)")
		}
		after = record.QueueRef{Tenant: t, Name: name}
	}
	return count, after, nil
}

func (q *API) deleteQueue(c *gin.Context) {
	name, err := pathQueue(c, "name")
	var owner string
	if err == nil {
		owner, err = handlers.OwnTenant(c)
	}
	if err == nil {
		err = flow.DeleteQueue(c.Request.Context(), q.Flows.RDB, q.Flows.Mover, q.API.Log, tenant.Qualify(owner, name))
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
		err = flow.SetQueuePaused(c.Request.Context(), q.Flows.RDB, q.Flows.Mover, q.API.Log, tenant.Qualify(owner, name), paused, q.API.Now())
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
