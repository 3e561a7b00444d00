package qstash

// Ending and canceling workflow runs: one (DELETE /v2/workflows/runs/{id},
// the SDK's last step or a cancel), or many (DELETE /v2/workflows/runs,
// by ids or by filter).

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
)

// cancelRuns cancels the runs ?workflowRunIds names (repeated or
// comma-separated), or those its filters select (cancelRunsWhere),
// answering how many there were.
func (q *API) cancelRuns(c *gin.Context) {
	var ids []string
	for _, v := range c.QueryArray("workflowRunIds") {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 && len(c.Request.URL.Query()) > 0 && !c.Request.URL.Query().Has("workflowRunIds") {
		q.cancelRunsWhere(c)
		return
	}
	if len(ids) == 0 || len(ids) > MaxBatch {
		q.fail(c, badRequest("workflowRunIds", "name 1 to 100 runs to cancel in workflowRunIds, or select them with "+
			strings.Join(cancelParams, ", ")+" (count alone: every run)"))
		return
	}
	n := 0
	for _, id := range ids {
		if err := names.WorkflowRun.Check("workflowRunIds", id); err != nil {
			q.fail(c, err)
			return
		}
	}
	for _, id := range ids {
		ok, err := q.finishRun(c, id, true, nil)
		if err != nil {
			q.fail(c, err)
			return
		}
		if ok {
			n++
		}
	}
	c.JSON(http.StatusOK, gin.H{"cancelled": n})
}

// cancelParams are what a cancel of the runs a filter selects takes.
var cancelParams = []string{"workflowUrl", "workflowUrlExactMatch", "fromDate", "toDate", "count", "cursor"}

// cancelRunsWhere cancels up to count running runs the query selects,
// newest first: those at workflowUrl (a prefix, unless
// workflowUrlExactMatch=true) started between fromDate and toDate; with
// count alone, every run. It answers how many, and the cursor to go on
// from.
func (q *API) cancelRunsWhere(c *gin.Context) {
	query := c.Request.URL.Query()
	for k, v := range query {
		if !slices.Contains(cancelParams, k) {
			q.fail(c, badRequest(k, "a cancel of workflow runs takes workflowRunIds, or "+strings.Join(cancelParams, ", ")+"; not "+names.Quote(k)))
			return
		}
		if len(v) > 1 {
			q.fail(c, badRequest(k, k+" is given once: cancel the runs of each URL in a call of its own"))
			return
		}
	}
	exact := false
	switch v := query.Get("workflowUrlExactMatch"); v {
	case "true":
		if query.Get("workflowUrl") == "" {
			q.fail(c, badRequest("workflowUrlExactMatch", "workflowUrlExactMatch=true needs the workflowUrl to match"))
			return
		}
		exact = true
	case "false", "":
	default:
		q.fail(c, badRequest("workflowUrlExactMatch", "workflowUrlExactMatch must be true or false"))
		return
	}
	// The logs' reading of dates, count and cursor.
	f, err := logFilterOf(url.Values{"fromDate": query["fromDate"], "toDate": query["toDate"], "cursor": query["cursor"]})
	if err != nil {
		q.fail(c, err)
		return
	}
	count := 100
	if v := query.Get("count"); v != "" {
		if count, err = strconv.Atoi(v); err != nil || count < 1 || count > handlers.MaxBulkLimit {
			q.fail(c, badRequest("count", "count is 1 to "+strconv.Itoa(handlers.MaxBulkLimit)))
			return
		}
	}
	prefix := query.Get("workflowUrl")
	ctx, t := c.Request.Context(), handlers.TenantOf(c)
	cancelled, cursor := 0, f.cursor
	for scanned := 0; cancelled < count && scanned < maxRunsScanned; {
		page, err := q.Workflows.List(ctx, t, cursor, min(count-cancelled, maxRunLogs), f.from, f.to, false)
		if errors.Is(err, workflow.ErrBadCursor) {
			err = badRequest("cursor", err.Error())
		}
		if err == nil {
			for _, h := range page.Runs {
				if h.State != "" || (exact && h.URL != prefix) || !strings.HasPrefix(h.URL, prefix) {
					continue
				}
				var ok bool
				if ok, err = q.finishRun(c, h.ID, true, nil); err != nil {
					break
				}
				if ok {
					cancelled++
				}
			}
		}
		if q.stoppedEmpty(c, err, cancelled) {
			return
		}
		if err != nil {
			// Stopped with some canceled: the cursor goes on from this
			// page (the runs canceled are no longer selected).
			if cursor == "" {
				cursor = strconv.FormatInt(q.API.Now().UnixMilli()+1, 10)
			}
			break
		}
		scanned += len(page.Runs)
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	c.JSON(http.StatusOK, withCursor(gin.H{"cancelled": cancelled}, cursor))
}

// finishRun ends the caller's run id (closeRun).
func (q *API) finishRun(c *gin.Context, id string, cancelRun bool, result []byte) (bool, error) {
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		return false, err
	}
	return q.closeRun(c.Request.Context(), scope, handlers.TenantOf(c), id, cancelRun, result, true)
}

// closeRun ends run id of tenant t and, when canceled, cancels its
// messages not yet delivered (in scope). With tell, a run another invoked
// returns its result (or its cancel) to it first, so a failure to return
// leaves the run to end again. ok is false when there was no such run.
func (q *API) closeRun(ctx context.Context, scope tenant.Scope, t, id string, cancelRun bool, result []byte, tell bool) (bool, error) {
	if tell {
		if err := q.returnResult(ctx, t, id, invoke.Outcome{Body: result, Canceled: cancelRun}); err != nil {
			return false, err
		}
	}
	end := workflow.Ending{State: workflow.EndedSuccess, Result: result, At: q.API.Now()}
	if cancelRun {
		end.State = workflow.EndedCanceled
	}
	msgs, ok, err := q.Workflows.End(ctx, t, id, end)
	if err != nil || !ok || !cancelRun {
		return ok, err
	}
	for _, m := range msgs {
		err := q.API.Cancel(ctx, scope, m, RetryActor)
		if err != nil && !errors.Is(err, record.ErrNotFound) && !errors.Is(err, record.ErrConflict) {
			return true, err
		}
	}
	return true, nil
}
