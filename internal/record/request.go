// Package record is retryd's own state in Redis: one hash per request, a list
// of its attempts, and sorted-set indexes by status. These records, not
// asynq's task state, are the source of truth the API reads and the worker
// updates. All Redis I/O for them lives in this package. A request's keys
// are built in keys.go only (the names record shares with flow and waiting
// in internal/keys): every key carries its partition's hash tag ({retryd} with
// one partition), so each script (scripts/*.lua, one per operation) stays
// in one Redis Cluster slot; views over all partitions (lists, the DLQ,
// stats) are assembled in Go. Go files split by concern: requests
// (store.go), attempts, the DLQ, schedules, sweeping, limits, stats.
package record

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	rediskeys "github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/tenant"
)

// Status is a request's lifecycle state.
type Status string

// The statuses, as shown in the API.
const (
	Pending   Status = "pending"
	Retrying  Status = "retrying"
	Completed Status = "completed"
	Failed    Status = "failed"
	Canceled  Status = "canceled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{Pending, Retrying, Completed, Failed, Canceled}

// Terminal reports whether no attempt will follow in this status.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Canceled }

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Request is one submitted request and its delivery state.
type Request struct {
	ID string
	// Tenant is whose request it is (tenant.Default for a bare key's).
	Tenant         string
	URL            string
	Host           string // the URL's hostname, for DLQ filtering
	Method         string
	Headers        map[string]string
	Body           string
	MaxRetries     int
	BackoffMs      int64
	MaxBackoffMs   int64
	TimeoutMs      int64
	CallbackURL    string
	IdempotencyKey string
	// Dialect is the API the request came through: "" for retryd's own,
	// "qstash" for /v2 (its deliveries carry QStash's headers).
	Dialect string
	// QStash holds the fields a /v2 message adds to retryd's (nil for
	// requests of retryd's own API).
	QStash *QStash
	// FlowControl is the submission's flowControl (nil without one).
	FlowControl *FlowControl
	// Topic is the topic (QStash URL group) the request was published to,
	// and Publication the publish that made it, one request per endpoint
	// ("" for a request sent to its URL).
	Topic, Publication string
	// TraceParent is the W3C traceparent its attempts' spans are children
	// of ("" unless traces are exported; internal/tracing).
	TraceParent string
	// Credential and Proxy name the tenant's credentials its deliveries
	// use ("" for none named: the endpoint's settings, then none).
	Credential, Proxy string
	// WaitingFor says why a due request is not in an attempt (one of
	// WaitingReasons), else "". WaitUntil is when retryd starts it, zero
	// when an event (a resume, a free slot, a turn given) will.
	WaitingFor string
	WaitUntil  time.Time
	// InFlight: an attempt has begun and not yet been recorded.
	InFlight bool

	Status          Status
	AttemptCount    int // every attempt in the request's life, interrupted ones too
	BudgetUsed      int // finished attempts since submission or the last redrive
	NextAttemptAt   time.Time
	LastError       string
	LastStatusCode  int
	FailureClass    string
	Result          string
	HasResult       bool
	ResultTruncated bool
	RedriveCount    int
	CanceledBy      string // who canceled it: api, qstash, dashboard
	// FailedRun is asynq's retry count of the task run that ended the
	// request as failed (-1 when unknown); a later run of the same task with
	// the same count is a run started from the dashboard.
	FailedRun   int
	Callback    *Callback // nil without callbackUrl
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time

	Attempts []Attempt
	Redrives []Redrive

	// ResentFrom is the resend that made this request from another (nil
	// for a request submitted); Resends are the ids of the requests
	// resent from this one, oldest first.
	ResentFrom *ResentFrom
	Resends    []string
	// Expunged: the payload (body, headers, result and response bodies)
	// was erased, at ExpungedAt by ExpungedBy; the metadata stays.
	Expunged   bool
	ExpungedAt time.Time
	ExpungedBy string

	// at is the URL taken apart when the record was read (see place).
	at place
}

// ResentFrom is the audit of a resend, kept on the request it made.
type ResentFrom struct {
	ID     string `json:"id"`
	AtMs   int64  `json:"atMs"`
	Actor  string `json:"actor"`
	Reason string `json:"reason,omitempty"`
}

// Callback is the delivery state of a request's outcome callback.
type Callback struct {
	Status         string // waiting (request not finished), pending, delivered, failed
	Attempts       int
	LastStatusCode int
	LastError      string
	UpdatedAt      time.Time
}

// Redrive is one audited redrive of a failed request.
type Redrive struct {
	N                    int       `json:"n"`
	AtMs                 int64     `json:"atMs"`
	At                   time.Time `json:"-"`
	Actor                string    `json:"actor"`
	Reason               string    `json:"reason"`
	PreviousFailureClass string    `json:"previousFailureClass"`
	PreviousAttemptCount int       `json:"previousAttemptCount"`
	Outcome              *string   `json:"outcome"`
}

// Attempt is one recorded attempt.
type Attempt struct {
	N            int       `json:"n"`
	StartedAt    time.Time `json:"-"`
	StartedAtMs  int64     `json:"startedAtMs"`
	DurationMs   *int64    `json:"durationMs,omitempty"`
	StatusCode   int       `json:"statusCode,omitempty"`
	Outcome      string    `json:"outcome"`
	FailureClass string    `json:"failureClass,omitempty"`
	Error        string    `json:"error,omitempty"`
	ResponseBody *string   `json:"responseBody,omitempty"`
	// ResponseHeaders are the answer's headers, kept for a QStash
	// message with a callback only: its callbacks report them (up to
	// 1 KiB; secret ones masked).
	ResponseHeaders map[string]string `json:"responseHeaders,omitempty"`
	// NotCalled: no call was made (the endpoint stayed open, the
	// destination rules refused the address before dialling); the entry
	// records what stopped it. It is not counted as an attempt: not in
	// attemptCount, the run's budget or the attempt metrics, and N is the
	// number the next attempt made takes.
	NotCalled bool `json:"notCalled,omitempty"`
	// Credential and Proxy name what the attempt used (the request's own,
	// or its tenant's defaults for the endpoint); "" for none.
	Credential string `json:"credential,omitempty"`
	Proxy      string `json:"proxy,omitempty"`
}

// Hash field names: an internal format, rendered for the API by apidoc.
// Every value in the hash stays short (Redis keeps a hash whose values are
// all under 64 bytes in the compact listpack encoding, several times
// smaller than a hashtable): what a client sent lives in the spec key (the
// host is derived from its URL, in full), a response body in the result
// key. lastError is kept up to ErrorLimit: a long one costs the compact
// encoding of that one hash, which is the price of a readable error.
// The fields a request loses as it moves on (waitingFor, waitUntil,
// nextAttemptAt, inflightN, inflightAt) read as absent when empty, here
// and in the scripts: an attempt's finish empties them in the write that
// moves the request (one command fewer than deleting them).
const (
	fMaxRetries     = "maxRetries"
	fBackoff        = "backoffMs"
	fMaxBackoff     = "maxBackoffMs"
	fTimeout        = "timeoutMs"
	fHasCallback    = "cb"
	fCallbackOn     = "cbOn"
	fWaitingFor     = "waitingFor"
	fWaitUntil      = "waitUntil"
	fStatus         = "status"
	fAttemptCount   = "attemptCount"
	fBudgetUsed     = "budgetUsed"
	fNextAttemptAt  = "nextAttemptAt"
	fLastError      = "lastError"
	fLastStatusCode = "lastStatusCode"
	fFailureClass   = "failureClass"
	// fHasResult says where the result is: "1" its own key, "2" the
	// hash's fResult field (see inlineResultMax).
	fHasResult    = "hasResult"
	fResult       = "result"
	fResultTrunc  = "resultTruncated"
	fRedriveCount = "redriveCount"
	fCanceledBy   = "canceledBy"
	// fTenant is stored only for a tenant other than the default one, so
	// the records of before tenants read as the default's.
	fTenant      = "tenant"
	fCreatedAt   = "createdAt"
	fUpdatedAt   = "updatedAt"
	fCompletedAt = "completedAt"
	fInflightN   = "inflightN"
	fInflightAt  = "inflightAt"
	fRedriveOpen = "redriveOpen"
	fFailedRun   = "failedRun"
	fCbStatus    = "cbStatus"
	fCbAttempts  = "cbAttempts"
	fCbLastCode  = "cbLastStatusCode"
	fCbLastError = "cbLastError"
	fCbUpdatedAt = "cbUpdatedAt"
	// fResends lists the ids of the requests resent from this one,
	// space-separated; fExpunged is "1" once the payload was erased.
	fResends    = "resends"
	fExpunged   = "expunged"
	fExpungedAt = "expungedAt"
	fExpungedBy = "expungedBy"
)

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func fromMs(s string) time.Time {
	if s == "" {
		return time.Time{} // most of a record's times are unset: no error to build
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func atoi(s string) int {
	if s == "" {
		return 0
	}
	n, _ := strconv.Atoi(s)
	return n
}

// FlowControl limits the requests that share its Key (by default their
// destination's host:port), across all workers.
type FlowControl struct {
	Key         string `json:"key,omitempty"`
	Parallelism int    `json:"parallelism,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	PeriodMs    int64  `json:"periodMs,omitempty"`
}

// Why a due request waits instead of starting (its WaitingFor): the
// API's waitingFor, one word each; flow control decides them
// (internal/keys names them for both).
const (
	WaitingPaused       = rediskeys.WaitingPaused
	WaitingQueue        = rediskeys.WaitingQueue
	WaitingRate         = rediskeys.WaitingRate
	WaitingParallelism  = rediskeys.WaitingParallelism
	WaitingFairShare    = rediskeys.WaitingFairShare
	WaitingEndpointOpen = rediskeys.WaitingEndpointOpen
)

// WaitingReasons lists every WaitingFor a request may show.
var WaitingReasons = []string{WaitingPaused, WaitingQueue, WaitingRate, WaitingParallelism, WaitingFairShare, WaitingEndpointOpen}

// FlowKey is the flow-control key of r: its flowControl's key, else its
// destination's host:port.
func (r *Request) FlowKey() string {
	if r.FlowControl != nil && r.FlowControl.Key != "" {
		// A tenant's key is its own: another tenant's same key is
		// another limit.
		return tenant.Qualify(r.Tenant, r.FlowControl.Key)
	}
	return r.place().hostPort
}

// HostPort is the host:port of r's destination (the port from the scheme
// when the URL has none), the key of fairness between destinations.
func (r *Request) HostPort() string { return r.place().hostPort }

// Endpoint is r's destination as scheme://host:port (the port from the
// scheme when the URL has none): what an endpoint's health is kept for.
func (r *Request) Endpoint() string { return r.place().endpoint }

// DialectQStash marks a request made through the QStash-compatible API.
const DialectQStash = "qstash"

// QStash is what a message of the QStash-compatible API adds to a
// request, kept so /v2 can show it and the worker can honour it.
type QStash struct {
	// RetryDelay is the Upstash-Retry-Delay expression: milliseconds as a
	// function of retried.
	RetryDelay string `json:"rd,omitempty"`
	// FailureCallback is called, instead of the callback, when the
	// message fails.
	FailureCallback string `json:"fc,omitempty"`
	// ScheduleID is the schedule that made the message, as QStash
	// clients know it.
	ScheduleID string `json:"s,omitempty"`
	// Label is the first of Labels (Upstash-Label, comma-separated), the
	// only one before several were kept.
	Label          string   `json:"l,omitempty"`
	Labels         []string `json:"ls,omitempty"`
	FlowControlKey string   `json:"f,omitempty"`
	// Redact is what Upstash-Redact-Fields hides from every view (nil:
	// nothing beyond retryd's own redaction).
	Redact *RedactFields `json:"r,omitempty"`
	// Queue is the QStash queue the message was enqueued to, whose order
	// and parallelism it keeps ("" for none).
	Queue string `json:"qn,omitempty"`
	// WorkflowRun is the Upstash Workflow run whose log of steps the
	// message's deliveries carry as their body ("" for none).
	WorkflowRun string `json:"wf,omitempty"`
	// CallbackHeaders are set on the callback's call (its
	// Upstash-Callback-Forward-* and Upstash-Callback-Workflow-* headers),
	// FailureHeaders on the failure callback's.
	CallbackHeaders map[string]string `json:"ch,omitempty"`
	FailureHeaders  map[string]string `json:"fh,omitempty"`
}

// AllLabels are q's labels: Labels, or Label for a message stored before
// several were kept.
func (q *QStash) AllLabels() []string {
	if len(q.Labels) > 0 {
		return q.Labels
	}
	if q.Label != "" {
		return []string{q.Label}
	}
	return nil
}

// RedactFields is what a message's views hide: its body, all its
// headers, or the headers named (any case).
type RedactFields struct {
	Body       bool     `json:"b,omitempty"`
	AllHeaders bool     `json:"ah,omitempty"`
	Headers    []string `json:"h,omitempty"`
}

// Header reports whether header name's value is hidden.
func (f *RedactFields) Header(name string) bool {
	if f == nil {
		return false
	}
	return f.AllHeaders || slices.ContainsFunc(f.Headers, func(h string) bool { return strings.EqualFold(h, name) })
}

// HasCallback reports whether some outcome of r calls back.
func (r *Request) HasCallback() bool {
	return r.CallbackURL != "" || (r.QStash != nil && r.QStash.FailureCallback != "")
}

// callbackOn says, for a QStash message, which of its ends has a
// callback to send (finish.lua): "c" a success (its callback), "f" a
// failure (its failure callback), none a cancel. "" for retryd's own
// callbackUrl, sent on every end. A record without it (written before it
// was) has a callback due on every end; the callback task then sends
// what there is.
func (r *Request) callbackOn() string {
	if r.Dialect != DialectQStash {
		return ""
	}
	on := ""
	if r.CallbackURL != "" {
		on += "c"
	}
	if r.QStash != nil && r.QStash.FailureCallback != "" {
		on += "f"
	}
	return on
}

// fields encodes a new request's hash as HSET arguments.
func (r *Request) fields() []any {
	f := []any{
		fMaxRetries, r.MaxRetries, fBackoff, r.BackoffMs, fMaxBackoff, r.MaxBackoffMs, fTimeout, r.TimeoutMs,
		fStatus, string(r.Status), fAttemptCount, 0, fBudgetUsed, 0, fRedriveCount, 0,
		fNextAttemptAt, ms(r.NextAttemptAt), fCreatedAt, ms(r.CreatedAt), fUpdatedAt, ms(r.CreatedAt),
	}
	if r.HasCallback() {
		f = append(f, fHasCallback, "1")
		if on := r.callbackOn(); on != "" {
			f = append(f, fCallbackOn, on)
		}
	}
	if t := tenant.Of(r.Tenant); t != tenant.Default {
		f = append(f, fTenant, t)
	}
	return f
}

// ErrorLimit bounds the error text kept as a request's or a callback's
// lastError (each attempt keeps its own error in full).
const ErrorLimit = 1024

// clip shortens s to ErrorLimit bytes (on a rune boundary), marking the cut.
func clip(s string) string {
	if len(s) <= ErrorLimit {
		return s
	}
	cut := ErrorLimit - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// decode fills a Request from HGETALL output and the spec JSON.
func decode(id string, h map[string]string, specJSON string) *Request {
	sp := specFrom(specJSON)
	at := placeOf(sp.URL)
	r := &Request{
		at:              at,
		ID:              id,
		Tenant:          tenant.Of(h[fTenant]),
		URL:             sp.URL,
		Host:            at.host,
		Method:          sp.Method,
		Headers:         sp.Headers,
		Body:            sp.Body,
		MaxRetries:      atoi(h[fMaxRetries]),
		BackoffMs:       int64(atoi(h[fBackoff])),
		MaxBackoffMs:    int64(atoi(h[fMaxBackoff])),
		TimeoutMs:       int64(atoi(h[fTimeout])),
		CallbackURL:     sp.CallbackURL,
		IdempotencyKey:  sp.IdempotencyKey,
		Dialect:         sp.Dialect,
		QStash:          sp.QStash,
		FlowControl:     sp.FlowControl,
		Topic:           sp.Topic,
		Publication:     sp.Publication,
		TraceParent:     sp.TraceParent,
		Credential:      sp.Credential,
		Proxy:           sp.Proxy,
		WaitingFor:      h[fWaitingFor],
		WaitUntil:       fromMs(h[fWaitUntil]),
		InFlight:        h[fInflightN] != "",
		Status:          Status(h[fStatus]),
		AttemptCount:    atoi(h[fAttemptCount]),
		BudgetUsed:      atoi(h[fBudgetUsed]),
		NextAttemptAt:   fromMs(h[fNextAttemptAt]),
		LastError:       h[fLastError],
		LastStatusCode:  atoi(h[fLastStatusCode]),
		FailureClass:    h[fFailureClass],
		ResultTruncated: h[fResultTrunc] == "1",
		RedriveCount:    atoi(h[fRedriveCount]),
		CanceledBy:      h[fCanceledBy],
		CreatedAt:       fromMs(h[fCreatedAt]),
		UpdatedAt:       fromMs(h[fUpdatedAt]),
		CompletedAt:     fromMs(h[fCompletedAt]),
		ResentFrom:      sp.ResentFrom,
		Resends:         strings.Fields(h[fResends]),
		Expunged:        h[fExpunged] == "1",
		ExpungedAt:      fromMs(h[fExpungedAt]),
		ExpungedBy:      h[fExpungedBy],
	}
	r.HasResult = h[fHasResult] == resultInKey || h[fHasResult] == resultInline
	r.FailedRun = -1
	if v, ok := h[fFailedRun]; ok {
		r.FailedRun = atoi(v)
	}
	if r.HasCallback() {
		r.Callback = &Callback{
			Status:         h[fCbStatus],
			Attempts:       atoi(h[fCbAttempts]),
			LastStatusCode: atoi(h[fCbLastCode]),
			LastError:      h[fCbLastError],
			UpdatedAt:      fromMs(h[fCbUpdatedAt]),
		}
		if r.Callback.Status == "" {
			r.Callback.Status = "waiting"
		}
	}
	if r.Headers == nil {
		r.Headers = map[string]string{}
	}
	return r
}

func decodeAttempts(raw []string) []Attempt {
	out := make([]Attempt, 0, len(raw))
	for _, s := range raw {
		var a Attempt
		if json.Unmarshal([]byte(s), &a) != nil {
			continue
		}
		a.StartedAt = time.UnixMilli(a.StartedAtMs).UTC()
		out = append(out, a)
	}
	return out
}

func decodeRedrives(raw []string) []Redrive {
	out := make([]Redrive, 0, len(raw))
	for _, s := range raw {
		var r Redrive
		if json.Unmarshal([]byte(s), &r) != nil {
			continue
		}
		r.At = time.UnixMilli(r.AtMs).UTC()
		out = append(out, r)
	}
	return out
}
