// Package dashboard puts asynqmon in front of operators as a view of
// retryd, not of asynq's internals:
//
//   - rows show the request (method, host and path, redacted; attempt n of
//     max; the last answer; the status), through asynqmon's own
//     PayloadFormatter and ResultFormatter;
//   - the actions that change a request go through retryd: Run on a failed
//     request is an audited redrive (within REDRIVE_LIMIT), Delete on a
//     request waiting for its next attempt cancels it for good; actions
//     that would strand a request (archiving its task, "all" actions) are
//     refused with a message;
//   - asynqmon's UI shows no error when an action fails, so every page gets
//     a small script that shows the message of a refused action.
package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/tasks"
)

// Records reads requests for the rows.
type Records interface {
	Get(ctx context.Context, id string) (*record.Request, error)
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
	return Summary(r)
}

// FormatResult shows the request's outcome.
func (f Row) FormatResult(_ string, result []byte) string {
	return string(result)
}

// Summary is one line about a request: its status, attempt n of max,
// method, host and path (redacted), and the last answer.
func Summary(r *record.Request) string {
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
	// Short and the destination early: asynqmon cuts a long payload at the
	// column's width.
	s := fmt.Sprintf("%s · attempt %d/%d · %s %s · %s", r.Status, r.AttemptCount, r.MaxRetries+1, r.Method, target, last)
	if r.WaitingFor != "" && !r.Status.Terminal() {
		s += " · waiting for " + r.WaitingFor
	}
	if r.RedriveCount > 0 {
		s += fmt.Sprintf(" · redriven %d", r.RedriveCount)
	}
	return s
}

// Dashboard serves asynqmon (UI) with retryd's actions in front of it.
type Dashboard struct {
	UI      http.Handler // asynqmon
	Root    string       // where it is mounted, e.g. /monitoring
	Actions Actions
	Log     *slog.Logger
}

// Routes mounts the dashboard under Root.
func (d *Dashboard) Routes(r gin.IRouter) {
	r.Any(d.Root, d.serve)
	r.Any(d.Root+"/*any", d.serve)
}

var (
	// POST .../queues/{q}/archived_tasks/{id}:run
	runOne = regexp.MustCompile(`^/api/queues/[^/]+/archived_tasks/([^/:]+):run$`)
	// DELETE .../queues/{q}/{pending|scheduled|retry}_tasks/{id}
	deleteOne = regexp.MustCompile(`^/api/queues/[^/]+/(?:pending|scheduled|retry)_tasks/([^/:]+)$`)
	// POST .../archived_tasks:batch_run and .../{state}_tasks:batch_delete
	batchRun    = regexp.MustCompile(`^/api/queues/[^/]+/archived_tasks:batch_run$`)
	batchDelete = regexp.MustCompile(`^/api/queues/[^/]+/(?:pending|scheduled|retry)_tasks:batch_delete$`)
	// What would strand a request or act on all of them at once.
	refused = regexp.MustCompile(`^/api/queues/[^/]+/(?:(?:pending|scheduled|retry)_tasks(?:/[^/]+:archive|:archive_all|:batch_archive|:delete_all)|archived_tasks:run_all|retry_tasks(?:/[^/]+:run|:run_all|:batch_run)|scheduled_tasks(?:/[^/]+:run|:run_all|:batch_run))$`)
)

func (d *Dashboard) serve(c *gin.Context) {
	path := strings.TrimPrefix(c.Request.URL.Path, d.Root)
	method := c.Request.Method
	switch {
	case method == http.MethodPost && runOne.MatchString(path):
		d.one(c, runOne.FindStringSubmatch(path)[1], d.redrive)
	case method == http.MethodDelete && deleteOne.MatchString(path):
		d.one(c, deleteOne.FindStringSubmatch(path)[1], d.Actions.Cancel)
	case method == http.MethodPost && batchRun.MatchString(path):
		d.batch(c, d.redrive, "pending_ids", "error_ids")
	case method == http.MethodPost && batchDelete.MatchString(path):
		d.batch(c, d.Actions.Cancel, "deleted_ids", "failed_ids")
	case method != http.MethodGet && refused.MatchString(path):
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": handlers.Errorf(handlers.CodeConflict, "",
			"not from the dashboard: this would move retryd's tasks behind its back. Use retryctl (dlq redrive --all, cancel) or the API")})
	case method == http.MethodGet && !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/static/"):
		d.page(c)
	default:
		d.UI.ServeHTTP(c.Writer, c.Request)
	}
}

func (d *Dashboard) redrive(ctx context.Context, id string) error {
	return d.Actions.Redrive(ctx, id, Actor, "run from the dashboard")
}

// one applies act to a request task; callback tasks go to asynqmon.
func (d *Dashboard) one(c *gin.Context, id string, act func(context.Context, string) error) {
	if strings.HasPrefix(id, "callback:") {
		d.UI.ServeHTTP(c.Writer, c.Request)
		return
	}
	if err := act(c.Request.Context(), id); err != nil {
		handlers.Abort(c, d.Log, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// batch applies act to each task id of a batch, answering in asynqmon's
// shape (ok ids, failed ids).
func (d *Dashboard) batch(c *gin.Context, act func(context.Context, string) error, okName, failedName string) {
	var req struct {
		TaskIDs []string `json:"task_ids"`
	}
	if err := json.NewDecoder(io.LimitReader(c.Request.Body, 1<<20)).Decode(&req); err != nil {
		handlers.Abort(c, d.Log, handlers.Errorf(handlers.CodeInvalid, "task_ids", "body must be {\"task_ids\": [...]}"))
		return
	}
	ok, failed := []string{}, []string{}
	var last error
	for _, id := range req.TaskIDs {
		if err := act(c.Request.Context(), id); err != nil {
			failed, last = append(failed, id), err
			continue
		}
		ok = append(ok, id)
	}
	if len(ok) == 0 && last != nil {
		handlers.Abort(c, d.Log, last)
		return
	}
	c.JSON(http.StatusOK, gin.H{okName: ok, failedName: failed})
}

// page serves asynqmon's page with the script that shows refused actions.
func (d *Dashboard) page(c *gin.Context) {
	rec := httptest.NewRecorder()
	d.UI.ServeHTTP(rec, c.Request)
	body := rec.Body.Bytes()
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		body = bytes.Replace(body, []byte("</head>"), []byte("<script>"+errorScript+"</script></head>"), 1)
	}
	for k, v := range rec.Header() {
		if k != "Content-Length" {
			c.Writer.Header()[k] = v
		}
	}
	c.Data(rec.Code, rec.Header().Get("Content-Type"), body)
}

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
