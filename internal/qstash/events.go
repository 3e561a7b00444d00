package qstash

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/retry"
	sel "github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// QStash's logs (GET /v2/events) are derived from retryd's records: each
// request's creation, attempts and end, newest first. Nothing extra is
// written per delivery to keep them.

// Event is one entry of the logs.
type Event struct {
	Time             int64    `json:"time"`
	State            string   `json:"state"`
	MessageID        string   `json:"messageId"`
	URL              string   `json:"url"`
	NextDeliveryTime int64    `json:"nextDeliveryTime,omitempty"`
	Error            string   `json:"error,omitempty"`
	ResponseStatus   int      `json:"responseStatus,omitempty"`
	Label            string   `json:"label,omitempty"`
	Labels           []string `json:"labels,omitempty"`
	// RetryDelayExpr is the message's Upstash-Retry-Delay (QStash's name
	// for it here differs from the message's retryDelayExpression).
	RetryDelayExpr string `json:"retryDelayExpr,omitempty"`
}

// The event states, QStash's names.
const (
	StateCreated   = "CREATED"
	StateError     = "ERROR"
	StateRetry     = "RETRY"
	StateDelivered = "DELIVERED"
	StateFailed    = "FAILED"
	StateCanceled  = "CANCELED"
)

// States are the states a logs call may filter on: QStash's, as its
// official client types them. Those retryd never records (ACTIVE,
// IN_PROGRESS) match no event; any other is refused, since a misspelt
// state once answered an empty list as if nothing had happened.
var States = []string{StateCreated, "ACTIVE", StateDelivered, StateError, StateRetry, StateFailed, StateCanceled, "IN_PROGRESS"}

// stateFilter reads the state filter of a logs call ("": none).
func stateFilter(s sel.Selection) (string, error) {
	state := s.Params["state"]
	if state == "" {
		return "", nil
	}
	if !slices.Contains(States, state) {
		return "", badRequest("state", "state "+strconv.Quote(state)+" is not one of "+strings.Join(States, ", "))
	}
	return state, nil
}

// eventsOf is request r's events, oldest first.
func eventsOf(r *record.Request) []Event {
	base := Event{MessageID: r.ID, URL: redact.URL(r.URL)}
	if r.QStash != nil {
		base.Label, base.Labels, base.RetryDelayExpr = r.QStash.Label, r.QStash.AllLabels(), r.QStash.RetryDelay
	}
	at := func(t time.Time, state string) Event {
		e := base
		e.Time, e.State = t.UnixMilli(), state
		return e
	}
	out := []Event{at(r.CreatedAt, StateCreated)}
	for i, a := range r.Attempts {
		end := a.StartedAt
		if a.DurationMs != nil {
			end = end.Add(time.Duration(*a.DurationMs) * time.Millisecond)
		}
		if a.Outcome == string(retry.Success) {
			e := at(end, StateDelivered)
			e.ResponseStatus = a.StatusCode
			out = append(out, e)
			continue
		}
		e := at(end, StateError)
		e.Error, e.ResponseStatus = a.Error, a.StatusCode
		out = append(out, e)
		if i < len(r.Attempts)-1 {
			retry := at(end, StateRetry)
			retry.NextDeliveryTime = r.Attempts[i+1].StartedAt.UnixMilli()
			out = append(out, retry)
		} else if r.Status == record.Retrying || r.Status == record.Pending {
			retry := at(end, StateRetry)
			retry.NextDeliveryTime = r.NextAttemptAt.UnixMilli()
			out = append(out, retry)
		}
	}
	switch r.Status {
	case record.Failed:
		e := at(r.CompletedAt, StateFailed)
		e.Error = r.LastError
		out = append(out, e)
	case record.Canceled:
		out = append(out, at(r.UpdatedAt, StateCanceled))
	}
	return out
}

// MaxEvents bounds one page of logs.
const MaxEvents = 1000

// events serves GET /v2/events: count (default 100), cursor, messageId
// (or repeated messageIds), state, and the filters of bulk calls (url,
// host, path, label, …).
func (q *API) events(c *gin.Context) {
	s, err := selection(c, eventsList)
	var scope tenant.Scope
	var state string
	if err == nil {
		state, err = stateFilter(s)
	}
	if err == nil {
		scope, err = handlers.Scope(c, s.Tenant)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	count, cursor := s.Count, s.Cursor
	keep := func(e Event) bool { return state == "" || e.State == state }
	ctx := c.Request.Context()
	out := []Event{}
	add := func(r *record.Request) {
		if !s.Match(r) {
			return
		}
		evs := eventsOf(r)
		for i := len(evs) - 1; i >= 0; i-- {
			if keep(evs[i]) {
				out = append(out, evs[i])
			}
		}
	}
	wanted := s.IDs
	if !s.Named {
		wanted = s.Values[sel.MessageID]
	}
	if len(wanted) > 0 {
		for _, id := range wanted {
			if !ids.Valid(id) {
				continue
			}
			if r, err := q.API.Store.GetIn(ctx, scope, id); err == nil {
				add(r)
			}
		}
		slices.SortStableFunc(out, func(a, b Event) int { return int(b.Time - a.Time) })
		c.JSON(http.StatusOK, gin.H{"events": out})
		return
	}
	next, err := q.readEvents(c, scope, s, cursor, count, keep, &out)
	if err != nil {
		q.fail(c, err)
		return
	}
	res := gin.H{"events": out}
	if next != "" {
		res["cursor"] = next
	}
	c.JSON(http.StatusOK, res)
}

// readEvents appends to out the events s selects (and keep keeps) of the
// requests of scope, newest first, from cursor on, at most count, and
// returns the cursor the next call goes on from ("" at the end). A cursor
// is a request's id (go on after it), or id.k when the page ended inside
// that request's events (go on with the k oldest of them not yet given:
// counted from the oldest end, which a request still in flight does not
// move as it gains events), so a page never holds more than count events
// and none is given twice. The
// requests are read through record.Reading: a call examines at most
// record.ScanBudget of them whatever its filters match, and may end with
// fewer events than count (or none) and a cursor.
func (q *API) readEvents(c *gin.Context, scope tenant.Scope, s sel.Selection, cursor string, count int, keep func(Event) bool, out *[]Event) (string, error) {
	ctx := c.Request.Context()
	partial := "" // the cursor inside a request, when the page ended there
	// take appends r's events, newest first, the owed oldest of them only
	// when owed >= 0; it stops the page when count is reached.
	take := func(r *record.Request, owed int) bool {
		evs := eventsOf(r)
		var mine []Event
		for i := len(evs) - 1; i >= 0; i-- {
			if keep(evs[i]) {
				mine = append(mine, evs[i])
			}
		}
		from := 0
		if owed >= 0 {
			from = max(len(mine)-owed, 0)
		}
		for i := from; i < len(mine); i++ {
			if len(*out) == count {
				partial = r.ID + "." + strconv.Itoa(len(mine)-i)
				return true
			}
			*out = append(*out, mine[i])
		}
		return len(*out) == count
	}
	if id, k, inside := strings.Cut(cursor, "."); inside {
		owed, err := strconv.Atoi(k)
		if !ids.Valid(id) || err != nil || owed < 0 {
			return "", badRequest("cursor", "cursor is not one this list returned")
		}
		cursor = id
		r, err := q.API.Store.GetIn(ctx, scope, id)
		switch {
		case err == nil && s.Match(r):
			if take(r, owed) && partial != "" {
				return partial, nil
			}
		case err != nil && !errors.Is(err, record.ErrNotFound):
			return "", err
		}
	} else if cursor != "" && !ids.Valid(cursor) {
		return "", badRequest("cursor", "cursor is not one this list returned")
	}
	if len(*out) == count {
		return cursor, nil
	}
	rd := record.Reading{Cursor: cursor, At: func(r *record.Request) string { return r.ID },
		Want: func() int { return min(count-len(*out)+1, 100) },
		List: func(ctx context.Context, scan *record.Scan, cursor string, n int) (*record.Page, error) {
			return q.API.Store.ListIn(ctx, scope, nil, cursor, n, scan)
		}}
	next, err := rd.Read(ctx, func(listed *record.Request) (bool, error) {
		if !s.Match(listed) {
			return false, nil
		}
		r, err := q.API.Store.Get(ctx, listed.ID) // with its attempts
		if errors.Is(err, record.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return take(r, -1), nil
	})
	if partial != "" && err == nil {
		return partial, nil
	}
	return next, err
}
