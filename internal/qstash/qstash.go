// Package qstash serves the QStash-compatible API under /v2: the dialect
// of Upstash QStash's official clients, translated into retryd's own
// submission (handlers.API.Accept) and records. A QStash message is a
// retryd request: it shows in GET /requests/{id}, the DLQ and the
// dashboard like any other, and follows retryd's delivery rules. Errors
// are answered in QStash's shape, {"error": "..."}, so the official client
// throws a readable QstashError.
package qstash

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/delayexpr"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
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
	// Keys are the signing keys /v2/keys reports (the workers sign with
	// them).
	CurrentKey, NextKey string
}

// Routes registers the /v2 routes.
func (q *API) Routes(r gin.IRouter) {
	r.POST("/v2/publish/*destination", q.publish)
	r.POST("/v2/batch", q.batch)
	r.DELETE("/v2/messages", q.cancelMessages)
	r.GET("/v2/dlq", q.listDLQ)
	r.DELETE("/v2/dlq/:dlqId", q.deleteDLQ)
	r.DELETE("/v2/dlq", q.deleteDLQMany)
	r.POST("/v2/dlq/retry", q.retryDLQ)
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

// duration reads QStash's "10s", "5m", "2h", "1d" (or plain seconds). A
// value a time.Duration cannot hold is an error, never a wrapped one
// (213504d once wrapped to 25 minutes).
func duration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	digits, unit := v, time.Second
	if len(v) > 0 {
		if u, ok := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[v[len(v)-1]]; ok {
			digits, unit = v[:len(v)-1], u
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || digits == "" || digits[0] == '+' {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("out of range")
		}
		return 0, errors.New("invalid duration")
	}
	if n > int64(maxDuration/unit) {
		return 0, errors.New("out of range")
	}
	return time.Duration(n) * unit, nil
}

// maxNotBefore is the last second of the year 9999.
const maxNotBefore = 253402300799

// maxDuration bounds a QStash duration: far beyond any limit of retryd's
// (which then answers with its own message), far below int64's wrap.
const maxDuration = 100 * 365 * 24 * time.Hour

// submission translates a publish call into retryd's submission body, so
// every rule of retryd's API applies to it unchanged, and the fields QStash
// adds to it.
func submission(h http.Header, dest string, body []byte) (map[string]any, *record.QStash, error) {
	extra, err := extras(h)
	if err != nil {
		return nil, nil, err
	}
	sub := map[string]any{"url": dest, "method": "POST", "maxRetries": DefaultRetries}
	if v := h.Get("Upstash-Flow-Control-Value"); v != "" || extra.FlowControlKey != "" {
		// Enforced by retryd's flow control, across all workers.
		fc, err := flowControl(extra.FlowControlKey, v)
		if err != nil {
			return nil, nil, err
		}
		m := map[string]any{"key": fc.Key}
		if fc.Parallelism > 0 {
			m["parallelism"] = fc.Parallelism
		}
		if fc.Rate > 0 {
			m["rate"], m["periodMs"] = fc.Rate, fc.Period.Milliseconds()
		}
		sub["flowControl"] = m
	}
	headers := map[string]string{}
	for name, values := range h {
		lower := strings.ToLower(name)
		switch {
		case strings.HasPrefix(lower, "upstash-forward-"):
			fwd := name[len("upstash-forward-"):]
			if submit.Framing(http.CanonicalHeaderKey(fwd)) {
				// The official SDKs forward Content-Length and Host (the
				// workflow SDK always): framing is retryd's to set, so
				// they are dropped here, not refused.
				continue
			}
			headers[fwd] = strings.Join(values, ", ")
		case lower == "content-type":
			headers["Content-Type"] = values[0]
		}
	}
	if m := h.Get("Upstash-Method"); m != "" {
		sub["method"] = strings.ToUpper(m)
	}
	if v := h.Get("Upstash-Retries"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, nil, badRequest("Upstash-Retries", "Upstash-Retries must be an integer")
		}
		sub["maxRetries"] = n
	}
	if v := h.Get("Upstash-Timeout"); v != "" {
		d, err := duration(v)
		if err != nil {
			return nil, nil, badRequest("Upstash-Timeout", "Upstash-Timeout must be a duration such as 30s")
		}
		sub["timeoutMs"] = d.Milliseconds()
	}
	switch nb, delay := h.Get("Upstash-Not-Before"), h.Get("Upstash-Delay"); {
	case nb != "":
		sec, err := strconv.ParseInt(nb, 10, 64)
		if err != nil || sec < 0 || sec > maxNotBefore {
			return nil, nil, badRequest("Upstash-Not-Before", "Upstash-Not-Before must be a Unix time in seconds (before the year 10000)")
		}
		sub["notBefore"] = time.Unix(sec, 0).UTC().Format(time.RFC3339)
	case delay != "":
		d, err := duration(delay)
		if err != nil {
			return nil, nil, badRequest("Upstash-Delay", "Upstash-Delay must be a duration such as 10s, 5m, 2h or 1d")
		}
		sub["delayMs"] = d.Milliseconds()
	}
	if cb := h.Get("Upstash-Callback"); cb != "" {
		sub["callbackUrl"] = cb
	}
	if len(headers) > 0 {
		sub["headers"] = headers
	}
	if len(body) > 0 {
		sub["body"] = string(body)
	}
	return sub, extra, nil
}

// extras reads the fields a publish adds to retryd's submission.
func extras(h http.Header) (*record.QStash, error) {
	q := &record.QStash{
		RetryDelay: strings.TrimSpace(h.Get("Upstash-Retry-Delay")), FailureCallback: h.Get("Upstash-Failure-Callback"),
		FlowControlKey: h.Get("Upstash-Flow-Control-Key"),
	}
	// Several labels: Upstash-Label "a,b" (or repeated). Label keeps the
	// first, as QStash's legacy field does.
	for _, v := range h.Values("Upstash-Label") {
		for _, l := range strings.Split(v, ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(q.Labels, l) {
				q.Labels = append(q.Labels, l)
			}
		}
	}
	if len(q.Labels) > MaxLabels {
		return nil, badRequest("Upstash-Label", fmt.Sprintf("Upstash-Label: at most %d labels", MaxLabels))
	}
	if len(q.Labels) > 0 {
		q.Label = q.Labels[0]
	}
	if len(q.Labels) == 1 {
		q.Labels = nil // Label says it all (AllLabels)
	}
	if name := h.Get("Upstash-Queue-Name"); name != "" {
		if err := validQueue(name); err != nil {
			return nil, badRequest("Upstash-Queue-Name", "Upstash-Queue-Name: a queue's name is 1 to 128 of letters, digits, _ . : and -")
		}
		q.Queue = name
	}
	if v := h.Get("Upstash-Redact-Fields"); v != "" {
		f, err := redactFields(v)
		if err != nil {
			return nil, err
		}
		q.Redact = f
	}
	if q.RetryDelay != "" {
		if _, err := delayexpr.Compile(q.RetryDelay); err != nil {
			return nil, badRequest("Upstash-Retry-Delay", "Upstash-Retry-Delay "+strconv.Quote(q.RetryDelay)+": "+err.Error())
		}
	}
	if cb := q.FailureCallback; cb != "" {
		// The rules of callbackUrl: absolute http(s), a host, no
		// user:password, at most 2048 characters.
		if _, err := egress.ValidateURL(cb); err != nil {
			return nil, badRequest("Upstash-Failure-Callback", "Upstash-Failure-Callback "+err.Error())
		}
	}
	return q, nil
}

// FlowControl is what Upstash-Flow-Control-Key and -Value ask for.
type FlowControl struct {
	Key         string
	Parallelism int
	Rate        int
	Period      time.Duration
}

// flowControl parses "parallelism=2, rate=10, period=1m" for key.
func flowControl(key, value string) (FlowControl, error) {
	fc := FlowControl{Key: key, Period: time.Second}
	if key == "" {
		return fc, badRequest("Upstash-Flow-Control-Key", "Upstash-Flow-Control-Value needs an Upstash-Flow-Control-Key")
	}
	if strings.TrimSpace(value) == "" {
		return fc, badRequest("Upstash-Flow-Control-Value", "Upstash-Flow-Control-Value must set parallelism or rate, like \"parallelism=2, rate=10, period=1m\"")
	}
	for _, part := range strings.Split(value, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fc, badRequest("Upstash-Flow-Control-Value", "Upstash-Flow-Control-Value: "+strconv.Quote(part)+" is not name=value")
		}
		var err error
		switch strings.TrimSpace(name) {
		case "parallelism":
			fc.Parallelism, err = strconv.Atoi(strings.TrimSpace(v))
			if fc.Parallelism < 1 {
				err = errors.New("below 1")
			}
		case "rate":
			fc.Rate, err = strconv.Atoi(strings.TrimSpace(v))
			if fc.Rate < 1 {
				err = errors.New("below 1")
			}
		case "period":
			fc.Period, err = duration(v)
			if err == nil && fc.Period < time.Second {
				err = errors.New("below 1s")
			}
		default:
			err = errors.New("unknown setting (parallelism, rate, period)")
		}
		if err != nil {
			return fc, badRequest("Upstash-Flow-Control-Value", "Upstash-Flow-Control-Value: "+strconv.Quote(strings.TrimSpace(part))+": "+err.Error())
		}
	}
	return fc, nil
}

// dedupKey is the Idempotency-Key a publish maps to: its deduplication id,
// or a hash of its content with content-based deduplication.
func dedupKey(h http.Header, dest string, body []byte) string {
	if id := h.Get("Upstash-Deduplication-Id"); id != "" {
		return "qstash:" + id
	}
	if strings.EqualFold(h.Get("Upstash-Content-Based-Deduplication"), "true") {
		sum := sha256.New()
		sum.Write([]byte(dest + "\n"))
		var names []string
		for k := range h {
			if strings.HasPrefix(strings.ToLower(k), "upstash-forward-") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			sum.Write([]byte(k + ":" + strings.Join(h[k], ",") + "\n"))
		}
		sum.Write(body)
		return "qstash-content:" + hex.EncodeToString(sum.Sum(nil))
	}
	return ""
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
	now := q.API.Now()
	sub, extra, err := submission(h, dest, body)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(sub)
	r, err := submit.Parse(raw, now)
	if err != nil {
		return nil, err
	}
	r.Dialect, r.QStash = record.DialectQStash, extra
	if extra.Queue != "" {
		if err := q.ensureQueue(c, handlers.TenantOf(c), extra.Queue); err != nil {
			return nil, err
		}
	}
	replay, err := q.API.Accept(c, r, dedupKey(h, dest, body), raw, now)
	if err != nil {
		return nil, err
	}
	if replay != nil {
		return &Published{MessageID: replay.ID, URL: dest, Deduplicated: true}, nil
	}
	if err := q.queued(c, r); err != nil {
		// Accepted: its first admission puts it in line at its place.
		q.API.Log.Warn("could not put a message in its queue's line now", "requestId", r.ID, "err", err)
	}
	return &Published{MessageID: r.ID, URL: dest}, nil
}

// batchItem is one message of POST /v2/batch.
type batchItem struct {
	Destination string            `json:"destination"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
	Queue       string            `json:"queue"` // a queue's name: its messages keep its order
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
		q.fail(c, badRequest("", "batch must be a JSON array of {destination, headers, body}"))
		return
	}
	if len(items) == 0 || len(items) > MaxBatch {
		q.fail(c, badRequest("", "a batch holds 1 to 100 messages"))
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
			res, err = q.publishGroup(c, it.Destination, h, []byte(it.Body)) // a list for this item
		} else {
			res, err = q.publishOne(c, it.Destination, h, []byte(it.Body))
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
}

// notFound is QStash's answer for a message id it does not know.
func notFound(id string) error {
	return handlers.Errorf(handlers.CodeNotFound, "", "message "+strconv.Quote(id)+" not found")
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
	if fc := r.FlowControl; fc != nil {
		m.Parallelism, m.Rate, m.Period = fc.Parallelism, fc.Rate, fc.PeriodMs/1000
	}
	return m
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

// MaxLabels bounds a message's labels.
const MaxLabels = 20

// redactFields reads Upstash-Redact-Fields: "body", "header" (every
// header) and "header[Name]", comma-separated.
func redactFields(v string) (*record.RedactFields, error) {
	f := &record.RedactFields{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "body":
			f.Body = true
		case part == "header":
			f.AllHeaders = true
		case strings.HasPrefix(part, "header[") && strings.HasSuffix(part, "]") && len(part) > len("header[]"):
			f.Headers = append(f.Headers, part[len("header["):len(part)-1])
		default:
			return nil, badRequest("Upstash-Redact-Fields", "Upstash-Redact-Fields: "+strconv.Quote(part)+
				" is not body, header or header[Name]")
		}
	}
	return f, nil
}

// RedactHeaders masks the headers f hides.
func RedactHeaders(h map[string][]string, f *record.RedactFields) map[string][]string {
	for k := range h {
		if f.Header(k) {
			h[k] = []string{redact.Mask}
		}
	}
	return h
}
