package qstash

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/scheduler"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

// A QStash schedule is a retryd schedule (it shows in GET /schedules and
// fires through retryd's scheduler) whose ticks are QStash messages. Its
// id is retryd's, or the one its client chose with Upstash-Schedule-Id,
// kept as an alias; creating a schedule under an existing alias replaces
// that schedule (QStash's upsert).

// aliasPattern is what a client-chosen schedule id may look like.
var aliasPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// ScheduleDoc is a schedule as schedules.get and list return it.
type ScheduleDoc struct {
	ScheduleID           string              `json:"scheduleId"`
	Cron                 string              `json:"cron"`
	CreatedAt            int64               `json:"createdAt"`
	Destination          string              `json:"destination"`
	Method               string              `json:"method"`
	Header               map[string][]string `json:"header"`
	Body                 string              `json:"body,omitempty"`
	Retries              int                 `json:"retries"`
	Delay                int64               `json:"delay,omitempty"` // seconds
	Callback             string              `json:"callback,omitempty"`
	FailureCallback      string              `json:"failureCallback,omitempty"`
	RetryDelayExpression string              `json:"retryDelayExpression,omitempty"`
	Label                string              `json:"label,omitempty"`
	Labels               []string            `json:"labels,omitempty"`
	QueueName            string              `json:"queueName,omitempty"`
	FlowControlKey       string              `json:"flowControlKey,omitempty"`
	Parallelism          int                 `json:"parallelism,omitempty"`
	Rate                 int                 `json:"rate,omitempty"`
	Period               int64               `json:"period,omitempty"` // seconds
	IsPaused             bool                `json:"isPaused"`
	NextScheduleTime     int64               `json:"nextScheduleTime,omitempty"`
	LastScheduleTime     int64               `json:"lastScheduleTime,omitempty"`
}

func scheduleDoc(sc *record.Schedule) ScheduleDoc {
	var sub struct {
		URL         string            `json:"url"`
		Method      string            `json:"method"`
		Headers     map[string]string `json:"headers"`
		Body        string            `json:"body"`
		MaxRetries  *int              `json:"maxRetries"`
		CallbackURL string            `json:"callbackUrl"`
		FlowControl *record.FlowControl
	}
	_ = json.Unmarshal(sc.Request, &sub)
	d := ScheduleDoc{ScheduleID: sc.ID, Cron: sc.Cron, CreatedAt: sc.CreatedAt.UnixMilli(), Destination: redact.URL(sub.URL),
		Method: sub.Method, Header: map[string][]string{}, Body: sub.Body, Retries: submit.DefaultMaxRetries,
		Callback: redact.URL(sub.CallbackURL), IsPaused: sc.Paused}
	if d.Method == "" {
		d.Method = http.MethodPost
	}
	if sub.MaxRetries != nil {
		d.Retries = *sub.MaxRetries
	}
	if fc := sub.FlowControl; fc != nil {
		d.Parallelism, d.Rate, d.Period = fc.Parallelism, fc.Rate, periodSeconds(fc)
	}
	for k, v := range redact.Headers(sub.Headers) {
		d.Header[k] = []string{v}
	}
	if q := sc.QStash; q != nil {
		if q.Alias != "" {
			d.ScheduleID = q.Alias
		}
		d.Delay = q.DelayMs / 1000
		d.FailureCallback = redact.URL(q.Message.FailureCallback)
		d.RetryDelayExpression, d.Label, d.FlowControlKey = q.Message.RetryDelay, q.Message.Label, q.Message.FlowControlKey
		d.Labels, d.QueueName = q.Message.AllLabels(), q.Message.Queue
		if f := q.Message.Redact; f != nil {
			d.Header = RedactHeaders(d.Header, f)
			if f.Body {
				d.Body = ""
			}
		}
	}
	if !sc.Paused && !sc.NextFireAt.IsZero() {
		d.NextScheduleTime = sc.NextFireAt.UnixMilli()
	}
	if len(sc.Fires) > 0 {
		d.LastScheduleTime = sc.Fires[0].FireTime.UnixMilli()
	}
	return d
}

// createSchedule serves POST /v2/schedules/<destination>.
func (q *API) createSchedule(c *gin.Context) {
	body, ok := q.readBody(c)
	if !ok {
		return
	}
	h := c.Request.Header
	dest := rawTail(c, "/v2/schedules/")
	sub, extra, err := submission(h, dest, body)
	if err != nil {
		q.fail(c, err)
		return
	}
	// Each tick is the message's time; Upstash-Delay delays every tick's
	// message instead.
	delayMs, _ := sub["delayMs"].(int64)
	delete(sub, "delayMs")
	delete(sub, "notBefore")
	raw, _ := json.Marshal(sub)
	sc := &record.Schedule{Cron: h.Get("Upstash-Cron"), CatchUp: scheduler.CatchUpNone, Request: raw,
		QStash: &record.ScheduleQStash{DelayMs: delayMs, Message: *extra}}
	if sc.Cron == "" {
		q.fail(c, badRequest("Upstash-Cron", "Upstash-Cron is required: a cron expression such as \"*/5 * * * *\""))
		return
	}
	replace := false
	if alias := h.Get("Upstash-Schedule-Id"); alias != "" {
		if !aliasPattern.MatchString(alias) {
			q.fail(c, badRequest("Upstash-Schedule-Id", "Upstash-Schedule-Id must be 1 to 128 letters, digits, or _ . : -"))
			return
		}
		sc.QStash.Alias = alias
		switch id, err := q.Schedules.Store.ScheduleByAlias(c.Request.Context(), handlers.TenantOf(c), alias); {
		case err == nil:
			prev, err := q.Schedules.Store.GetScheduleIn(c.Request.Context(), tenant.Only(handlers.TenantOf(c)), id)
			if err == nil {
				sc.ID, sc.CreatedAt, replace = id, prev.CreatedAt, true
				break
			}
			if !errors.Is(err, record.ErrNotFound) {
				q.fail(c, err)
				return
			}
			sc.ID = q.API.Parts.NewID(q.API.Now(), record.ScheduleAliasKey(alias))
		case errors.Is(err, record.ErrNotFound):
			sc.ID = q.API.Parts.NewID(q.API.Now(), record.ScheduleAliasKey(alias))
		default:
			q.fail(c, err)
			return
		}
	}
	// A schedule's queue is made as a publish to it would make it, within
	// QUEUE_LIMIT: otherwise its ticks would fill a queue past the limit.
	if extra.Queue != "" {
		if err := q.ensureQueue(c, handlers.TenantOf(c), extra.Queue); err != nil {
			q.fail(c, err)
			return
		}
	}
	if err := q.Schedules.Save(c, sc, replace); err != nil {
		q.fail(c, err)
		return
	}
	q.API.Log.Info("schedule created", "scheduleId", sc.ID, "alias", sc.QStash.Alias, "cron", sc.Cron, "api", "qstash", "replaced", replace)
	c.JSON(http.StatusCreated, gin.H{"scheduleId": scheduleDoc(sc).ScheduleID})
}

// loadSchedule finds the schedule a /v2 path names: by retryd's id or by
// the id its client chose.
func (q *API) loadSchedule(c *gin.Context) (*record.Schedule, bool) {
	name := c.Param("scheduleId")
	if err := names.ScheduleID.Check("scheduleId", name); err != nil {
		q.fail(c, err)
		return nil, false
	}
	ctx := c.Request.Context()
	notFound := handlers.Errorf(handlers.CodeNotFound, "", "schedule "+names.Quote(name)+" not found")
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		q.fail(c, err)
		return nil, false
	}
	if ids.Valid(name) {
		sc, err := q.Schedules.Store.GetScheduleIn(ctx, scope, name)
		if err == nil {
			return sc, true
		}
		if !errors.Is(err, record.ErrNotFound) {
			q.fail(c, err)
			return nil, false
		}
	}
	if !aliasPattern.MatchString(name) {
		q.fail(c, notFound)
		return nil, false
	}
	// Each tenant names its own schedules: an admin's alias is the
	// default tenant's unless it names a tenant.
	owner, ok := scope.One()
	if !ok {
		owner = handlers.TenantOf(c)
	}
	id, err := q.Schedules.Store.ScheduleByAlias(ctx, owner, name)
	if err == nil {
		var sc *record.Schedule
		if sc, err = q.Schedules.Store.GetScheduleIn(ctx, scope, id); err == nil {
			return sc, true
		}
	}
	if errors.Is(err, record.ErrNotFound) {
		err = notFound
	}
	q.fail(c, err)
	return nil, false
}

func (q *API) getSchedule(c *gin.Context) {
	if sc, ok := q.loadSchedule(c); ok {
		c.JSON(http.StatusOK, scheduleDoc(sc))
	}
}

// listSchedules answers every schedule, QStash's and retryd's own, as a
// bare array (QStash does not page schedules).
func (q *API) listSchedules(c *gin.Context) {
	out := []ScheduleDoc{}
	cursor := ""
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	for {
		page, next, err := q.Schedules.Store.ListSchedules(c.Request.Context(), scope, cursor, 500)
		if err != nil {
			q.fail(c, err)
			return
		}
		for _, sc := range page {
			out = append(out, scheduleDoc(sc))
		}
		if next == "" {
			break
		}
		cursor = next
	}
	c.JSON(http.StatusOK, out)
}

func (q *API) deleteSchedule(c *gin.Context) {
	sc, ok := q.loadSchedule(c)
	if !ok {
		return
	}
	if err := q.Schedules.Store.DeleteSchedule(c.Request.Context(), tenant.Only(sc.Tenant), sc.ID); err != nil && !errors.Is(err, record.ErrNotFound) {
		q.fail(c, err)
		return
	}
	q.API.Log.Info("schedule deleted", "scheduleId", sc.ID, "api", "qstash")
	c.Status(http.StatusOK)
}

func (q *API) pauseSchedule(c *gin.Context)  { q.setPaused(c, true) }
func (q *API) resumeSchedule(c *gin.Context) { q.setPaused(c, false) }

func (q *API) setPaused(c *gin.Context, paused bool) {
	sc, ok := q.loadSchedule(c)
	if !ok {
		return
	}
	if err := q.Schedules.SetPaused(c.Request.Context(), sc, paused); err != nil {
		q.fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}
