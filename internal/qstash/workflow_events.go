package qstash

// waitForEvent and notify of Upstash Workflow: a run's step waits for an
// event (POST /v2/wait/{eventId}); a notify delivers the event's data to
// each waiting run as its step's result, and the wait's timeout delivers
// the step timed out. Both results are ordinary messages of the run.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/workflow"
)

// DefaultWaitTimeout is how long a run waits for an event when the SDK
// names no timeout.
const DefaultWaitTimeout = 7 * 24 * time.Hour

// waitRequest is the body of POST /v2/wait/{eventId}.
type waitRequest struct {
	URL            string              `json:"url"`
	Timeout        json.RawMessage     `json:"timeout"`
	TimeoutURL     string              `json:"timeoutUrl"`
	TimeoutHeaders map[string][]string `json:"timeoutHeaders"`
	Step           json.RawMessage     `json:"step"`
}

// eventID is the :eventId of a route, checked.
func eventID(c *gin.Context) (string, error) {
	id := c.Param("eventId")
	if id == "" {
		return "", badRequest("eventId", "an event id is 1 to 256 bytes")
	}
	if err := names.EventID.Check("event id", id); err != nil {
		return "", err
	}
	return id, nil
}

// waitTimeout reads the wait's timeout: a duration ("30s", "7d") or a
// number of seconds.
func waitTimeout(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return DefaultWaitTimeout, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, errors.New("must be a duration such as 30s, 1h or 7d")
		}
		s = n.String() + "s"
	}
	if d, err := duration(s); err == nil && d > 0 {
		return d, nil
	}
	if n, err := json.Number(s).Int64(); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	return 0, errors.New("must be a duration such as 30s, 1h or 7d")
}

// stepHeaders are the publish headers of a waiting step's result: the
// wait call's QStash headers (the run, its URL, the forwarded user
// headers, retries, the failure callback), without its delay.
func stepHeaders(h http.Header) http.Header {
	out := http.Header{}
	for name, v := range h {
		ck := http.CanonicalHeaderKey(name)
		switch {
		case ck == "Upstash-Delay", ck == "Upstash-Not-Before", ck == "Upstash-Deduplication-Id", ck == "Upstash-Content-Based-Deduplication":
		case strings.HasPrefix(ck, "Upstash-"), ck == "Content-Type":
			out[ck] = v
		}
	}
	out.Set("Upstash-Workflow-Init", "false")
	out.Set("Upstash-Workflow-CallType", workflow.CallStep)
	return out
}

// stepResult is the waiting step with what came of the wait.
func stepResult(step json.RawMessage, eventID string, data []byte, timedOut bool) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(step, &m); err != nil || m == nil {
		return nil, badRequest("step", "step must be the waiting step, a JSON object")
	}
	m["waitEventId"], m["waitTimeout"] = eventID, timedOut
	if !timedOut {
		m["out"] = base64.StdEncoding.EncodeToString(data)
	}
	return json.Marshal(m)
}

func (q *API) waitForEvent(c *gin.Context) {
	id, err := eventID(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	body, ok := q.readBody(c)
	if !ok {
		return
	}
	var w waitRequest
	if err := json.Unmarshal(body, &w); err != nil {
		q.fail(c, badRequest("", "a wait is a JSON object {url, timeout, step, timeoutUrl, timeoutHeaders}"))
		return
	}
	run := c.GetHeader("Upstash-Workflow-RunId")
	if run == "" {
		q.fail(c, badRequest("Upstash-Workflow-RunId", "a wait names its run in Upstash-Workflow-RunId"))
		return
	}
	if err := names.WorkflowRun.Check("Upstash-Workflow-RunId", run); err != nil {
		q.fail(c, err)
		return
	}
	timeout, err := waitTimeout(w.Timeout)
	if err != nil {
		q.fail(c, badRequest("timeout", "timeout "+err.Error()))
		return
	}
	if w.URL == "" {
		q.fail(c, badRequest("url", "a wait names the workflow's url"))
		return
	}
	if w.TimeoutURL == "" {
		w.TimeoutURL = w.URL
	}
	timedOut, err := stepResult(w.Step, id, nil, true)
	if err != nil {
		q.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	t := handlers.TenantOf(c)
	state, err := q.Workflows.Info(ctx, t, run)
	if err != nil {
		q.fail(c, err)
		return
	}
	if !state.Found {
		q.fail(c, workflowError(fmt.Errorf("workflow run %s: %w", run, workflow.ErrNoRun)))
		return
	}
	if w.URL != state.URL {
		// Where the event's data goes: the run's own URL, as its steps'.
		q.fail(c, workflowError(&workflow.URLConflictError{Run: run, URL: state.URL}))
		return
	}
	h := stepHeaders(c.Request.Header)
	h.Set("Upstash-Workflow-RunId", run)
	now := q.API.Now()
	waiter := workflow.Waiter{Run: run, URL: w.URL, Deadline: now.Add(timeout).UnixMilli(), TimeoutURL: w.TimeoutURL,
		Step: w.Step, Headers: h, TimeoutHeaders: w.TimeoutHeaders}
	if err := q.armTimeout(c, &waiter, timedOut, now); err != nil {
		q.fail(c, err)
		return
	}
	if err := q.Workflows.Wait(ctx, t, id, waiter, now); err != nil {
		q.cancelTimeout(c, waiter)
		if errors.Is(err, workflow.ErrTooManyWaiters) {
			err = handlers.Errorf(handlers.CodeConflict, "eventId", err.Error())
		}
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"messageId": waiter.TimeoutID})
}

// armTimeout publishes w's timeout, a message of its run due at its
// deadline (a notify before then cancels it), with the waiting step
// timed out as its body.
func (q *API) armTimeout(c *gin.Context, w *workflow.Waiter, timedOut []byte, now time.Time) error {
	th := http.Header(w.Headers).Clone()
	th.Set("Upstash-Delay", fmt.Sprintf("%dms", max(time.UnixMilli(w.Deadline).Sub(now).Milliseconds(), 0)))
	pub, err := q.publishOne(c, w.TimeoutURL, th, timedOut)
	if err != nil {
		return err
	}
	w.TimeoutID = pub.MessageID
	return nil
}

// cancelTimeout cancels w's timeout; it reports false when the timeout
// was delivered already (the wait timed out).
func (q *API) cancelTimeout(c *gin.Context, w workflow.Waiter) bool {
	scope, err := handlers.ScopeOf(c)
	if err == nil {
		err = q.API.Cancel(c.Request.Context(), scope, w.TimeoutID, RetryActor)
	}
	switch {
	case err == nil, errors.Is(err, record.ErrNotFound):
		return true
	case errors.Is(err, record.ErrConflict):
		return false
	}
	q.API.Log.Warn("could not cancel a wait's timeout", "run", w.Run, "timeout", w.TimeoutID, "err", err)
	return true
}

// waiterView is a waiter as the SDKs read it.
type waiterView struct {
	URL            string              `json:"url"`
	Deadline       int64               `json:"deadline"` // Unix seconds
	Headers        map[string][]string `json:"headers"`
	TimeoutURL     string              `json:"timeoutUrl,omitempty"`
	TimeoutHeaders map[string][]string `json:"timeoutHeaders,omitempty"`
}

// viewOf is w as a view shows it: secret headers masked, as in every view.
func viewOf(w workflow.Waiter) waiterView {
	return waiterView{URL: redact.URL(w.URL), Deadline: w.Deadline / 1000, Headers: masked(w.Headers),
		TimeoutURL: redact.URL(w.TimeoutURL), TimeoutHeaders: masked(w.TimeoutHeaders)}
}

func masked(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		m := make([]string, len(vs))
		for i, v := range vs {
			if m[i] = v; redact.HeaderValue(strings.TrimPrefix(http.CanonicalHeaderKey(k), "Upstash-Forward-"), v) {
				m[i] = redact.Mask
			}
		}
		out[k] = m
	}
	return out
}

// notified is one waiter's part of a notify's answer.
type notified struct {
	Waiter    waiterView `json:"waiter"`
	MessageID string     `json:"messageId"`
	Error     string     `json:"error"`
}

// notify hands the event's data to every run waiting for it (or to one
// run's wait). Nobody waiting is an empty list, as the SDKs expect: an
// event may come before its wait, and its sender learns that none heard
// it.
func (q *API) notify(c *gin.Context) {
	run := ""
	if second := c.Param("second"); second != "" {
		// /v2/notify/{runId}/{eventId}
		run = c.Param("eventId")
		c.Params = append(c.Params[:0:0], gin.Param{Key: "eventId", Value: second})
	}
	id, err := eventID(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	if run != "" {
		if err := names.WorkflowRun.Check("workflow run id", run); err != nil {
			q.fail(c, err)
			return
		}
	}
	data, err := io.ReadAll(io.LimitReader(c.Request.Body, submit.MaxBytes+1))
	if err != nil || len(data) > submit.MaxBytes {
		q.fail(c, handlers.Errorf(handlers.CodeTooLarge, "", "event data is larger than 256 KiB"))
		return
	}
	if _, err := handlers.ScopeOf(c); err != nil {
		q.fail(c, err)
		return
	}
	out, err := q.notifyWaiters(c, id, run, data)
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// notifyWaiters hands data to the caller's runs waiting for event id (or
// to run's wait, when run is not ""), and answers what came of each.
func (q *API) notifyWaiters(c *gin.Context, id, run string, data []byte) ([]notified, error) {
	// Once taken, the waiters are this call's to answer: a client gone
	// meanwhile must not leave them half done.
	c.Request = c.Request.WithContext(context.WithoutCancel(c.Request.Context()))
	ctx := c.Request.Context()
	t := handlers.TenantOf(c)
	now := q.API.Now()
	waiters, err := q.Workflows.Take(ctx, t, id, run, now)
	if err != nil {
		return nil, err
	}
	out := make([]notified, 0, len(waiters))
	for _, w := range waiters {
		n := notified{Waiter: viewOf(w)}
		if !q.cancelTimeout(c, w) {
			n.Error = "the wait timed out before the event came"
			out = append(out, n)
			continue
		}
		body, err := stepResult(w.Step, id, data, false)
		var pub *Published
		if err == nil {
			pub, err = q.publishOne(c, w.URL, http.Header(w.Headers), body)
		}
		if err != nil {
			n.Error = handlers.Resolve(c, q.API.Log, err).Message
			// The run still waits: its waiter and a timeout go back.
			if timedOut, terr := stepResult(w.Step, id, nil, true); terr == nil {
				if terr = q.armTimeout(c, &w, timedOut, now); terr == nil {
					terr = q.Workflows.Wait(ctx, t, id, w, now)
				}
				if terr != nil {
					q.API.Log.Error("a run waiting for an event lost its wait", "run", w.Run, "event", id, "err", terr)
				}
			}
		} else {
			n.MessageID = pub.MessageID
		}
		out = append(out, n)
	}
	return out, nil
}

func (q *API) waiters(c *gin.Context) {
	id, err := eventID(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	ws, err := q.Workflows.Waiters(c.Request.Context(), handlers.TenantOf(c), id, q.API.Now())
	if err != nil {
		q.fail(c, err)
		return
	}
	out := make([]waiterView, 0, len(ws))
	for _, w := range ws {
		out = append(out, viewOf(w))
	}
	c.JSON(http.StatusOK, out)
}
