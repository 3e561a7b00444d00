package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// The bulk calls by filter, POST /requests/resend and DELETE
// /requests/payload, take GET /requests' filters (in the query or a JSON
// body), a limit, a cursor and dryRun. Each walks the list those filters
// give, newest first, and looks at up to limit requests: it acts on each
// it can and lists every other under skipped with the reason a call on
// that request alone would get. A dry run walks the same requests and
// decides each the same way, changing nothing, so its count is the real
// call's (unless the requests change in between).
var (
	bulkResendRoute  = filterRoute{Params: []string{"dryRun", "actor", "reason"}, DefaultLimit: DefaultBulkLimit, MaxLimit: MaxBulkLimit}
	bulkExpungeRoute = filterRoute{Params: []string{"dryRun", "actor"}, DefaultLimit: DefaultBulkLimit, MaxLimit: MaxBulkLimit}
)

// bulkCall is a parsed bulk call by filter.
type bulkCall struct {
	filterQuery
	scope  tenant.Scope
	dryRun bool
	by     *redriveBody
}

// readBulkCall reads a bulk call by filter. One that names no filter is
// refused: acting on every request is never what an unfiltered call
// means.
func (a *API) readBulkCall(c *gin.Context, rt filterRoute) (*bulkCall, error) {
	raw, err := readBody(c)
	if err != nil {
		return nil, err
	}
	q, err := parseFilterQuery(rt, c.Request.URL.Query(), raw)
	if err != nil {
		return nil, err
	}
	if q.Filter.Empty() {
		return nil, Errorf(CodeInvalid, "", "name at least one filter ("+strings.Join(RequestFilters, ", ")+
			"): a bulk call without one would act on every request")
	}
	call := &bulkCall{filterQuery: q}
	if v, ok := q.Params["dryRun"]; ok {
		if call.dryRun, err = strconv.ParseBool(v); err != nil {
			return nil, Errorf(CodeInvalid, "dryRun", "dryRun must be true or false")
		}
	}
	if call.by, err = (&redriveBody{Actor: q.Params["actor"], Reason: q.Params["reason"]}).check(c.Request.Context()); err != nil {
		return nil, err
	}
	if call.scope, err = Scope(c, q.Tenant); err != nil {
		return nil, err
	}
	return call, nil
}

// walk calls fn on each request the call selects, at most its limit,
// and returns the cursor the next call goes on from ("" when none is
// left). fn returns nil when it acted or listed the request as skipped;
// an error stops the walk before that request, which the next call then
// starts with. It reads through record.Reading: a call examines at most
// record.ScanBudget entries, whatever its filters match, and a dry run
// reads what the real call would.
func (a *API) walk(ctx context.Context, call *bulkCall, fn func(*record.Request) error) (string, error) {
	seen := 0
	rd := record.Reading{Cursor: call.Cursor, At: call.Filter.CursorAt,
		Want: func() int { return min(call.Limit-seen, MaxListLimit) },
		List: func(ctx context.Context, scan *record.Scan, cursor string, n int) (*record.Page, error) {
			return a.Store.Find(ctx, call.scope, call.Filter, cursor, n, scan)
		}}
	return rd.Read(ctx, func(r *record.Request) (bool, error) {
		if err := fn(r); err != nil {
			return false, err
		}
		seen++
		return seen == call.Limit, nil
	})
}

// stops reports whether err, met on one request, stops a bulk call: the
// store or Redis' memory is out, the caller's rate limit is spent, or
// something unknown went wrong.
func stops(err error) bool {
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Code == CodeUnavailable {
		return true
	}
	return StopsBulk(err)
}

// finishBulk answers a bulk call: what it did (doc), and, when it stopped
// early, what it did before (or the error, when it did nothing).
func (a *API) finishBulk(c *gin.Context, what string, did int, skipped SkipList, next string, err error, doc gin.H) {
	if err != nil && did == 0 && len(skipped) == 0 {
		Abort(c, a.Log, err)
		return
	}
	doc["skipped"], doc["nextCursor"], doc["count"] = skipped.orEmpty(), nullable(next), did
	a.stopped(c, "bulk "+what, did, err, doc)
	c.JSON(http.StatusOK, doc)
}

// stopped says in doc why a bulk call that did some of its work stopped
// early (err: the store failed, or the caller's rate limit is spent), as
// stopped: {code, message}, with Retry-After where the error has one;
// nextCursor then goes on from the first request not done.
func (a *API) stopped(c *gin.Context, what string, did int, err error, doc gin.H) {
	if err == nil {
		return
	}
	if _, limited := errors.AsType[*RateLimited](err); !limited {
		a.Log.Error(what+" stopped early; reporting what it did", "done", did, "err", err)
	}
	doc["stopped"] = Resolve(c, a.Log, err)
}

// Resent pairs a request resent by a bulk call with the new request.
type Resent struct {
	ID       string `json:"id"`
	ResendID string `json:"resendId"`
}

// bulkResend resends the finished requests a filter selects (POST
// /requests/resend). With dryRun it lists under wouldResend what the real
// call would resend: the same checks, the destination rules included.
func (a *API) bulkResend(c *gin.Context) {
	call, err := a.readBulkCall(c, bulkResendRoute)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	var skipped SkipList
	resent, would := []Resent{}, []string{}
	now := a.Now()
	next, err := a.walk(c.Request.Context(), call, func(r *record.Request) error {
		err := record.Resendable(r)
		if err == nil && call.dryRun {
			if err = a.checkDestinations(c, r, ""); err == nil {
				would = append(would, r.ID)
				return nil
			}
		} else if err == nil {
			var res *record.ResendResult
			if res, err = a.resendOne(c, r, call.by, "", now); err == nil {
				resent = append(resent, Resent{ID: r.ID, ResendID: res.ID})
				return nil
			}
			if errors.Is(err, selection.ErrUntouched) {
				return err // not made: the next call begins with it
			}
		}
		skipped.Add(r.ID, err)
		if stops(err) {
			return err
		}
		return nil
	})
	if call.dryRun {
		a.finishBulk(c, "resend", len(would), skipped, next, err, gin.H{"dryRun": true, "wouldResend": would})
		return
	}
	a.finishBulk(c, "resend", len(resent), skipped, next, err, gin.H{"resent": resent})
}

// bulkExpunge erases the payloads of the finished requests a filter
// selects (DELETE /requests/payload). A request expunged before is
// listed under skipped, so the count is what this call erased. With
// dryRun it lists under wouldExpunge what the real call would erase.
func (a *API) bulkExpunge(c *gin.Context) {
	call, err := a.readBulkCall(c, bulkExpungeRoute)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	ctx := c.Request.Context()
	var skipped SkipList
	done := []string{}
	next, err := a.walk(ctx, call, func(r *record.Request) error {
		err := record.Expungeable(r)
		if err == nil && call.dryRun {
			done = append(done, r.ID)
			return nil
		}
		if err == nil {
			var already bool
			if already, err = a.Store.Expunge(ctx, call.scope, r.ID, call.by.Actor, a.Now()); err == nil && !already {
				a.Log.Info("request payload expunged", "requestId", r.ID, "actor", call.by.Actor)
				done = append(done, r.ID)
				return nil
			} else if already {
				err = record.ErrAlreadyExpunged
			}
		}
		skipped.Add(r.ID, err)
		if stops(err) {
			return err
		}
		return nil
	})
	if call.dryRun {
		a.finishBulk(c, "expunge", len(done), skipped, next, err, gin.H{"dryRun": true, "wouldExpunge": done})
		return
	}
	a.finishBulk(c, "expunge", len(done), skipped, next, err, gin.H{"expunged": done})
}
