package qstash

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// filter is what a bulk call (messages.cancel, dlq.deleteMany, dlq.retry)
// or dlq.listMessages selects by: each parameter may repeat (a message
// matches any of its values) and parameters combine with AND. A bulk call
// with no ids and no filter selects everything (QStash's {all: true}).
type filter struct {
	values   map[string][]string
	from, to int64 // createdAt bounds, ms; 0 = open
}

// filterParams are the filter parameters retryd understands. Messages
// have no topic, queue or caller IP here, so those match nothing.
var filterParams = []string{"url", "host", "path", "label", "flowControlKey", "scheduleId", "responseStatus", "topicName", "urlGroup", "queueName", "callerIp"}

// pageOf reads the count (default 100, at most max) and cursor of a
// paged list call.
func pageOf(c *gin.Context, max int) (count int, cursor string, err error) {
	count = 100
	if v := c.Query("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return 0, "", badRequest("count", "count must be between 1 and "+strconv.Itoa(max))
		}
		count = n
	}
	cursor = c.Query("cursor")
	if cursor != "" && !ids.Valid(cursor) {
		return 0, "", badRequest("cursor", "cursor is not one this API returned")
	}
	return count, cursor, nil
}

func filterOf(c *gin.Context) (filter, error) {
	f := filter{values: map[string][]string{}}
	for _, p := range filterParams {
		if v := c.QueryArray(p); len(v) > 0 {
			f.values[p] = v
		}
	}
	for name, dst := range map[string]*int64{"fromDate": &f.from, "toDate": &f.to} {
		if v := c.Query(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return f, badRequest(name, name+" must be a Unix time in milliseconds")
			}
			*dst = n
		}
	}
	return f, nil
}

func (f filter) match(r *record.Request) bool {
	var q record.QStash
	if r.QStash != nil {
		q = *r.QStash
	}
	path := ""
	if u, err := url.Parse(r.URL); err == nil {
		path = u.Path
	}
	field := map[string]string{
		"url": r.URL, "host": r.Host, "path": path, "label": q.Label, "flowControlKey": q.FlowControlKey, "scheduleId": q.ScheduleID,
		"responseStatus": strconv.Itoa(r.LastStatusCode),
	}
	for p, want := range f.values {
		got, known := field[p]
		if !known || got == "" {
			return false
		}
		hit := false
		for _, w := range want {
			if w == got || (p != "url" && p != "path" && strings.EqualFold(w, got)) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	created := r.CreatedAt.UnixMilli()
	return (f.from == 0 || created >= f.from) && (f.to == 0 || created <= f.to)
}

// each calls fn on every request of status that f matches, reading the
// index page by page; fn's error stops the walk.
func (q *API) each(ctx context.Context, status record.Status, f filter, fn func(*record.Request) error) error {
	cursor := ""
	for {
		page, err := q.API.Store.List(ctx, status, cursor, 500)
		if err != nil {
			return err
		}
		for _, listed := range page.Requests {
			r, err := q.API.Store.Get(ctx, listed.ID)
			if err != nil {
				continue // finished and expired meanwhile
			}
			if r.Status == status && f.match(r) {
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}
