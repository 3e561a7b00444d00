package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Filter selects requests, in a list and in the bulk calls by filter:
// every field set must match. The API refuses Method and URLContains
// alone (they are checked on the requests another filter selects).
type Filter struct {
	Status string // pending, retrying, completed, failed, canceled; several comma-separated
	// WaitingFor selects pending and retrying requests waiting for one of
	// these reasons (paused, queue, rate, parallelism, fair_share,
	// endpoint_open), comma-separated.
	WaitingFor string
	// Host is a host name (any port) or host:port.
	Host         string
	Method       string
	FailureClass string
	StatusCode   int // the last attempt's
	// Time bounds, inclusive; zero is open. With a finished range the
	// list is ordered by finish time.
	CreatedFrom, CreatedTo   time.Time
	FinishedFrom, FinishedTo time.Time
	Label                    string
	URLContains              string
}

// Empty reports whether f selects every request.
func (f Filter) Empty() bool { return f == Filter{} }

// set adds f's filters to q.
func (f Filter) set(q url.Values) {
	for k, v := range map[string]string{"status": f.Status, "host": f.Host, "method": f.Method, "failureClass": f.FailureClass,
		"label": f.Label, "urlContains": f.URLContains, "waitingFor": f.WaitingFor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.StatusCode != 0 {
		q.Set("statusCode", strconv.Itoa(f.StatusCode))
	}
	for k, t := range map[string]time.Time{"createdFrom": f.CreatedFrom, "createdTo": f.CreatedTo,
		"finishedFrom": f.FinishedFrom, "finishedTo": f.FinishedTo} {
		if !t.IsZero() {
			q.Set(k, t.UTC().Format(time.RFC3339Nano))
		}
	}
}

// BulkOptions are what a bulk call by filter takes besides its filter.
type BulkOptions struct {
	Limit  int    // how many selected requests one call looks at (1–1000; 0 for the API's default, 100)
	Cursor string // a previous call's NextCursor
	Tenant string // an admin key's filter
	Actor  string
	// DryRun changes nothing: the answer lists what the same call would
	// do, with the same checks.
	DryRun bool
}

// BulkQuery is the query of a bulk call by filter.
func BulkQuery(f Filter, o BulkOptions) url.Values {
	q := PageQuery(o.Limit, o.Cursor)
	f.set(q)
	if o.Tenant != "" {
		q.Set("tenant", o.Tenant)
	}
	if o.Actor != "" {
		q.Set("actor", o.Actor)
	}
	if o.DryRun {
		q.Set("dryRun", "true")
	}
	return q
}

// Skipped is a request a bulk call selected and did not act on, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// BulkResendResult is what POST /requests/resend did (or, on a dry run,
// would do).
type BulkResendResult struct {
	Resent []struct {
		ID       string `json:"id"`
		ResendID string `json:"resendId"`
	} `json:"resent"`
	WouldResend []string  `json:"wouldResend"`
	DryRun      bool      `json:"dryRun"`
	Count       int       `json:"count"`
	Skipped     []Skipped `json:"skipped"`
	NextCursor  *string   `json:"nextCursor"`
	// Stopped says why the call stopped early (the rate limit was spent,
	// say); NextCursor then goes on from the first request not done.
	Stopped *Stopped `json:"stopped,omitempty"`
}

// Stopped is why a bulk call stopped before its limit.
type Stopped struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// BulkResend resends the finished requests f selects, each as a new
// request, recording reason.
func (c *Client) BulkResend(ctx context.Context, f Filter, o BulkOptions, reason string) (*BulkResendResult, error) {
	q := BulkQuery(f, o)
	if reason != "" {
		q.Set("reason", reason)
	}
	var out BulkResendResult
	return &out, c.call(ctx, http.MethodPost, PathRequests+"/resend", q, nil, &out, nil)
}

// BulkExpungeResult is what DELETE /requests/payload did (or, on a dry
// run, would do).
type BulkExpungeResult struct {
	Expunged     []string  `json:"expunged"`
	WouldExpunge []string  `json:"wouldExpunge"`
	DryRun       bool      `json:"dryRun"`
	Count        int       `json:"count"`
	Skipped      []Skipped `json:"skipped"`
	NextCursor   *string   `json:"nextCursor"`
	Stopped      *Stopped  `json:"stopped,omitempty"`
}

// BulkExpunge erases the payloads of the finished requests f selects.
func (c *Client) BulkExpunge(ctx context.Context, f Filter, o BulkOptions) (*BulkExpungeResult, error) {
	var out BulkExpungeResult
	return &out, c.call(ctx, http.MethodDelete, PathRequests+"/payload", BulkQuery(f, o), nil, &out, nil)
}
