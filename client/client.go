// Package client is a typed Go client of retryd's HTTP API (the one
// /openapi.json describes; a test keeps the two in step). It is what
// cmd/retryctl is built on, and Go services can import it:
//
//	c := client.New("http://127.0.0.1:3000", os.Getenv("RETRYD_API_KEY"))
//	acc, err := c.Submit(ctx, client.Submission{URL: "https://example.com/hook", Method: "POST", Body: "{}"}, "order-1")
//
// Every call has a timeout (Client.Timeout, 30 s by default) on top of its
// context. An answer other than 2xx is an *Error carrying the API's code
// and message.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one retryd API.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:3000
	APIKey  string // sent as Authorization: Bearer; empty sends none
	HTTP    *http.Client
	// Timeout bounds each call (30 s when zero).
	Timeout time.Duration
}

// New returns a client of the API at baseURL.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey, HTTP: &http.Client{}}
}

// Error is an answer other than 2xx.
type Error struct {
	Status  int    // the HTTP status
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, msg)
	}
	return fmt.Sprintf("%d: %s", e.Status, msg)
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// The API's paths.
const (
	PathRequests  = "/requests"
	PathDLQ       = "/dlq"
	PathSchedules = "/schedules"
	PathFlows     = "/flows"
	PathTopics    = "/topics"
	PathEndpoints = "/endpoints"
	PathTenants   = "/tenants"
	PathQueues    = "/v2/queues"
)

// Raw performs one call and returns the API's JSON answer as sent. body,
// when not nil, is sent as JSON. header adds request headers.
func (c *Client) Raw(ctx context.Context, method, path string, query url.Values, body any, header http.Header) ([]byte, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode the request body: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var body struct {
			Error *Error `json:"error"`
		}
		if json.Unmarshal(raw, &body) == nil && body.Error != nil {
			e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		} else {
			e.Message = strings.TrimSpace(string(raw))
		}
		return raw, e
	}
	return raw, nil
}

// call performs a call and decodes its answer into out.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any, header http.Header) error {
	raw, err := c.Raw(ctx, method, path, query, body, header)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// Submission is the body of POST /requests.
type Submission struct {
	URL          string            `json:"url"`
	Method       string            `json:"method,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Body         string            `json:"body,omitempty"`
	MaxRetries   *int              `json:"maxRetries,omitempty"`
	BackoffMs    int64             `json:"backoffMs,omitempty"`
	MaxBackoffMs int64             `json:"maxBackoffMs,omitempty"`
	TimeoutMs    int64             `json:"timeoutMs,omitempty"`
	DelayMs      int64             `json:"delayMs,omitempty"`
	NotBefore    string            `json:"notBefore,omitempty"`
	CallbackURL  string            `json:"callbackUrl,omitempty"`
	FlowControl  *FlowControl      `json:"flowControl,omitempty"`
	// Credential and Proxy name credentials of the tenant its deliveries
	// use.
	Credential string `json:"credential,omitempty"`
	Proxy      string `json:"proxy,omitempty"`
}

// FlowControl limits the requests sharing Key across all workers.
type FlowControl struct {
	Key         string `json:"key,omitempty"`
	Parallelism int    `json:"parallelism,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	PeriodMs    int64  `json:"periodMs,omitempty"`
}

// Accepted is the answer to a submission.
type Accepted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Request is a request's document (GET /requests/{id}).
type Request struct {
	ID              string            `json:"id"`
	Tenant          string            `json:"tenant"`
	Topic           string            `json:"topic,omitempty"`
	PublicationID   string            `json:"publicationId,omitempty"`
	URL             string            `json:"url"`
	Method          string            `json:"method"`
	Headers         map[string]string `json:"headers"`
	Status          string            `json:"status"`
	AttemptCount    int               `json:"attemptCount"`
	MaxRetries      int               `json:"maxRetries"`
	BackoffMs       int64             `json:"backoffMs"`
	MaxBackoffMs    int64             `json:"maxBackoffMs"`
	TimeoutMs       int64             `json:"timeoutMs"`
	NextRetryAt     *time.Time        `json:"nextRetryAt"`
	LastError       *string           `json:"lastError"`
	LastStatusCode  *int              `json:"lastStatusCode"`
	FailureClass    *string           `json:"failureClass"`
	Result          *string           `json:"result"`
	ResultTruncated bool              `json:"resultTruncated"`
	IdempotencyKey  *string           `json:"idempotencyKey"`
	RedriveCount    int               `json:"redriveCount"`
	CanceledBy      string            `json:"canceledBy,omitempty"`
	CreatedAt       *time.Time        `json:"createdAt"`
	UpdatedAt       *time.Time        `json:"updatedAt"`
	CompletedAt     *time.Time        `json:"completedAt"`
	CallbackURL     *string           `json:"callbackUrl"`
	Callback        *Callback         `json:"callback"`
	FlowControl     *FlowControl      `json:"flowControl,omitempty"`
	Credential      string            `json:"credential,omitempty"`
	Proxy           string            `json:"proxy,omitempty"`
	WaitingFor      *string           `json:"waitingFor"`
	RunAttempts     int               `json:"runAttempts"`
	Attempts        []Attempt         `json:"attempts,omitempty"`
	Redrives        []Redrive         `json:"redrives"`
	// ResentFrom is the resend that made this request (nil for one
	// submitted); Resends the ids of the requests resent from it.
	ResentFrom *ResentFrom `json:"resentFrom"`
	Resends    []string    `json:"resends"`
	// Expunged: the payload was erased (at ExpungedAt, by ExpungedBy);
	// the empty headers and response bodies shown are erased, not what
	// was sent.
	Expunged   bool       `json:"expunged"`
	ExpungedAt *time.Time `json:"expungedAt"`
	ExpungedBy *string    `json:"expungedBy"`
}

// ResentFrom is the audit of the resend that made a request.
type ResentFrom struct {
	ID     string     `json:"id"`
	At     *time.Time `json:"at"`
	Actor  string     `json:"actor"`
	Reason *string    `json:"reason"`
}

// Counts is a request's attempt numbers in the words every surface of
// retryd uses (the API's fields, retryctl and the dashboard):
//
//	4 attempts · run 2: 2 of 2 allowed
//
// attemptCount counts every attempt of the request's life, redrives and
// interrupted attempts included; a run is the stretch from the submission
// (run 1) or a redrive (run redriveCount+1) to the request's end, and may
// make maxRetries+1 attempts, of which it has made runAttempts.
func Counts(attemptCount, runAttempts, maxRetries, redriveCount int) string {
	noun := "attempts"
	if attemptCount == 1 {
		noun = "attempt"
	}
	return fmt.Sprintf("%d %s · run %d: %d of %d allowed", attemptCount, noun, redriveCount+1, runAttempts, maxRetries+1)
}

// Counts is r's attempt numbers as every surface shows them.
func (r *Request) Counts() string {
	return Counts(r.AttemptCount, r.RunAttempts, r.MaxRetries, r.RedriveCount)
}

// startsOn says, per waitingFor reason, what event starts a request that
// waits without a time.
var startsOn = map[string]string{
	"paused":        "when its flow-control key is resumed",
	"queue":         "when the requests ahead of it in its queue finish",
	"rate":          "at its turn of its key's rate",
	"parallelism":   "when one of its key's parallel slots frees",
	"fair_share":    "when its destination (or tenant) is back under its share of the workers",
	"endpoint_open": "when its endpoint answers a probe",
}

// Waiting is why a request waits and until when, in the words every
// surface uses: "waiting for paused · starts when its flow-control key is
// resumed", or "waiting for rate · starts 2026-01-02T15:04:05.000Z" when
// retryd knows the time (startsAt non-nil; for endpoint_open, "next
// probe" and the probe's time). "" when reason is.
func Waiting(reason string, startsAt *time.Time) string {
	if reason == "" {
		return ""
	}
	s := "waiting for " + reason
	switch {
	case startsAt != nil && reason == "endpoint_open":
		// A probe is a try, not a start: the request starts once one
		// succeeds.
		s += " · next probe " + startsAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	case startsAt != nil:
		s += " · starts " + startsAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	case startsOn[reason] != "":
		s += " · starts " + startsOn[reason]
	}
	return s
}

// Attempt is one attempt of a request.
type Attempt struct {
	N            int        `json:"n"`
	StartedAt    *time.Time `json:"startedAt"`
	DurationMs   *int64     `json:"durationMs"`
	StatusCode   *int       `json:"statusCode"`
	Outcome      string     `json:"outcome"`
	FailureClass *string    `json:"failureClass"`
	Error        *string    `json:"error"`
	ResponseBody *string    `json:"responseBody"`
	// Expunged: the response body was erased with the request's payload.
	Expunged bool `json:"expunged,omitempty"`
	// Called is false for an entry that made no call: it says what
	// stopped the attempt, and is not counted as one.
	Called bool `json:"called"`
}

// Redrive is one redrive of a request.
type Redrive struct {
	N                    int        `json:"n"`
	At                   *time.Time `json:"at"`
	Actor                string     `json:"actor"`
	Reason               string     `json:"reason"`
	PreviousFailureClass *string    `json:"previousFailureClass"`
	PreviousAttemptCount int        `json:"previousAttemptCount"`
	Outcome              *string    `json:"outcome"`
}

// Callback is the state of a request's outcome callback.
type Callback struct {
	URL            string     `json:"url"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	LastStatusCode *int       `json:"lastStatusCode"`
	LastError      *string    `json:"lastError"`
	UpdatedAt      *time.Time `json:"updatedAt"`
}

// Page is one page of requests, newest first.
type Page struct {
	Data       []Request `json:"data"`
	NextCursor *string   `json:"nextCursor"`
}

// Submit submits a request; idempotencyKey may be empty.
func (c *Client) Submit(ctx context.Context, s Submission, idempotencyKey string) (*Accepted, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var out Accepted
	return &out, c.call(ctx, http.MethodPost, PathRequests, nil, s, &out, h)
}

// Get returns request id's document with its attempts.
func (c *Client) Get(ctx context.Context, id string) (*Request, error) {
	var out Request
	return &out, c.call(ctx, http.MethodGet, PathRequests+"/"+url.PathEscape(id), nil, nil, &out, nil)
}

// ListOptions select a page of requests.
type ListOptions struct {
	Filter     // Status, Host, ... ; the zero Filter lists every request
	Limit  int // 1–500; 0 for the API's default
	Cursor string
	Tenant string // an admin key's filter: that tenant's only; "" for every tenant the key sees
}

// PageQuery is the query of one page of a list: its size (0 for the API's
// default) and the cursor of a previous page ("" for the first).
func PageQuery(limit int, cursor string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// ListQuery is the query of GET /requests for o.
func ListQuery(o ListOptions) url.Values {
	q := PageQuery(o.Limit, o.Cursor)
	o.set(q)
	if o.Tenant != "" {
		q.Set("tenant", o.Tenant)
	}
	return q
}

// List returns a page of requests, newest first.
func (c *Client) List(ctx context.Context, o ListOptions) (*Page, error) {
	var out Page
	return &out, c.call(ctx, http.MethodGet, PathRequests, ListQuery(o), nil, &out, nil)
}

// Cancel cancels request id and returns its document.
func (c *Client) Cancel(ctx context.Context, id string) (*Request, error) {
	var out Request
	return &out, c.call(ctx, http.MethodDelete, PathRequests+"/"+url.PathEscape(id), nil, nil, &out, nil)
}

// DLQOptions select failed requests.
type DLQOptions struct {
	FailureClass string
	Host         string // a host name, or host:port
	Limit        int
	Cursor       string
	Tenant       string // an admin key's filter, as in ListOptions
}

// DLQQuery is the query of GET /dlq for o.
func DLQQuery(o DLQOptions) url.Values {
	q := PageQuery(o.Limit, o.Cursor)
	if o.FailureClass != "" {
		q.Set("failureClass", o.FailureClass)
	}
	if o.Host != "" {
		q.Set("host", o.Host)
	}
	if o.Tenant != "" {
		q.Set("tenant", o.Tenant)
	}
	return q
}

// DLQ returns a page of failed requests, newest first.
func (c *Client) DLQ(ctx context.Context, o DLQOptions) (*Page, error) {
	var out Page
	return &out, c.call(ctx, http.MethodGet, PathDLQ, DLQQuery(o), nil, &out, nil)
}

// RedriveInput is who redrives and why.
type RedriveInput struct {
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Redrive sends failed request id again and returns its document.
func (c *Client) Redrive(ctx context.Context, id string, in RedriveInput) (*Request, error) {
	var out Request
	return &out, c.call(ctx, http.MethodPost, PathDLQ+"/"+url.PathEscape(id)+"/redrive", nil, in, &out, nil)
}

// ResendInput is who resends and why (as a redrive's RedriveInput).
type ResendInput = RedriveInput

// Resend makes a new request from finished request id (completed, failed
// or canceled) and returns the new request's document; idempotencyKey
// (may be empty) makes a repeated call return the same new request.
func (c *Client) Resend(ctx context.Context, id string, in ResendInput, idempotencyKey string) (*Request, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var out Request
	return &out, c.call(ctx, http.MethodPost, PathRequests+"/"+url.PathEscape(id)+"/resend", nil, in, &out, h)
}

// ExpungeInput names who erases a payload.
type ExpungeInput struct {
	Actor string `json:"actor,omitempty"`
}

// Expunge erases finished request id's payload (body, headers, result and
// response bodies), keeping its metadata, and returns its document.
func (c *Client) Expunge(ctx context.Context, id string, in ExpungeInput) (*Request, error) {
	var out Request
	return &out, c.call(ctx, http.MethodDelete, PathRequests+"/"+url.PathEscape(id)+"/payload", nil, in, &out, nil)
}

// BulkRedriveInput selects the failed requests to send again.
type BulkRedriveInput struct {
	Actor        string `json:"actor,omitempty"`
	Reason       string `json:"reason,omitempty"`
	FailureClass string `json:"failureClass,omitempty"`
	Host         string `json:"host,omitempty"`
	Limit        int    `json:"limit,omitempty"`
	Tenant       string `json:"tenant,omitempty"` // an admin key's filter
	// DryRun changes nothing: the answer's WouldRedrive is what the same
	// call would redrive.
	DryRun bool `json:"dryRun,omitempty"`
}

// BulkRedriveResult is what a bulk redrive did (or, on a dry run, would
// do): every request selected and not redriven is in Skipped, with why.
type BulkRedriveResult struct {
	Redriven     []string `json:"redriven"`
	WouldRedrive []string `json:"wouldRedrive,omitempty"`
	DryRun       bool     `json:"dryRun,omitempty"`
	Skipped      []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	} `json:"skipped"`
	NextCursor *string  `json:"nextCursor"`
	Stopped    *Stopped `json:"stopped,omitempty"`
	// EndpointsOpen are the endpoints not closed that requests redriven
	// go to: those wait for a probe that succeeds.
	EndpointsOpen []struct {
		Endpoint string   `json:"endpoint"`
		Tenant   string   `json:"tenant"`
		State    string   `json:"state"`
		IDs      []string `json:"ids"`
	} `json:"endpointsOpen"`
}

// BulkRedrive sends the selected failed requests again.
func (c *Client) BulkRedrive(ctx context.Context, in BulkRedriveInput) (*BulkRedriveResult, error) {
	var out BulkRedriveResult
	return &out, c.call(ctx, http.MethodPost, PathDLQ+"/redrive", nil, in, &out, nil)
}

// Schedule is a recurring request.
type Schedule struct {
	ID            string         `json:"id"`
	Tenant        string         `json:"tenant"`
	Cron          string         `json:"cron"`
	Timezone      string         `json:"timezone"`
	CatchUp       string         `json:"catchUp"`
	Paused        bool           `json:"paused"`
	Request       map[string]any `json:"request"`
	NextFireTimes []time.Time    `json:"nextFireTimes"`
	LastFires     []struct {
		FireTime  time.Time `json:"fireTime"`
		RequestID string    `json:"requestId"`
	} `json:"lastFires"`
	CreatedAt *time.Time `json:"createdAt"`
}

// SchedulePage is one page of schedules.
type SchedulePage struct {
	Data       []Schedule `json:"data"`
	NextCursor *string    `json:"nextCursor"`
}

// Schedules returns a page of schedules.
func (c *Client) Schedules(ctx context.Context, limit int, cursor string) (*SchedulePage, error) {
	var out SchedulePage
	return &out, c.call(ctx, http.MethodGet, PathSchedules, PageQuery(limit, cursor), nil, &out, nil)
}

// Flow is one active flow-control key.
type Flow struct {
	Key            string   `json:"key"`
	Tenant         string   `json:"tenant"`
	InFlight       int64    `json:"inFlight"`
	Waiting        int64    `json:"waiting"`
	Parallelism    *int     `json:"parallelism"`
	Rate           *int     `json:"rate"`
	PeriodMs       *int64   `json:"periodMs"`
	EffectiveRate  *float64 `json:"effectiveRate"`
	FailureShare   float64  `json:"failureShare"`
	OverloadShare  float64  `json:"overloadShare"`
	RecentAttempts int      `json:"recentAttempts"`
	// Paused: an operator paused the key; its requests wait (counted in
	// Waiting) until it is resumed.
	Paused bool `json:"paused"`
}

// FlowInfo is one flow-control key's state, in QStash's names: GET
// /flows/{key}, and the answer of its pause, resume, pin and unpin.
type FlowInfo struct {
	FlowControlKey      string `json:"flowControlKey"`
	Tenant              string `json:"tenant"`
	WaitListSize        int64  `json:"waitListSize"`
	ParallelismMax      int    `json:"parallelismMax"`
	ParallelismCount    int64  `json:"parallelismCount"`
	RateMax             int    `json:"rateMax"`
	RateCount           int64  `json:"rateCount"`
	RatePeriod          int64  `json:"ratePeriod"`      // seconds
	RatePeriodStart     int64  `json:"ratePeriodStart"` // Unix ms
	IsPaused            bool   `json:"isPaused"`
	IsPinnedParallelism bool   `json:"isPinnedParallelism"`
	IsPinnedRate        bool   `json:"isPinnedRate"`
	// Released is how many waiting requests a resume let go (a resume's
	// answer only).
	Released *int `json:"released"`
}

// FlowKey reads one flow-control key's state.
func (c *Client) FlowKey(ctx context.Context, key string) (*FlowInfo, error) {
	var out FlowInfo
	return &out, c.call(ctx, http.MethodGet, PathFlows+"/"+url.PathEscape(key), nil, nil, &out, nil)
}

// ResumeFlow resumes a paused key; its answer says how many waiting
// requests it released.
func (c *Client) ResumeFlow(ctx context.Context, key string) (*FlowInfo, error) {
	var out FlowInfo
	return &out, c.call(ctx, http.MethodPost, PathFlows+"/"+url.PathEscape(key)+"/resume", nil, nil, &out, nil)
}

// Flows returns the active flow-control keys, busiest first.
func (c *Client) Flows(ctx context.Context) ([]Flow, error) {
	var out struct {
		Data []Flow `json:"data"`
	}
	// Not "return out.Data, c.call(…)": Go does not order reading
	// out.Data against the call.
	err := c.call(ctx, http.MethodGet, PathFlows, nil, nil, &out, nil)
	return out.Data, err
}

// EndpointHealth is an endpoint's breaker as GET /endpoints shows it.
type EndpointHealth struct {
	Endpoint     string     `json:"endpoint"`
	ID           string     `json:"id"`
	Tenant       string     `json:"tenant"`
	State        string     `json:"state"`
	Since        time.Time  `json:"since"`
	FailureRatio float64    `json:"failureRatio"`
	Waiting      int64      `json:"waiting"`
	NextProbeAt  *time.Time `json:"nextProbeAt"`
	OpenedBy     string     `json:"openedBy,omitempty"`
}

// Endpoint is one destination of a topic.
type Endpoint struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url"`
}

// Endpoints is the body of adding or removing a topic's endpoints.
type Endpoints struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// Topic is a named set of endpoints; a request published to it becomes
// one request per endpoint.
type Topic struct {
	Name      string     `json:"name"`
	Tenant    string     `json:"tenant"`
	Endpoints []Endpoint `json:"endpoints"`
	CreatedAt *time.Time `json:"createdAt"`
	UpdatedAt *time.Time `json:"updatedAt"`
}

// TopicList is GET /topics.
type TopicList struct {
	Data []Topic `json:"data"`
}

// Publication is one publish to a topic: its requests and their statuses.
type Publication struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Topic     string     `json:"topic"`
	CreatedAt *time.Time `json:"createdAt"`
	Requests  []struct {
		ID       string  `json:"id"`
		Endpoint string  `json:"endpoint,omitempty"`
		URL      string  `json:"url"`
		Status   *string `json:"status"`
	} `json:"requests"`
	Counts map[string]int `json:"counts"`
}

// Topics lists the topics the key sees.
func (c *Client) Topics(ctx context.Context) ([]Topic, error) {
	var out TopicList
	return out.Data, c.call(ctx, http.MethodGet, PathTopics, nil, nil, &out, nil)
}

// Topic returns topic name.
func (c *Client) Topic(ctx context.Context, name string) (*Topic, error) {
	var out Topic
	return &out, c.call(ctx, http.MethodGet, PathTopics+"/"+url.PathEscape(name), nil, nil, &out, nil)
}

// AddEndpoints adds endpoints to topic name (made on first use).
func (c *Client) AddEndpoints(ctx context.Context, name string, eps []Endpoint) (*Topic, error) {
	var out Topic
	return &out, c.call(ctx, http.MethodPost, PathTopics+"/"+url.PathEscape(name)+"/endpoints", nil, Endpoints{eps}, &out, nil)
}

// RemoveEndpoints removes endpoints (by url, or by name) of topic name.
func (c *Client) RemoveEndpoints(ctx context.Context, name string, eps []Endpoint) (*Topic, error) {
	var out Topic
	return &out, c.call(ctx, http.MethodDelete, PathTopics+"/"+url.PathEscape(name)+"/endpoints", nil, Endpoints{eps}, &out, nil)
}

// DeleteTopic deletes topic name; its requests stay.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, PathTopics+"/"+url.PathEscape(name), nil, nil, nil, nil)
}

// Publish publishes s (a submission without url) to topic name: one
// request per endpoint.
func (c *Client) Publish(ctx context.Context, name string, s Submission, idempotencyKey string) (*Publication, error) {
	var out Publication
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	return &out, c.call(ctx, http.MethodPost, PathTopics+"/"+url.PathEscape(name)+"/requests", nil, s, &out, h)
}

// Publication returns publication id.
func (c *Client) Publication(ctx context.Context, id string) (*Publication, error) {
	var out Publication
	return &out, c.call(ctx, http.MethodGet, "/publications/"+url.PathEscape(id), nil, nil, &out, nil)
}

// RetentionSettings are a tenant's retentions as an admin sets them,
// written as RETENTION is ("30d", "720h"); nil is the default's.
type RetentionSettings struct {
	Retention        *string `json:"retention"`
	PayloadRetention *string `json:"payloadRetention"`
}

// Retention is a tenant's retention: what applies to its requests, and
// what an admin set for it (nil fields: the defaults).
type Retention struct {
	Tenant           string            `json:"tenant"`
	Retention        string            `json:"retention"`
	PayloadRetention *string           `json:"payloadRetention"`
	Set              RetentionSettings `json:"set"`
}

// TenantRetention reads a tenant's retention (an admin's key, or the
// tenant's own).
func (c *Client) TenantRetention(ctx context.Context, tenant string) (*Retention, error) {
	var out Retention
	return &out, c.call(ctx, http.MethodGet, PathTenants+"/"+url.PathEscape(tenant)+"/retention", nil, nil, &out, nil)
}

// SetTenantRetention sets a tenant's retention (an admin's key).
func (c *Client) SetTenantRetention(ctx context.Context, tenant string, set RetentionSettings) (*Retention, error) {
	var out Retention
	return &out, c.call(ctx, http.MethodPut, PathTenants+"/"+url.PathEscape(tenant)+"/retention", nil, set, &out, nil)
}

// Schedule reads one schedule.
func (c *Client) Schedule(ctx context.Context, id string) (*Schedule, error) {
	var out Schedule
	return &out, c.call(ctx, http.MethodGet, PathSchedules+"/"+url.PathEscape(id), nil, nil, &out, nil)
}

// Queue is a QStash queue (/v2/queues): an ordered line of messages
// delivered Parallelism at a time; Lag is how many are not yet delivered.
type Queue struct {
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	Lag         int64  `json:"lag"`
	Paused      bool   `json:"paused"`
	CreatedAt   int64  `json:"createdAt"`
	UpdatedAt   int64  `json:"updatedAt"`
}

// Queues lists the key's queues.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var out []Queue
	err := c.call(ctx, http.MethodGet, PathQueues, nil, nil, &out, nil)
	return out, err
}
