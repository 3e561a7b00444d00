// Package qstash serves the QStash-compatible API under /v2: the dialect
// of Upstash QStash's official clients, translated into retryd's own
// submission (handlers.API.Accept) and records. A QStash message is a
// retryd request: it shows in GET /requests/{id}, the DLQ and the
// dashboard like any other, and follows retryd's delivery rules. Errors
// are answered in QStash's shape, {"error": "..."}, so the official client
// throws a readable QstashError.
package qstash

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
)

// DefaultRetries is QStash's default number of retries.
const DefaultRetries = 3

// API is the /v2 dialect over retryd's API.
type API struct {
	API       *handlers.API
	DLQ       *handlers.DLQ
	Schedules *handlers.Schedules
	// Topics are the URL groups.
	Topics *handlers.Topics
	// Flows serve the flow-control API (and hold the queues' lines).
	Flows *handlers.Flows
	// Queues list the queues.
	Queues QueueStore
	// QueueLimit is the most queues one tenant may have (QUEUE_LIMIT; 0:
	// no limit).
	QueueLimit int
	// Workflows hold the Upstash Workflow runs (nil: not served).
	Workflows *workflow.Store
	// Invokes return invoked runs' results to the runs that invoked them
	// (nil: an invoked run's end returns nothing).
	Invokes *invoke.Returner
	// Keys are the signing keys /v2/keys reports (the workers sign with
	// them).
	CurrentKey, NextKey string
}

// Routes registers the /v2 routes.
func (q *API) Routes(r gin.IRouter) {
	r = r.Group("/", handlers.Dialect(q.fail))
	r.POST("/v2/publish/*destination", q.publish)
	r.POST("/v2/batch", q.batch)
	r.DELETE("/v2/messages", q.cancelMessages)
	r.GET("/v2/dlq", q.listDLQ)
	r.GET("/v2/dlq/:dlqId", q.getDLQ)
	r.DELETE("/v2/dlq/:dlqId", q.deleteDLQ)
	r.DELETE("/v2/dlq", q.deleteDLQMany)
	r.POST("/v2/dlq/retry", q.retryDLQ)
	if q.Workflows != nil {
		r.GET("/v2/workflows/runs/:id", q.getRun)
		r.DELETE("/v2/workflows/runs/:id", q.endRun)
		r.DELETE("/v2/workflows/runs", q.cancelRuns)
		r.GET("/v2/workflows/events", q.workflowLogs)
		r.POST("/v2/workflows/dlq/resume", q.resumeWorkflows)
		r.POST("/v2/workflows/dlq/restart", q.restartWorkflows)
		r.POST("/v2/workflows/dlq/callback/:dlqId", q.retryFailureFunction)
		r.DELETE("/v2/workflows/dlq", q.deleteWorkflowDLQ)
		r.POST("/v2/wait/:eventId", q.waitForEvent)
		// /v2/notify/{eventId}, and /v2/notify/{runId}/{eventId} for one
		// run's wait (gin names the first segment alike in both).
		r.POST("/v2/notify/:eventId", q.notify)
		r.POST("/v2/notify/:eventId/:second", q.notify)
		r.GET("/v2/waiters/:eventId", q.waiters)
	}
	r.GET("/v2/messages/:id", q.getMessage)
	r.DELETE("/v2/messages/:id", q.cancelMessage)
	// The signing keys forge any delivery's signature: admins only.
	r.GET("/v2/keys", handlers.AdminOnly(q.API.Log), q.keys)
	r.POST("/v2/schedules/*destination", q.createSchedule)
	r.GET("/v2/schedules", q.listSchedules)
	r.GET("/v2/schedules/:scheduleId", q.getSchedule)
	r.DELETE("/v2/schedules/:scheduleId", q.deleteSchedule)
	r.PATCH("/v2/schedules/:scheduleId/pause", q.pauseSchedule)
	r.PATCH("/v2/schedules/:scheduleId/resume", q.resumeSchedule)
	r.GET("/v2/events", q.events)
	r.GET("/v2/topics", q.listGroups)
	r.GET("/v2/topics/:name", q.getGroup)
	r.DELETE("/v2/topics/:name", q.deleteGroup)
	r.POST("/v2/topics/:name/endpoints", q.addEndpoints)
	r.DELETE("/v2/topics/:name/endpoints", q.removeEndpoints)
	r.GET("/v2/flowControl", q.listFlowControl)
	r.GET("/v2/flowControl/:key", q.getFlowControl)
	for _, a := range []handlers.FlowAction{handlers.ActionPause, handlers.ActionResume, handlers.ActionPin, handlers.ActionUnpin, handlers.ActionResetRate} {
		r.POST("/v2/flowControl/:key/"+string(a), q.actOnFlowControl(a))
	}
	r.GET("/v2/globalParallelism", q.globalParallelism)
	r.POST("/v2/queues", q.upsertQueue)
	r.POST("/v2/queues/", q.upsertQueue)
	r.GET("/v2/queues", q.listQueues)
	r.GET("/v2/queues/:name", q.getQueue)
	r.DELETE("/v2/queues/:name", q.deleteQueue)
	r.POST("/v2/queues/:name/pause", q.pauseQueue)
	r.POST("/v2/queues/:name/resume", q.resumeQueue)
	r.POST("/v2/enqueue/:queue/*destination", q.enqueue)
}

// fail answers err in QStash's error shape.
func (q *API) fail(c *gin.Context, err error) {
	e := handlers.Resolve(c, q.API.Log, err)
	c.AbortWithStatusJSON(e.Status(), gin.H{"error": e.Message})
}

func badRequest(field, msg string) error {
	return handlers.Errorf(handlers.CodeInvalid, field, msg)
}

// rawTail is the destination URL after prefix (/v2/publish/ or
// /v2/schedules/), verbatim from the raw request URI: path cleaning would
// turn https://x/a%20b into https:/x/a%2520b.
func rawTail(c *gin.Context, prefix string) string {
	raw := c.Request.RequestURI
	if i := strings.Index(raw, prefix); i >= 0 {
		return raw[i+len(prefix):]
	}
	return strings.TrimPrefix(c.Param("destination"), "/")
}

// readBody reads a message body, refusing one above retryd's limit.
func (q *API) readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, submit.MaxBytes+1))
	if err != nil || len(body) > submit.MaxBytes {
		q.fail(c, handlers.Errorf(handlers.CodeTooLarge, "", "message body is larger than 256 KiB"))
		return nil, false
	}
	return body, true
}

func (q *API) publish(c *gin.Context) {
	body, ok := q.readBody(c)
	if !ok {
		return
	}
	q.publishTo(c, rawTail(c, "/v2/publish/"), body)
}

// publishTo publishes body to dest, a URL or a URL group's name, and
// answers the client.
func (q *API) publishTo(c *gin.Context, dest string, body []byte) {
	if err := q.payFor(c, []string{dest}); err != nil {
		q.fail(c, err)
		return
	}
	if isURLGroup(dest) {
		// A URL group: one message per endpoint, answered as a list.
		res, err := q.publishGroup(c, dest, c.Request.Header, body)
		if err != nil {
			q.fail(c, err)
			return
		}
		c.JSON(http.StatusCreated, res)
		return
	}
	res, err := q.publishOne(c, dest, c.Request.Header, body)
	if err != nil {
		q.fail(c, err)
		return
	}
	status := http.StatusCreated
	if res.Deduplicated {
		status = http.StatusAccepted // QStash answers a duplicate with the first message's id
	}
	c.JSON(status, res)
}

// Published is the answer to one publish.
type Published struct {
	MessageID    string `json:"messageId"`
	URL          string `json:"url"`
	Deduplicated bool   `json:"deduplicated,omitempty"`
}

// publishOne translates one message into a retryd submission and accepts
// it.
func (q *API) publishOne(c *gin.Context, dest string, h http.Header, body []byte) (*Published, error) {
	wf, err := workflowOf(h, dest)
	switch {
	case err != nil || wf == nil:
	case wf.Init:
		if wf.Invoke {
			// The body says what invoked the run; the run's payload is in it.
			body, wf.Invoker, err = q.invokerOf(c, body)
		}
		wf.Config = runConfig(h)
	case wf.delivers():
		h, err = q.inheritRun(c, wf.Run, h)
	}
	var r *record.Request
	var raw []byte
	if err == nil {
		r, raw, err = q.translate(c, dest, h, body)
	}
	if err != nil {
		q.API.SubmissionRejected() // Accept counts the rest
		return nil, err
	}
	if wf != nil {
		return q.publishWorkflow(c, r, wf, dedupKey(h, dest, body), raw, body)
	}
	replay, err := q.API.Accept(c, r, dedupKey(h, dest, body), raw, r.CreatedAt)
	if err != nil {
		return nil, err
	}
	if replay != nil {
		return &Published{MessageID: replay.ID, URL: redact.URL(dest), Deduplicated: true}, nil
	}
	if err := q.queued(c, r); err != nil {
		// Accepted: its first admission puts it in line at its place.
		q.API.Log.Warn("could not put a message in its queue's line now", "requestId", r.ID, "err", err)
	}
	// The answer is a view like any other: the URL's secrets masked (the
	// client knows them; its logs and proxies need not).
	return &Published{MessageID: r.ID, URL: redact.URL(dest)}, nil
}

// translate makes one message into a parsed retryd submission (and its
// body), its queue made if it names one.
func (q *API) translate(c *gin.Context, dest string, h http.Header, body []byte) (*record.Request, []byte, error) {
	now := q.API.Now()
	sub, extra, err := submission(h, dest, body)
	if err != nil {
		return nil, nil, err
	}
	raw, _ := json.Marshal(sub)
	r, err := submit.Parse(raw, now)
	if err != nil {
		return nil, nil, err
	}
	r.Dialect, r.QStash = record.DialectQStash, extra
	if extra.Queue != "" {
		if err := q.ensureQueue(c, handlers.TenantOf(c), extra.Queue); err != nil {
			return nil, nil, err
		}
	}
	return r, raw, nil
}

// batchItem is one message of POST /v2/batch.
type batchItem struct {
	Destination string            `json:"destination"`
	Headers     map[string]string `json:"headers"`
	// Body is a string, sent as is; any other JSON value (the workflow
	// SDK's batches carry objects) is sent as its JSON.
	Body  json.RawMessage `json:"body"`
	Queue string          `json:"queue"` // a queue's name: its messages keep its order
}

// body is the item's message body.
func (it batchItem) body() []byte {
	var s string
	if json.Unmarshal(it.Body, &s) == nil {
		return []byte(s)
	}
	if string(it.Body) == "null" {
		return nil
	}
	return it.Body
}

// MaxBatch bounds the messages of one batch.
const MaxBatch = 100

func (q *API) batch(c *gin.Context) {
	raw, err := io.ReadAll(io.LimitReader(c.Request.Body, 4*submit.MaxBytes+1))
	if err != nil || len(raw) > 4*submit.MaxBytes {
		q.fail(c, handlers.Errorf(handlers.CodeTooLarge, "", "batch is larger than 1 MiB"))
		return
	}
	var items []batchItem
	if err := json.Unmarshal(raw, &items); err != nil {
		q.fail(c, badRequest("", "batch must be a JSON array of {destination, headers, body}: "+err.Error()))
		return
	}
	if len(items) == 0 || len(items) > MaxBatch {
		q.fail(c, badRequest("", "a batch holds 1 to 100 messages"))
		return
	}
	dests := make([]string, len(items))
	for i, it := range items {
		dests[i] = it.Destination
	}
	if err := q.payFor(c, dests); err != nil {
		q.fail(c, err)
		return
	}
	out := make([]any, 0, len(items))
	for i, it := range items {
		h := http.Header{}
		for k, v := range it.Headers {
			h.Set(k, v)
		}
		if it.Queue != "" {
			h.Set("Upstash-Queue-Name", it.Queue)
		}
		var res any
		var err error
		if isURLGroup(it.Destination) {
			res, err = q.publishGroup(c, it.Destination, h, it.body()) // a list for this item
		} else {
			res, err = q.publishOne(c, it.Destination, h, it.body())
		}
		if err != nil {
			// Messages before this one are accepted; say which failed.
			e := handlers.Resolve(c, q.API.Log, err)
			c.AbortWithStatusJSON(e.Status(), gin.H{"error": "message " + strconv.Itoa(i) + ": " + e.Message})
			return
		}
		out = append(out, res)
	}
	c.JSON(http.StatusCreated, out)
}

// payFor pays the rate limit for the requests a publish to dests makes,
// before any is made: one per URL, one per endpoint of a URL group (a
// batch of 20 to a group of 100 endpoints makes 2,000). A group that does
// not exist counts one; its publish then fails on its own.
func (q *API) payFor(c *gin.Context, dests []string) error {
	n := 0
	groups := map[string]int{}
	for _, dest := range dests {
		if !isURLGroup(dest) {
			n++
			continue
		}
		size, seen := groups[dest]
		if !seen {
			tp, _, err := q.loadGroup(c, dest)
			switch {
			case err == nil:
				size = len(tp.Endpoints)
			case isNotFound(err):
				size = 1
			default:
				return err
			}
			groups[dest] = size
		}
		n += size
	}
	return handlers.PayFor(c, n)
}

// isNotFound reports whether err is an API 404.
func isNotFound(err error) bool {
	var e *handlers.Error
	return errors.As(err, &e) && e.Code == handlers.CodeNotFound
}

// Message is a QStash message as messages.get returns it.
type Message struct {
	MessageID            string              `json:"messageId"`
	URL                  string              `json:"url"`
	Method               string              `json:"method"`
	Header               map[string][]string `json:"header"`
	Body                 string              `json:"body,omitempty"`
	MaxRetries           int                 `json:"maxRetries"`
	RetryDelayExpression string              `json:"retryDelayExpression,omitempty"`
	NotBefore            int64               `json:"notBefore"`
	CreatedAt            int64               `json:"createdAt"`
	Callback             string              `json:"callback,omitempty"`
	FailureCallback      string              `json:"failureCallback,omitempty"`
	ScheduleID           string              `json:"scheduleId,omitempty"`
	TopicName            string              `json:"topicName,omitempty"`
	QueueName            string              `json:"queueName,omitempty"`
	Label                string              `json:"label,omitempty"`
	Labels               []string            `json:"labels,omitempty"`
	FlowControlKey       string              `json:"flowControlKey,omitempty"`
	Parallelism          int                 `json:"parallelism,omitempty"`
	Rate                 int                 `json:"rate,omitempty"`
	Period               int64               `json:"period,omitempty"` // seconds
	// Expunged: retryd erased the message's body, headers and response
	// bodies (DELETE /requests/{id}/payload); their absence is that.
	Expunged bool `json:"expunged,omitempty"`
}

// notFound is QStash's answer for a message id it does not know.
func notFound(id string) error {
	return handlers.Errorf(handlers.CodeNotFound, "", "message "+names.Quote(id)+" not found")
}

func (q *API) getMessage(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		q.fail(c, notFound(id))
		return
	}
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	r, err := q.API.Store.GetIn(c.Request.Context(), scope, id)
	if errors.Is(err, record.ErrNotFound) {
		err = notFound(id)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, message(r))
}

// message renders a request as a QStash message, shown like any retryd
// document: secrets redacted.
func message(r *record.Request) Message {
	m := Message{MessageID: r.ID, URL: redact.URL(r.URL), Method: r.Method, Header: map[string][]string{}, Body: r.Body,
		MaxRetries: r.MaxRetries, NotBefore: r.NextAttemptAt.UnixMilli(), CreatedAt: r.CreatedAt.UnixMilli(), Callback: redact.URL(r.CallbackURL)}
	if r.NextAttemptAt.IsZero() {
		// A finished request has no next attempt (a DLQ entry once showed
		// Go's zero time, -62135596800000): it was due from its creation.
		m.NotBefore = m.CreatedAt
	}
	for k, v := range redact.Headers(r.Headers) {
		m.Header[k] = []string{v}
	}
	if q := r.QStash; q != nil {
		m.RetryDelayExpression, m.FailureCallback, m.ScheduleID = q.RetryDelay, redact.URL(q.FailureCallback), q.ScheduleID
		m.Label, m.Labels, m.FlowControlKey, m.QueueName = q.Label, q.AllLabels(), q.FlowControlKey, q.Queue
		if q.Redact != nil {
			m.Header = RedactHeaders(m.Header, q.Redact)
			if q.Redact.Body {
				m.Body = ""
			}
		}
	}
	m.TopicName = r.Topic
	m.Expunged = r.Expunged
	if fc := r.FlowControl; fc != nil {
		m.Parallelism, m.Rate, m.Period = fc.Parallelism, fc.Rate, periodSeconds(fc)
	}
	return m
}

// periodSeconds is a flow control's period as QStash reports it, in
// seconds: its default, one second, when only parallelism was set (the
// official Python SDK reads 1 there).
func periodSeconds(fc *record.FlowControl) int64 {
	return max(1, fc.PeriodMs/1000)
}

func (q *API) cancelMessage(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		q.fail(c, notFound(id))
		return
	}
	scope, err := handlers.ScopeOf(c)
	if err == nil {
		err = q.API.Cancel(c.Request.Context(), scope, id, RetryActor)
	}
	if err != nil {
		if errors.Is(err, record.ErrNotFound) {
			err = notFound(id)
		}
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"cancelled": 1})
}

func (q *API) keys(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"current": q.CurrentKey, "next": q.NextKey})
}
