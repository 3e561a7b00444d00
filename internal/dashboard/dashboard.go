// Package dashboard puts asynqmon in front of operators as a view of
// retryd, not of asynq's internals:
//
//   - the first numbers on every page are requests by status, as the API
//     lists them; asynq's own counters (processed, failed, error rate)
//     count attempts, and say so;
//   - rows show the request (method, host and path, redacted; its attempt
//     numbers in the words the API and retryctl use; the last answer; the
//     status; why and until when it waits), through asynqmon's own
//     PayloadFormatter and ResultFormatter;
//   - a task's times and budget are retryd's: the next attempt's due time
//     (to the millisecond; none while an event, not a time, starts it),
//     the request's timeout, the attempts of its run against its budget,
//     where asynqmon would show asynq's safety net and its own counts;
//   - the actions that change a request go through retryd, decided on the
//     request's real state whatever list the route names: Run on a failed
//     request is an audited redrive (within REDRIVE_LIMIT), Delete or
//     Cancel of a request still due (waiting or in flight) is retryd's
//     cancel, final and audited (actor dashboard); actions that would
//     strand a request (archiving its task, Run of one not failed, "all"
//     actions) are refused with a message;
//   - asynqmon's UI shows no error when an action fails, so every page gets
//     a small script that shows the message of a refused action.
package dashboard

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/client"
	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/tasks"
)

// Records reads requests for the rows.
type Records interface {
	Get(ctx context.Context, id string) (*record.Request, error)
}

// Counter counts every tenant's requests by status, as GET /requests lists
// them.
type Counter interface {
	CountByStatus(ctx context.Context, scope tenant.Scope) (map[record.Status]int64, error)
}

// Actions are retryd's own redrive and cancel.
type Actions interface {
	Redrive(ctx context.Context, id, actor, reason string) error
	Cancel(ctx context.Context, id string) error
}

// Actor is the actor recorded on redrives made from the dashboard.
const Actor = tasks.DashboardActor

// Row formats a task's payload (a request id) as the request it stands
// for. It implements asynqmon's PayloadFormatter and ResultFormatter.
type Row struct {
	Records Records
	Now     func() time.Time
}

// FormatPayload shows the request behind a delivery or callback task.
func (f Row) FormatPayload(taskType string, payload []byte) string {
	id := string(payload)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := f.Records.Get(ctx, id)
	if err != nil {
		return fmt.Sprintf("request %s (%v)", id, err)
	}
	if taskType == tasks.TypeCallback {
		st := "waiting"
		if r.Callback != nil {
			st = r.Callback.Status
		}
		return fmt.Sprintf("callback of %s %s · %s", r.Status, id, st)
	}
	return Summary(r, f.Now())
}

// FormatResult shows the request's outcome.
func (f Row) FormatResult(_ string, result []byte) string {
	return string(result)
}

// Summary is one line about a request: its status, why and until when it
// waits (client.Waiting), its attempt numbers (client.Counts, as retryctl
// shows them), method, host and path (redacted), and the last answer.
func Summary(r *record.Request, now time.Time) string {
	last := "no answer yet"
	switch {
	case r.LastStatusCode != 0:
		last = fmt.Sprintf("last %d", r.LastStatusCode)
	case r.FailureClass != "":
		last = "last " + r.FailureClass
	}
	target := redact.URL(r.URL)
	if i := strings.Index(target, "://"); i >= 0 {
		target = target[i+3:]
	}
	// What matters first: asynqmon cuts a long payload at the column's
	// width, so why a request waits comes right after its status.
	s := string(r.Status)
	if r.WaitingFor != "" && !r.Status.Terminal() {
		s += " · " + client.Waiting(r.WaitingFor, startsAt(r, now))
	}
	s += fmt.Sprintf(" · %s · %s %s · %s", client.Counts(r.AttemptCount, r.BudgetUsed, r.MaxRetries, r.RedriveCount), r.Method, target, last)
	switch {
	case r.Expunged && r.ExpungedBy == record.RetentionActor:
		s += " · payload expired (payload retention)"
	case r.Expunged:
		s += " · payload expunged"
	}
	if r.Credential != "" {
		s += " · credential " + r.Credential
	}
	if r.Proxy != "" {
		s += " · proxy " + r.Proxy
	}
	if r.Tenant != "" && r.Tenant != tenant.Default {
		s += " · tenant " + r.Tenant // the dashboard is an admin's: every tenant's rows
	}
	return s
}

// startsAt is when retryd starts r (apidoc.NextStart), nil when no time is
// known.
func startsAt(r *record.Request, now time.Time) *time.Time {
	at := apidoc.NextStart(r, now)
	if at.IsZero() {
		return nil
	}
	return &at
}

// Dashboard serves asynqmon (UI) with retryd's actions in front of it.
type Dashboard struct {
	UI      http.Handler // asynqmon
	Root    string       // where it is mounted, e.g. /monitoring
	Records Records      // the requests' real state, which decides actions
	Counter Counter      // the headline: requests by status
	// Endpoints reads the breakers of the endpoints not closed, for the
	// headline; nil shows none.
	Endpoints func(ctx context.Context) ([]flow.EndpointInfo, error)
	Actions   Actions
	Log       *slog.Logger
	Now       func() time.Time
	// API serves the API routes retryd's own pages call (resend, expunge,
	// the schedules): the engine the dashboard is mounted on.
	API http.Handler
}

// countsPath (under Root) answers the requests by status that every page
// shows first.
const countsPath = "/retryd/requests"

// Routes mounts the dashboard under Root.
func (d *Dashboard) Routes(r gin.IRouter) {
	r.Any(d.Root, d.serve)
	r.Any(d.Root+"/*any", d.serve)
}

var (
	// An action on one task: DELETE .../{state}_tasks/{id}, POST
	// .../{state}_tasks/{id}:{run|archive|cancel}.
	oneTask = regexp.MustCompile(`^/api/queues/[^/]+/(?:groups/[^/]+/)?\w+_tasks/([^/:]+)(?::(\w+))?$`)
	// An action on several: POST .../{state}_tasks:batch_{run|delete|
	// archive|cancel}, and the "all" actions (:run_all, :delete_all, …).
	manyTasks = regexp.MustCompile(`^/api/queues/[^/]+/(?:groups/[^/]+/)?\w+_tasks:(\w+)$`)
)

// The answer names of asynqmon's batch actions: ok ids, failed ids.
var batchNames = map[string][2]string{
	"run": {"pending_ids", "error_ids"}, "delete": {"deleted_ids", "failed_ids"},
	"archive": {"archived_ids", "error_ids"}, "cancel": {"canceled_ids", "error_ids"},
}

func (d *Dashboard) serve(c *gin.Context) {
	path := strings.TrimPrefix(c.Request.URL.Path, d.Root)
	method := c.Request.Method
	if d.ownPage(c, path) {
		return
	}
	switch {
	case method == http.MethodGet && path == countsPath:
		d.counts(c)
	case method == http.MethodGet && !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/static/"):
		d.page(c)
	case method == http.MethodGet && strings.HasPrefix(path, "/api/"):
		d.proxy(c, path)
	case method == http.MethodGet || method == http.MethodHead:
		d.UI.ServeHTTP(c.Writer, c.Request)
	case oneTask.MatchString(path):
		m := oneTask.FindStringSubmatch(path)
		action := m[2]
		if action == "" && method == http.MethodDelete {
			action = "delete"
		}
		d.one(c, m[1], action)
	case manyTasks.MatchString(path):
		action := manyTasks.FindStringSubmatch(path)[1]
		if name, ok := strings.CutPrefix(action, "batch_"); ok && method == http.MethodPost {
			if _, known := batchNames[name]; known {
				d.batch(c, name)
				return
			}
		}
		refuse(c, "not from the dashboard: an \"all\" action would move every request's task behind retryd's back. "+
			"Use retryctl (dlq redrive --all, which has a dry run) or the API")
	default:
		// Queue-level actions (pause, resume, delete queue) and the rest.
		d.proxy(c, path)
	}
}

// notFound is how asynq's errors say a queue or a task does not exist;
// asynqmon answers them 500, as if the dashboard were broken.
var notFound = regexp.MustCompile(`(?i)not found|does not exist`)

// proxy has asynqmon serve a call of its API (path, under Root),
// answering 404 for what does not exist where asynqmon would answer 500.
func (d *Dashboard) proxy(c *gin.Context, path string) {
	if path == "/api/metrics" {
		// asynqmon's charts ask a Prometheus server, and retryd gives it
		// none (retryd's own figures are at /metrics): asking would fail.
		handlers.Abort(c, d.Log, handlers.Errorf(handlers.CodeNotFound, "", "the dashboard has no metrics charts: no Prometheus server is "+
			"configured for it; retryd's metrics are at /metrics"))
		return
	}
	rec := httptest.NewRecorder()
	d.UI.ServeHTTP(rec, c.Request)
	if rec.Code == http.StatusInternalServerError && notFound.Match(rec.Body.Bytes()) {
		handlers.Abort(c, d.Log, handlers.Errorf(handlers.CodeNotFound, "", strings.TrimSpace(rec.Body.String())))
		return
	}
	body := rec.Body.Bytes()
	if c.Request.Method == http.MethodGet && rec.Code == http.StatusOK && taskRoute.MatchString(path) {
		body = d.retrydTimes(c.Request.Context(), body)
	}
	for k, v := range rec.Header() {
		if k != "Content-Length" {
			c.Writer.Header()[k] = v
		}
	}
	c.Writer.WriteHeader(rec.Code)
	_, _ = c.Writer.Write(body)
}

// taskRoute is asynqmon's view of one task or of a list of them.
var taskRoute = regexp.MustCompile(`^/api/queues/[^/]+/(?:tasks/[^/]+|(?:groups/[^/]+/)?\w+_tasks)$`)

// retrydTimes rewrites asynqmon's task JSON (one task, or {"tasks": [...]})
// so that each request's task shows retryd's numbers, not asynq's: the
// next attempt's time (none while an event starts it; asynq's is a safety
// net), the request's timeout (asynq's adds a margin), and the attempts of
// the run against its budget (asynq's retry count grows with
// interruptions and redrives). Anything it cannot read is left as it was.
func (d *Dashboard) retrydTimes(ctx context.Context, body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil {
		return body
	}
	var list []any
	if ts, ok := doc["tasks"].([]any); ok {
		list = ts
	} else if _, ok := doc["id"]; ok {
		list = []any{doc}
	}
	for _, t := range list {
		task, ok := t.(map[string]any)
		if !ok {
			continue
		}
		id, _ := task["id"].(string)
		r, err := d.record(ctx, id)
		if err != nil || r == nil {
			continue
		}
		retrydTask(task, r, d.Now())
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// retrydTask sets task's times and counts to request r's as of now.
func retrydTask(task map[string]any, r *record.Request, now time.Time) {
	if _, ok := task["next_process_at"]; ok {
		next := ""
		if at := apidoc.NextStart(r, now); !at.IsZero() {
			next = at.UTC().Format(apidoc.TimeLayout)
		}
		task["next_process_at"] = next
	}
	if _, ok := task["timeout_seconds"]; ok {
		task["timeout_seconds"] = (r.TimeoutMs + 999) / 1000
	}
	if _, ok := task["retried"]; ok {
		task["retried"] = r.BudgetUsed
	}
	if _, ok := task["max_retry"]; ok {
		task["max_retry"] = r.MaxRetries + 1
	}
}

// counts answers every tenant's requests by status.
func (d *Dashboard) counts(c *gin.Context) {
	n, err := d.Counter.CountByStatus(c.Request.Context(), tenant.All)
	if err != nil {
		handlers.Abort(c, d.Log, err)
		return
	}
	out := make(gin.H, len(record.Statuses)+1)
	for _, st := range record.Statuses {
		out[string(st)] = n[st]
	}
	held := []heldEndpoint{}
	if d.Endpoints != nil {
		infos, err := d.Endpoints(c.Request.Context())
		if err != nil {
			// The counts still answer; the headline says the endpoints
			// are unknown rather than showing none.
			d.Log.Warn("dashboard could not read the open endpoints", "err", err)
			out["endpointsError"] = "could not read the open endpoints"
		}
		for _, in := range infos {
			if in.State == flow.EndpointClosed {
				continue
			}
			owner, ep := tenant.Split(in.Name)
			if owner == tenant.Default {
				owner = "" // as rows name only other tenants
			}
			h := heldEndpoint{Endpoint: ep, Tenant: owner, State: in.State, Waiting: in.Waiting, OpenedBy: in.By}
			if !in.NextProbe.IsZero() {
				h.NextProbe = in.NextProbe.UTC().Format("2006-01-02T15:04:05Z07:00")
			}
			held = append(held, h)
		}
	}
	out["endpoints"] = held
	c.JSON(http.StatusOK, out)
}

// heldEndpoint is an endpoint that is not closed, as the headline shows
// it: why its requests wait, and when the next probe goes.
type heldEndpoint struct {
	Endpoint string `json:"endpoint"`
	Tenant   string `json:"tenant"` // "" for the default tenant
	State    string `json:"state"`
	Waiting  int64  `json:"waiting"`
	// NextProbe is none when no probe is planned: an operator opened it
	// (OpenedBy "operator"), or nobody waits.
	NextProbe string `json:"nextProbe,omitempty"`
	OpenedBy  string `json:"openedBy,omitempty"`
}

func refuse(c *gin.Context, msg string) {
	c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": handlers.Errorf(handlers.CodeConflict, "", msg)})
}

// verdict is what the dashboard does with an action on a task.
type verdict int

const (
	forward verdict = iota // let asynqmon do it: it cannot touch a live request
	redrive                // retryd's audited redrive
	cancel                 // retryd's cancel (final, audited)
	refused                // neither: it would strand or mislead
)

// decide turns an action on a task into what is done, from the request's
// real state (nil: no record), never from the state the route names: a
// route of the archived list can name any task.
func decide(action string, r *record.Request) (verdict, string) {
	if r == nil {
		return forward, ""
	}
	live := !r.Status.Terminal()
	switch action {
	case "run":
		if r.Status == record.Failed {
			return redrive, ""
		}
		return refused, fmt.Sprintf("only a failed request can be run again from the dashboard; this one is %s", r.Status)
	case "delete", "cancel":
		if live {
			return cancel, ""
		}
		if action == "cancel" {
			return refused, fmt.Sprintf("the request is %s already", r.Status)
		}
		return forward, "" // a finished request's task; its record stays
	case "archive":
		if live {
			return refused, "archiving would strand a request that is still due: cancel it instead"
		}
		return forward, ""
	}
	return refused, fmt.Sprintf("the dashboard action %q is not one retryd knows", action)
}

// record is the request behind task id, nil when it has none (a callback
// task, or a record gone).
func (d *Dashboard) record(ctx context.Context, id string) (*record.Request, error) {
	if strings.HasPrefix(id, "callback:") {
		return nil, nil
	}
	r, err := d.Records.Get(ctx, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, nil
	}
	return r, err
}

// act does what v says to request id; forward is the caller's.
func (d *Dashboard) act(ctx context.Context, v verdict, id, why string) error {
	switch v {
	case redrive:
		return d.Actions.Redrive(ctx, id, Actor, "run from the dashboard")
	case cancel:
		return d.Actions.Cancel(ctx, id)
	case refused:
		return handlers.Errorf(handlers.CodeConflict, "", why)
	}
	return nil
}

// one applies an action to one task.
func (d *Dashboard) one(c *gin.Context, id, action string) {
	ctx := c.Request.Context()
	r, err := d.record(ctx, id)
	if err != nil {
		handlers.Abort(c, d.Log, err)
		return
	}
	v, why := decide(action, r)
	if v == forward {
		d.proxy(c, "")
		return
	}
	if err := d.act(ctx, v, id, why); err != nil {
		handlers.Abort(c, d.Log, err)
		return
	}
	if v == cancel && action == "cancel" {
		// The record is canceled for good; asynqmon's cancel then stops
		// the call in flight (what it records is dropped: the request
		// stays canceled).
		rec := httptest.NewRecorder()
		d.UI.ServeHTTP(rec, c.Request)
	}
	c.Status(http.StatusNoContent)
}

// batch applies an action to each task of a batch, each decided on its
// request's real state, answering in asynqmon's shape (ok ids, failed ids).
func (d *Dashboard) batch(c *gin.Context, action string) {
	var req struct {
		TaskIDs []string `json:"task_ids"`
	}
	if err := json.NewDecoder(io.LimitReader(c.Request.Body, 1<<20)).Decode(&req); err != nil {
		handlers.Abort(c, d.Log, handlers.Errorf(handlers.CodeInvalid, "task_ids", "body must be {\"task_ids\": [...]}"))
		return
	}
	ctx := c.Request.Context()
	ok, failed := []string{}, []string{}
	var last error
	var toUI []string // asynqmon's to do: forwarded, or canceled active tasks to stop
	for _, id := range req.TaskIDs {
		r, err := d.record(ctx, id)
		v, why := decide(action, r)
		if err == nil && v == forward {
			toUI = append(toUI, id)
			continue
		}
		if err == nil {
			err = d.act(ctx, v, id, why)
		}
		if err != nil {
			failed, last = append(failed, id), err
			continue
		}
		ok = append(ok, id)
		if v == cancel && action == "cancel" {
			toUI = append(toUI, id)
		}
	}
	names := batchNames[action]
	if len(toUI) > 0 {
		uiOK, uiFailed := d.forwardBatch(c, toUI, names)
		for _, id := range toUI {
			if slices.Contains(uiFailed, id) && !slices.Contains(ok, id) {
				failed = append(failed, id)
			} else if slices.Contains(uiOK, id) && !slices.Contains(ok, id) {
				ok = append(ok, id)
			}
		}
	}
	if len(ok) == 0 && last != nil {
		handlers.Abort(c, d.Log, last)
		return
	}
	c.JSON(http.StatusOK, gin.H{names[0]: ok, names[1]: failed})
}

// forwardBatch has asynqmon apply the batch action of c's route to ids
// only, and returns its ok and failed ids.
func (d *Dashboard) forwardBatch(c *gin.Context, ids []string, names [2]string) (ok, failed []string) {
	body, _ := json.Marshal(map[string][]string{"task_ids": ids})
	req := c.Request.Clone(c.Request.Context())
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	rec := httptest.NewRecorder()
	d.UI.ServeHTTP(rec, req)
	var out map[string][]string
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		return nil, ids
	}
	return out[names[0]], out[names[1]]
}

// page serves asynqmon's page with the script that shows refused actions.
func (d *Dashboard) page(c *gin.Context) {
	rec := httptest.NewRecorder()
	d.UI.ServeHTTP(rec, c.Request)
	body := rec.Body.Bytes()
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		script := strings.NewReplacer("{{COUNTS}}", d.Root+countsPath, "{{ROOT}}", d.Root).Replace(truthScript)
		body = bytes.Replace(body, []byte("</head>"), []byte("<script>"+errorScript+"</script><script>"+script+"</script></head>"), 1)
	}
	for k, v := range rec.Header() {
		if k != "Content-Length" {
			c.Writer.Header()[k] = v
		}
	}
	c.Data(rec.Code, rec.Header().Get("Content-Type"), body)
}

// truthScript relabels asynq's counters as attempts and puts the requests
// by status first on every page ({{COUNTS}}: where they are read).
//
//go:embed truth.js
var truthScript string

// errorScript shows the message of any refused dashboard action (asynqmon
// itself shows nothing when one fails).
const errorScript = `(function () {
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (m, u) { this._retryd = { m: String(m).toUpperCase(), u: u }; return open.apply(this, arguments); };
  XMLHttpRequest.prototype.send = function () {
    var x = this;
    x.addEventListener("loadend", function () {
      if (!x._retryd || x._retryd.m === "GET" || x.status < 400) return;
      var msg = x.responseText;
      try { var j = JSON.parse(msg); msg = (j.error && (j.error.message || j.error)) || msg; } catch (e) {}
      show(msg || ("HTTP " + x.status));
    });
    return send.apply(this, arguments);
  };
  function show(msg) {
    var d = document.getElementById("retryd-error");
    if (!d) {
      d = document.createElement("div");
      d.id = "retryd-error";
      d.setAttribute("role", "alert");
      d.style.cssText = "position:fixed;top:72px;left:50%;transform:translateX(-50%);z-index:99999;background:#b71c1c;color:#fff;" +
        "padding:12px 20px;border-radius:4px;font:14px sans-serif;box-shadow:0 2px 8px rgba(0,0,0,.4);max-width:80vw";
      document.body.appendChild(d);
    }
    d.textContent = "retryd refused this action: " + msg;
    d.style.display = "block";
    clearTimeout(d._t);
    d._t = setTimeout(function () { d.style.display = "none"; }, 15000);
  }
})();`
