package qstash

// GET /v2/workflows/events: the workflow logs (the SDKs' client.logs),
// one entry per run, newest first: its state, its steps as its log holds
// them, and what is still to come.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
)

// A run's states, as the logs name them.
const (
	runStarted  = "RUN_STARTED"
	runSuccess  = "RUN_SUCCESS"
	runFailed   = "RUN_FAILED"
	runCanceled = "RUN_CANCELED"
)

// Limits of one call of the logs.
const (
	defaultRunLogs = 10
	maxRunLogs     = 100
	// maxRunsScanned bounds the runs one call reads to fill a page when
	// a filter keeps few of them; the cursor continues after them.
	maxRunsScanned = 1000
	// runLogsPage is how many runs (and logs) one read takes.
	runLogsPage = 10
)

// runLog is one run in the logs, as the SDKs' WorkflowRunLog.
type runLog struct {
	WorkflowRunID          string      `json:"workflowRunId"`
	WorkflowURL            string      `json:"workflowUrl"`
	WorkflowState          string      `json:"workflowState"`
	WorkflowRunCreatedAt   int64       `json:"workflowRunCreatedAt"`
	WorkflowRunCompletedAt int64       `json:"workflowRunCompletedAt,omitempty"`
	Steps                  []stepGroup `json:"steps"`
	WorkflowRunResponse    *string     `json:"workflowRunResponse,omitempty"`
	Invoker                *runInvoker `json:"invoker,omitempty"`
	DLQID                  string      `json:"dlqId,omitempty"`
}

type runInvoker struct {
	WorkflowRunID        string `json:"workflowRunId"`
	WorkflowURL          string `json:"workflowUrl"`
	WorkflowRunCreatedAt int64  `json:"workflowRunCreatedAt"`
}

// stepGroup is steps run one after another ("sequential", one), side by
// side ("parallel"), or still to come ("next").
type stepGroup struct {
	Steps []map[string]any `json:"steps"`
	Type  string           `json:"type"`
}

// logParams are the logs' query parameters; any other is refused.
var logParams = []string{"groupBy", "cursor", "count", "workflowRunId", "workflowUrl", "state", "fromDate", "toDate"}

// logFilter is what a call of the logs asks for.
type logFilter struct {
	run, url, state string
	from, to        int64
	count           int
	cursor          string
}

// logFilterOf reads the logs' query q.
func logFilterOf(q url.Values) (logFilter, error) {
	f := logFilter{count: defaultRunLogs}
	for k := range q {
		if !slices.Contains(logParams, k) {
			return f, badRequest(k, "the workflow logs take "+strings.Join(logParams, ", ")+"; not "+names.Quote(k))
		}
	}
	if g := q.Get("groupBy"); g != "" && g != "workflowRunId" {
		return f, badRequest("groupBy", "the workflow logs are grouped by workflowRunId only")
	}
	f.run, f.url, f.cursor = q.Get("workflowRunId"), q.Get("workflowUrl"), q.Get("cursor")
	if f.run != "" {
		if err := names.WorkflowRun.Check("workflowRunId", f.run); err != nil {
			return f, err
		}
	}
	switch f.state = q.Get("state"); f.state {
	case "", runStarted, runSuccess, runFailed, runCanceled:
	default:
		return f, badRequest("state", "state is one of RUN_STARTED, RUN_SUCCESS, RUN_FAILED and RUN_CANCELED")
	}
	for _, p := range []struct {
		name string
		to   *int64
	}{{"fromDate", &f.from}, {"toDate", &f.to}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return f, badRequest(p.name, p.name+" is a Unix time in milliseconds")
			}
			*p.to = n
		}
	}
	if v := q.Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRunLogs {
			return f, badRequest("count", "count is 1 to "+strconv.Itoa(maxRunLogs))
		}
		f.count = n
	}
	return f, nil
}

// workflowLogs serves GET /v2/workflows/events.
func (q *API) workflowLogs(c *gin.Context) {
	f, err := logFilterOf(c.Request.URL.Query())
	if err != nil {
		q.fail(c, err)
		return
	}
	ctx, t := c.Request.Context(), handlers.TenantOf(c)
	runs := []runLog{}
	kept := 0 // about how many bytes runs holds: its logs and results
	keep := func(h workflow.History) error {
		if f.url != "" && h.URL != f.url {
			return nil
		}
		l, err := q.runLogOf(c, h)
		if err != nil || (f.state != "" && l.WorkflowState != f.state) {
			return err
		}
		runs = append(runs, l)
		kept += len(h.Result)
		for _, e := range h.Entries {
			kept += len(e.Body)
		}
		return nil
	}
	cursor := ""
	if f.run != "" {
		// One run: no listing.
		h, err := q.Workflows.Get(ctx, t, f.run)
		if err == nil && h.ID != "" && (f.from == 0 || h.CreatedAt.UnixMilli() >= f.from) && (f.to == 0 || h.CreatedAt.UnixMilli() <= f.to) {
			err = keep(h)
		}
		if err != nil {
			q.fail(c, err)
			return
		}
	} else {
		cursor = f.cursor
		for scanned := 0; len(runs) < f.count && scanned < maxRunsScanned && kept < record.ListBudget; {
			// Pages of a few runs: a run's log may be megabytes, and the
			// answer stops past the budget.
			page, err := q.Workflows.List(ctx, t, cursor, min(f.count-len(runs), runLogsPage), f.from, f.to, true)
			if errors.Is(err, workflow.ErrBadCursor) {
				q.fail(c, badRequest("cursor", err.Error()))
				return
			}
			if err != nil {
				q.fail(c, err)
				return
			}
			for _, h := range page.Runs {
				if err := keep(h); err != nil {
					q.fail(c, err)
					return
				}
			}
			scanned += len(page.Runs)
			if cursor = page.Cursor; cursor == "" {
				break
			}
		}
	}
	out := gin.H{"runs": runs}
	if cursor != "" {
		out["cursor"] = cursor
	}
	c.JSON(http.StatusOK, out)
}

// runLogOf is run h as the logs show it: its steps from its log, and for
// a running run its messages still to come (read from their records: one
// of them failed for good is the run's failure, in the DLQ).
func (q *API) runLogOf(c *gin.Context, h workflow.History) (runLog, error) {
	l := runLog{WorkflowRunID: h.ID, WorkflowURL: redact.URL(h.URL), WorkflowState: runStarted,
		WorkflowRunCreatedAt: h.CreatedAt.UnixMilli(), Steps: stepsOf(h)}
	switch h.State {
	case workflow.EndedSuccess:
		l.WorkflowState = runSuccess
	case workflow.EndedCanceled:
		l.WorkflowState = runCanceled
	}
	if !h.CompletedAt.IsZero() {
		l.WorkflowRunCompletedAt = h.CompletedAt.UnixMilli()
	}
	if h.Result != nil {
		s := string(h.Result)
		l.WorkflowRunResponse = &s
	}
	var inv invoke.Invoker
	if h.Invoker != nil && json.Unmarshal(h.Invoker, &inv) == nil {
		l.Invoker = &runInvoker{WorkflowRunID: inv.Run, WorkflowURL: redact.URL(inv.URL), WorkflowRunCreatedAt: inv.CreatedAt}
	}
	if h.State != "" {
		return l, nil
	}
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		return l, err
	}
	next := stepGroup{Type: "next"}
	for _, id := range h.Messages {
		r, err := q.API.Store.GetIn(c.Request.Context(), scope, id)
		if errors.Is(err, record.ErrNotFound) {
			continue
		}
		if err != nil {
			return l, err
		}
		var state string
		switch r.Status {
		case record.Pending:
			state = "STEP_PROGRESS"
		case record.Retrying:
			state = "STEP_RETRY"
		case record.Failed:
			state = "STEP_FAILED"
			l.WorkflowState, l.DLQID = runFailed, r.ID
		default:
			continue
		}
		next.Steps = append(next.Steps, map[string]any{"messageId": r.ID, "state": state, "retries": r.MaxRetries, "errors": stepErrors(r)})
	}
	if len(next.Steps) > 0 {
		l.Steps = append(l.Steps, next)
	}
	return l, nil
}

// stepErrors are r's failed attempts, as the logs show a step's errors.
func stepErrors(r *record.Request) []map[string]any {
	out := []map[string]any{}
	for _, a := range r.Attempts {
		if a.Outcome == "success" {
			continue
		}
		e := map[string]any{"error": a.Error, "status": a.StatusCode, "headers": map[string][]string{}, "time": a.StartedAt.UnixMilli()}
		if a.ResponseBody != nil {
			e["body"] = *a.ResponseBody
		}
		out = append(out, e)
	}
	return out
}

// stepsOf is h's log as step groups: its start ("Initial"), then each
// step's result, side by side where the steps ran in parallel. A parallel
// step's plan (step id 0) is how the SDK schedules it, not a step.
func stepsOf(h workflow.History) []stepGroup {
	groups := []stepGroup{}
	parallel := -1 // the group of the parallel steps being collected
	seen := map[float64]bool{}
	for i, e := range h.Entries {
		body, _ := base64.StdEncoding.DecodeString(e.Body)
		created := h.CreatedAt.UnixMilli()
		if at, ok := ids.Time(e.MessageID); ok {
			created = at.UnixMilli()
		}
		step := map[string]any{}
		if i == 0 {
			step = map[string]any{"stepId": 0, "stepName": "init", "stepType": "Initial", "out": string(body), "concurrent": 1}
		} else if json.Unmarshal(body, &step) != nil || step["stepId"] == nil || step["stepId"] == float64(0) {
			continue
		}
		if id, _ := step["stepId"].(float64); i > 0 {
			// A step delivered twice (at least once) shows once.
			if seen[id] {
				continue
			}
			seen[id] = true
		}
		step["messageId"], step["callType"], step["state"], step["createdAt"] = e.MessageID, workflow.CallStep, "STEP_SUCCESS", created
		step["headers"] = map[string][]string{}
		if n, _ := step["concurrent"].(float64); n > 1 {
			if parallel < 0 || len(groups[parallel].Steps) >= int(n) {
				groups = append(groups, stepGroup{Type: "parallel"})
				parallel = len(groups) - 1
			}
			groups[parallel].Steps = append(groups[parallel].Steps, step)
			continue
		}
		parallel = -1
		groups = append(groups, stepGroup{Type: "sequential", Steps: []map[string]any{step}})
	}
	return groups
}
