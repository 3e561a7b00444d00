package qstash

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/record"
	sel "github.com/retryd/retryd/internal/selection"
)

// What each /v2 call that selects messages accepts, as QStash's official
// clients send it. A call naming no id and no filter selects everything:
// that is how QStash's {all: true} arrives (count and cursor only).
var (
	// dlqFilters are the DLQ's filters (QStash's DLQ has no host or path).
	dlqFilters = []string{sel.MessageID, sel.URL, sel.Label, sel.FlowControlKey, sel.ScheduleID, sel.ResponseStatus,
		sel.FromDate, sel.ToDate, sel.TopicName, sel.URLGroup, sel.QueueName, sel.CallerIP}
	// messageFilters are those of messages.cancel.
	messageFilters = []string{sel.URL, sel.Host, sel.Path, sel.Label, sel.FlowControlKey, sel.ScheduleID,
		sel.FromDate, sel.ToDate, sel.TopicName, sel.URLGroup, sel.QueueName, sel.CallerIP}

	dlqList = sel.Route{IDs: "dlqIds", Filters: dlqFilters, Params: []string{"source", "workflowRunId"}, CountParam: "count", DefaultCount: 100, MaxCount: 500,
		Cursor: true, NothingIsAll: true}
	dlqBulk    = sel.Route{IDs: "dlqIds", Filters: dlqFilters, CountParam: "count", DefaultCount: 100, MaxCount: handlers.MaxBulkLimit, Cursor: true, NothingIsAll: true}
	cancelBulk = sel.Route{IDs: "messageIds", Filters: messageFilters, CountParam: "count", DefaultCount: 100, MaxCount: handlers.MaxBulkLimit, Cursor: true, NothingIsAll: true}
	eventsList = sel.Route{IDs: "messageIds", Filters: append([]string{sel.MessageID}, messageFilters...), Params: []string{"state"},
		CountParam: "count", DefaultCount: 100, MaxCount: MaxEvents, Cursor: true, CursorWithin: true, NothingIsAll: true}
)

// selection reads the selection of a call from its query and its JSON
// body (qstash-py sends {"messageIds": [...]} in a DELETE's body).
func selection(c *gin.Context, rt sel.Route) (sel.Selection, error) {
	var body []byte
	if c.Request.Body != nil && c.Request.Method != "GET" {
		b, err := io.ReadAll(io.LimitReader(c.Request.Body, 1<<20+1))
		if err != nil || len(b) > 1<<20 {
			return sel.Selection{}, handlers.Errorf(handlers.CodeTooLarge, "", "body is larger than 1 MiB")
		}
		body = b
	}
	return sel.Parse(rt, c.Request.URL.Query(), body)
}

// walk acts with fn on what s selects among the caller's requests of
// statuses (its tenant's, or an admin's every tenant's or the one s
// names), and returns the cursor to continue from; skip (nil for a list)
// hears of what was selected and not acted on. "All" calls cover the
// caller's tenant only.
func (q *API) walk(c *gin.Context, s sel.Selection, statuses []record.Status, fn func(*record.Request) error, skip sel.Skipper) (string, error) {
	ctx := c.Request.Context()
	scope, err := handlers.Scope(c, s.Tenant)
	if err != nil {
		return "", err
	}
	list := func(ctx context.Context, scan *record.Scan, cursor string, n int) (*record.Page, error) {
		return q.API.Store.ListIn(ctx, scope, statuses, cursor, n, scan)
	}
	get := func(ctx context.Context, id string) (*record.Request, error) {
		return q.API.Store.GetIn(ctx, scope, id)
	}
	keep := func(r *record.Request) error {
		if !slices.Contains(statuses, r.Status) {
			return handlers.Errorf(handlers.CodeConflict, "", fmt.Sprintf("message is %s; this call acts on %s ones", r.Status, joinStatuses(statuses)))
		}
		return nil
	}
	return s.Walk(ctx, list, get, keep, fn, skip)
}

func joinStatuses(statuses []record.Status) string {
	out := make([]string, len(statuses))
	for i, st := range statuses {
		out[i] = string(st)
	}
	return strings.Join(out, " or ")
}
