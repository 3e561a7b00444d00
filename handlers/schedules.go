package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/robfig/cron/v3"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/scheduler"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

// ScheduleStore is the record store as the schedule routes use it.
type ScheduleStore interface {
	CreateSchedule(ctx context.Context, sc *record.Schedule) error
	GetScheduleIn(ctx context.Context, scope tenant.Scope, id string) (*record.Schedule, error)
	ListSchedules(ctx context.Context, scope tenant.Scope, cursor string, limit int) ([]*record.Schedule, string, error)
	DeleteSchedule(ctx context.Context, scope tenant.Scope, id string) error
	SetPaused(ctx context.Context, id string, paused bool, next time.Time) error
	CountSchedules(ctx context.Context, tenant string) (int64, error)
	ScheduleByAlias(ctx context.Context, tenant, alias string) (string, error)
}

// Schedules serves recurring requests.
type Schedules struct {
	Store ScheduleStore
	API   *API // destination checks, logging, the clock
	// Limit caps how many schedules may exist (0: no cap).
	Limit int
}

// Routes registers the schedule routes.
func (s *Schedules) Routes(r gin.IRouter) {
	r.POST("/schedules", s.create)
	r.GET("/schedules", s.list)
	r.GET("/schedules/:id", s.get)
	r.DELETE("/schedules/:id", s.delete)
	r.POST("/schedules/:id/pause", s.pause)
	r.POST("/schedules/:id/resume", s.resume)
}

// scheduleFields are the members of a schedule's body.
var scheduleFields = []string{"cron", "timezone", "request", "catchUp"}

// ScheduleDocument is the API's view of a schedule.
type ScheduleDocument struct {
	ID            string         `json:"id"`
	Tenant        string         `json:"tenant"`
	Cron          string         `json:"cron"`
	Timezone      string         `json:"timezone"`
	CatchUp       string         `json:"catchUp"`
	Paused        bool           `json:"paused"`
	Request       map[string]any `json:"request"`
	NextFireTimes []string       `json:"nextFireTimes"`
	LastFires     []FireDocument `json:"lastFires"`
	CreatedAt     *string        `json:"createdAt"`
}

// FireDocument is one tick and the request it made.
type FireDocument struct {
	FireTime  string `json:"fireTime"`
	RequestID string `json:"requestId"`
}

func (s *Schedules) document(sc *record.Schedule) ScheduleDocument {
	d := ScheduleDocument{ID: sc.ID, Tenant: sc.Tenant, Cron: sc.Cron, Timezone: sc.Timezone, CatchUp: sc.CatchUp, Paused: sc.Paused,
		NextFireTimes: []string{}, LastFires: []FireDocument{}}
	if sc.Timezone == "" {
		d.Timezone = "UTC"
	}
	_ = json.Unmarshal(sc.Request, &d.Request)
	// A schedule's request is redacted the way a request's document is.
	if h, ok := d.Request["headers"].(map[string]any); ok {
		for k, v := range h {
			if val, _ := v.(string); redact.HeaderValue(k, val) {
				h[k] = redact.Mask
			}
		}
	}
	for _, f := range []string{"url", "callbackUrl"} {
		if u, ok := d.Request[f].(string); ok {
			d.Request[f] = redact.URL(u)
		}
	}
	if t := sc.CreatedAt; !t.IsZero() {
		v := t.UTC().Format(apidoc.TimeLayout)
		d.CreatedAt = &v
	}
	if spec, err := scheduler.Parse(sc.Cron, sc.Timezone); err == nil && !sc.Paused {
		t := sc.NextFireAt
		for i := 0; i < 5 && !t.IsZero(); i++ {
			d.NextFireTimes = append(d.NextFireTimes, t.UTC().Format(apidoc.TimeLayout))
			t = spec.Next(t)
		}
	}
	for _, f := range sc.Fires {
		d.LastFires = append(d.LastFires, FireDocument{FireTime: f.FireTime.UTC().Format(apidoc.TimeLayout), RequestID: f.RequestID})
	}
	return d
}

func (s *Schedules) create(c *gin.Context) {
	raw, err := io.ReadAll(io.LimitReader(c.Request.Body, submit.MaxBytes+1))
	if err != nil || len(raw) > submit.MaxBytes {
		Abort(c, s.API.Log, tooLarge())
		return
	}
	var body struct {
		Cron     string          `json:"cron"`
		Timezone string          `json:"timezone"`
		Request  json.RawMessage `json:"request"`
		CatchUp  string          `json:"catchUp"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		Abort(c, s.API.Log, Errorf(CodeInvalid, "", "body must be a JSON object like {\"cron\": \"*/5 * * * *\", \"request\": {\"url\": \"https://…\"}}"))
		return
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(raw, &members)
	for name := range members {
		if !slices.Contains(scheduleFields, name) {
			Abort(c, s.API.Log, Errorf(CodeInvalid, names.Short(name), fmt.Sprintf("unknown field %s; a schedule has only %s", names.Quote(name), strings.Join(scheduleFields, ", "))))
			return
		}
	}
	if _, err := cronSpec(body.Cron, body.Timezone); err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	switch body.CatchUp {
	case "":
		body.CatchUp = scheduler.CatchUpNone
	case scheduler.CatchUpNone, scheduler.CatchUpLast:
	default:
		Abort(c, s.API.Log, Errorf(CodeInvalid, "catchUp", `catchUp must be "none" or "last"`))
		return
	}
	if len(body.Request) == 0 {
		Abort(c, s.API.Log, Errorf(CodeInvalid, "request", "request is required: the request each tick makes, as for POST /requests"))
		return
	}
	sc := &record.Schedule{Cron: body.Cron, Timezone: body.Timezone, CatchUp: body.CatchUp, Request: body.Request}
	if err := s.Save(c, sc, false); err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	s.API.Log.Info("schedule created", "scheduleId", sc.ID, "cron", sc.Cron, "timezone", sc.Timezone)
	c.Header("Location", "/schedules/"+sc.ID)
	c.JSON(http.StatusCreated, s.document(sc))
}

// cronSpec parses a schedule's cron in its time zone, or says which of
// the two is wrong.
func cronSpec(expr, timezone string) (cron.Schedule, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, Errorf(CodeInvalid, "cron", "cron is required: 5 fields (\"*/5 * * * *\") or a descriptor (\"@hourly\", \"@every 30s\")")
	}
	spec, err := scheduler.Parse(expr, timezone)
	if err != nil {
		field := "cron"
		if strings.Contains(err.Error(), "time zone") && !strings.Contains(err.Error(), "timezone field") {
			field = "timezone"
		}
		return nil, Errorf(CodeInvalid, field, field+" is invalid: "+err.Error())
	}
	// A day the calendar never has (31 February, 31 April) parses but
	// never fires: a schedule that would silently do nothing.
	if spec.Next(neverCheckFrom).IsZero() {
		return nil, Errorf(CodeInvalid, "cron", "cron "+strconv.Quote(expr)+" never fires: no date matches its day and month")
	}
	return spec, nil
}

// neverCheckFrom is where the search for a cron's first fire starts: a
// fixed time keeps the check pure, and robfig/cron searches five years
// from it, which hold every date that exists (29 February 2024 included).
var neverCheckFrom = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// Save checks schedule sc (its cron, time zone and request, a submission)
// and stores it: as a new schedule with a new id unless sc.ID is set, or
// over the schedule of that id when replace is true (QStash's upsert).
// Only new schedules count against SCHEDULE_LIMIT.
func (s *Schedules) Save(c *gin.Context, sc *record.Schedule, replace bool) error {
	spec, err := cronSpec(sc.Cron, sc.Timezone)
	if err != nil {
		return err
	}
	now := s.API.Now()
	r, err := submit.Parse(sc.Request, now)
	if err != nil {
		var se *submit.Error
		if errors.As(err, &se) {
			field := "request"
			if se.Field != "" {
				field += "." + se.Field
			}
			return Errorf(CodeInvalid, field, "request: "+se.Message)
		}
		return err
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(sc.Request, &fields)
	for _, f := range []string{"delayMs", "notBefore"} {
		if _, ok := fields[f]; ok {
			return Errorf(CodeInvalid, "request."+f, "request."+f+" is not allowed in a schedule: each tick is the request's time")
		}
	}
	if sc.QStash != nil {
		r.QStash = &sc.QStash.Message
	}
	if err := s.API.checkDestinations(c, r, "request."); err != nil {
		return err
	}
	sc.Tenant = TenantOf(c)
	if err := s.API.checkCredentials(c.Request.Context(), r, sc.Tenant, "request."); err != nil {
		return err
	}
	if s.Limit > 0 && !replace {
		n, err := s.Store.CountSchedules(c.Request.Context(), sc.Tenant)
		if err != nil {
			return err
		}
		if n >= int64(s.Limit) {
			// A count limit is a conflict, as QUEUE_LIMIT's and the topics'
			// are: waiting does not lift it, deleting one does.
			return Errorf(CodeConflict, "", fmt.Sprintf("schedule limit reached: this tenant has %d schedules (SCHEDULE_LIMIT); delete one first", n))
		}
	}
	if sc.ID == "" {
		sc.ID = s.API.newID(now, "")
	}
	if sc.CreatedAt.IsZero() {
		sc.CreatedAt = now
	}
	sc.NextFireAt = spec.Next(now)
	return s.Store.CreateSchedule(c.Request.Context(), sc)
}

func (s *Schedules) list(c *gin.Context) {
	limit, cursor, err := pageParams(c)
	var scope tenant.Scope
	if err == nil {
		scope, err = ScopeOf(c)
	}
	if err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	scs, next, err := s.Store.ListSchedules(c.Request.Context(), scope, cursor, limit)
	if err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	data := make([]ScheduleDocument, len(scs))
	for i, sc := range scs {
		data[i] = s.document(sc)
	}
	c.JSON(http.StatusOK, gin.H{"data": data, "nextCursor": nullable(next)})
}

func (s *Schedules) load(c *gin.Context) (*record.Schedule, bool) {
	id := c.Param("id")
	if err := names.ScheduleID.Check("id", id); err != nil {
		Abort(c, s.API.Log, err)
		return nil, false
	}
	if !ids.Valid(id) {
		Abort(c, s.API.Log, Errorf(CodeNotFound, "", "no schedule with this id"))
		return nil, false
	}
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, s.API.Log, err)
		return nil, false
	}
	sc, err := s.Store.GetScheduleIn(c.Request.Context(), scope, id)
	if err != nil {
		if errors.Is(err, record.ErrNotFound) {
			err = Errorf(CodeNotFound, "", "no schedule with this id")
		}
		Abort(c, s.API.Log, err)
		return nil, false
	}
	return sc, true
}

func (s *Schedules) get(c *gin.Context) {
	if sc, ok := s.load(c); ok {
		c.JSON(http.StatusOK, s.document(sc))
	}
}

func (s *Schedules) delete(c *gin.Context) {
	sc, ok := s.load(c)
	if !ok {
		return
	}
	if err := s.Store.DeleteSchedule(c.Request.Context(), tenant.Only(sc.Tenant), sc.ID); err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	s.API.Log.Info("schedule deleted", "scheduleId", sc.ID)
	c.JSON(http.StatusOK, s.document(sc))
}

func (s *Schedules) pause(c *gin.Context)  { s.setPaused(c, true) }
func (s *Schedules) resume(c *gin.Context) { s.setPaused(c, false) }

// SetPaused pauses schedule sc, or resumes it from the next tick after
// now: a paused schedule does not replay what it missed.
func (s *Schedules) SetPaused(ctx context.Context, sc *record.Schedule, paused bool) error {
	spec, err := scheduler.Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return err
	}
	return s.Store.SetPaused(ctx, sc.ID, paused, spec.Next(s.API.Now()))
}

func (s *Schedules) setPaused(c *gin.Context, paused bool) {
	sc, ok := s.load(c)
	if !ok {
		return
	}
	if err := s.SetPaused(c.Request.Context(), sc, paused); err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	sc, err := s.Store.GetScheduleIn(c.Request.Context(), tenant.Only(sc.Tenant), sc.ID)
	if err != nil {
		Abort(c, s.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, s.document(sc))
}
