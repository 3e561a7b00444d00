// Package apidoc renders retryd's records as the API's JSON documents, with
// secret headers and secret URL query parameters redacted. The API answers with them and callbacks send them.
package apidoc

import (
	"time"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
)

// timeLayout is RFC 3339 in UTC with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

func timePtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(TimeLayout)
	return &s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func intPtr(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// Document is the API's view of a request (GET /requests/{id}).
type Document struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// Topic and PublicationID say which publish to a topic made the
	// request (absent for one sent to its URL).
	Topic         string            `json:"topic,omitempty"`
	PublicationID string            `json:"publicationId,omitempty"`
	URL           string            `json:"url"`
	Method        string            `json:"method"`
	Headers       map[string]string `json:"headers"`
	Status        record.Status     `json:"status"`
	// AttemptCount counts every attempt of the request's life, redrives
	// included; RunAttempts those of the current run (since submission or
	// the last redrive) that spent its budget of MaxRetries+1.
	AttemptCount    int               `json:"attemptCount"`
	RunAttempts     int               `json:"runAttempts"`
	MaxRetries      int               `json:"maxRetries"`
	BackoffMs       int64             `json:"backoffMs"`
	MaxBackoffMs    int64             `json:"maxBackoffMs"`
	TimeoutMs       int64             `json:"timeoutMs"`
	NextRetryAt     *string           `json:"nextRetryAt"`
	LastError       *string           `json:"lastError"`
	LastStatusCode  *int              `json:"lastStatusCode"`
	FailureClass    *string           `json:"failureClass"`
	Result          *string           `json:"result"`
	ResultTruncated bool              `json:"resultTruncated"`
	IdempotencyKey  *string           `json:"idempotencyKey"`
	RedriveCount    int               `json:"redriveCount"`
	CanceledBy      string            `json:"canceledBy,omitempty"`
	CreatedAt       *string           `json:"createdAt"`
	UpdatedAt       *string           `json:"updatedAt"`
	CompletedAt     *string           `json:"completedAt"`
	CallbackURL     *string           `json:"callbackUrl"`
	Callback        *CallbackDocument `json:"callback"`
	FlowControl     *FlowDocument     `json:"flowControl,omitempty"`
	// Credential and Proxy are the tenant's credentials the request named
	// (absent when it named none).
	Credential string `json:"credential,omitempty"`
	Proxy      string `json:"proxy,omitempty"`
	// WaitingFor says why a due request waits instead of starting (one of
	// record.WaitingReasons; no attempt is counted meanwhile), else null.
	WaitingFor *string            `json:"waitingFor"`
	Attempts   *[]AttemptDocument `json:"attempts,omitempty"`
	Redrives   []RedriveDocument  `json:"redrives"`
	// ResentFrom is the resend that made this request (null for one
	// submitted); Resends are the ids of the requests resent from it.
	ResentFrom *ResentDocument `json:"resentFrom"`
	Resends    []string        `json:"resends"`
	// Expunged: the body, headers, result and response bodies were
	// erased (at ExpungedAt, by ExpungedBy); what shows of them is empty
	// because of that.
	Expunged   bool    `json:"expunged"`
	ExpungedAt *string `json:"expungedAt"`
	ExpungedBy *string `json:"expungedBy"`
}

// ResentDocument is the audit of the resend that made a request.
type ResentDocument struct {
	ID     string  `json:"id"`
	At     *string `json:"at"`
	Actor  string  `json:"actor"`
	Reason *string `json:"reason"`
}

// FlowDocument is a request's flowControl as submitted.
type FlowDocument struct {
	Key         string `json:"key,omitempty"`
	Parallelism int    `json:"parallelism,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	PeriodMs    int64  `json:"periodMs,omitempty"`
}

// CallbackDocument is the state of a request's outcome callback.
type CallbackDocument struct {
	URL            string  `json:"url"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	LastStatusCode *int    `json:"lastStatusCode"`
	LastError      *string `json:"lastError"`
	UpdatedAt      *string `json:"updatedAt"`
}

// RedriveDocument is one audited redrive.
type RedriveDocument struct {
	N                    int     `json:"n"`
	At                   *string `json:"at"`
	Actor                string  `json:"actor"`
	Reason               string  `json:"reason"`
	PreviousFailureClass *string `json:"previousFailureClass"`
	PreviousAttemptCount int     `json:"previousAttemptCount"`
	Outcome              *string `json:"outcome"`
}

// AttemptDocument is one attempt in a Document.
type AttemptDocument struct {
	N            int     `json:"n"`
	StartedAt    *string `json:"startedAt"`
	DurationMs   *int64  `json:"durationMs"`
	StatusCode   *int    `json:"statusCode"`
	Outcome      string  `json:"outcome"`
	FailureClass *string `json:"failureClass"`
	Error        *string `json:"error"`
	ResponseBody *string `json:"responseBody"`
	// Expunged: the response body was erased with the request's payload.
	Expunged bool `json:"expunged,omitempty"`
	// Called is false for an entry that made no call (its endpoint stayed
	// open, or the destination rules refused the address before dialling):
	// it says what stopped the attempt, and is not counted as one.
	Called bool `json:"called"`
	// Credential and Proxy name what the attempt used (omitted: none).
	Credential string `json:"credential,omitempty"`
	Proxy      string `json:"proxy,omitempty"`
}

// NewDocument renders r as of now. Attempts are included when
// withAttempts is set (the single-request view); lists leave them out to
// stay small.
func NewDocument(r *record.Request, withAttempts bool, now time.Time) Document {
	d := Document{
		ID:              r.ID,
		Tenant:          r.Tenant,
		Topic:           r.Topic,
		PublicationID:   r.Publication,
		Credential:      r.Credential,
		Proxy:           r.Proxy,
		URL:             redact.URL(r.URL),
		Method:          r.Method,
		Headers:         redactFields(Redact(r.Headers), r),
		Status:          r.Status,
		AttemptCount:    r.AttemptCount,
		RunAttempts:     r.BudgetUsed,
		MaxRetries:      r.MaxRetries,
		BackoffMs:       r.BackoffMs,
		MaxBackoffMs:    r.MaxBackoffMs,
		TimeoutMs:       r.TimeoutMs,
		LastError:       strPtr(redact.Text(r.LastError)),
		LastStatusCode:  intPtr(r.LastStatusCode),
		FailureClass:    strPtr(r.FailureClass),
		ResultTruncated: r.ResultTruncated,
		IdempotencyKey:  strPtr(r.IdempotencyKey),
		RedriveCount:    r.RedriveCount,
		CanceledBy:      r.CanceledBy,
		CreatedAt:       timePtr(r.CreatedAt),
		UpdatedAt:       timePtr(r.UpdatedAt),
		CompletedAt:     timePtr(r.CompletedAt),
		CallbackURL:     strPtr(redact.URL(r.CallbackURL)),
		Redrives:        make([]RedriveDocument, 0, len(r.Redrives)),
		Resends:         append([]string{}, r.Resends...),
		Expunged:        r.Expunged,
		ExpungedAt:      timePtr(r.ExpungedAt),
		ExpungedBy:      strPtr(r.ExpungedBy),
	}
	if rf := r.ResentFrom; rf != nil {
		d.ResentFrom = &ResentDocument{ID: rf.ID, At: timePtr(time.UnixMilli(rf.AtMs)), Actor: rf.Actor, Reason: strPtr(rf.Reason)}
	}
	if fc := r.FlowControl; fc != nil {
		d.FlowControl = &FlowDocument{Key: fc.Key, Parallelism: fc.Parallelism, Rate: fc.Rate, PeriodMs: fc.PeriodMs}
	}
	if !r.Status.Terminal() {
		d.WaitingFor = strPtr(r.WaitingFor)
	}
	for _, rd := range r.Redrives {
		d.Redrives = append(d.Redrives, RedriveDocument{
			N: rd.N, At: timePtr(rd.At), Actor: rd.Actor, Reason: rd.Reason,
			PreviousFailureClass: strPtr(rd.PreviousFailureClass), PreviousAttemptCount: rd.PreviousAttemptCount,
			Outcome: rd.Outcome,
		})
	}
	if cb := r.Callback; cb != nil {
		d.Callback = &CallbackDocument{
			URL: redact.URL(r.CallbackURL), Status: cb.Status, Attempts: cb.Attempts, LastStatusCode: intPtr(cb.LastStatusCode),
			LastError: strPtr(redact.Text(cb.LastError)), UpdatedAt: timePtr(cb.UpdatedAt),
		}
	}
	d.NextRetryAt = timePtr(NextStart(r, now))
	if r.HasResult {
		res := r.Result
		d.Result = &res
	}
	if withAttempts {
		attempts := make([]AttemptDocument, 0, len(r.Attempts))
		for _, a := range r.Attempts {
			attempts = append(attempts, AttemptDocument{
				N:            a.N,
				StartedAt:    timePtr(a.StartedAt),
				DurationMs:   a.DurationMs,
				StatusCode:   intPtr(a.StatusCode),
				Outcome:      a.Outcome,
				FailureClass: strPtr(a.FailureClass),
				Error:        strPtr(redact.Text(a.Error)),
				ResponseBody: a.ResponseBody,
				Expunged:     r.Expunged,
				Called:       !a.NotCalled,
				Credential:   a.Credential,
				Proxy:        a.Proxy,
			})
		}
		d.Attempts = &attempts
	}
	return d
}

// NextStart is when retryd starts r's next attempt as seen at now: its due
// time, or the time its wait ends; zero when none is known, because r is
// finished, an attempt is under way, or an event (a resume, a free slot)
// starts it. Never a time before now: a request already due waits for a
// worker's free slot, an event too. (Its past due time would read as a
// promise broken; "now" would move on every read, and would be earlier
// than an attempt that began while the document was being written.)
func NextStart(r *record.Request, now time.Time) time.Time {
	if r.Status.Terminal() || r.InFlight {
		return time.Time{}
	}
	at := r.NextAttemptAt
	if r.WaitingFor != "" {
		if r.WaitUntil.IsZero() {
			return time.Time{}
		}
		at = r.WaitUntil
	}
	if at.Before(now) {
		return time.Time{}
	}
	return at
}

// Redacted is what a secret value is replaced with.
const Redacted = redact.Mask

// Redact returns a copy of h with secret values replaced by Redacted.
func Redact(h map[string]string) map[string]string { return redact.Headers(h) }

// redactFields masks, beyond retryd's own redaction, the headers a QStash
// message asked to hide (Upstash-Redact-Fields).
func redactFields(h map[string]string, r *record.Request) map[string]string {
	if r.QStash == nil || r.QStash.Redact == nil {
		return h
	}
	for k := range h {
		if r.QStash.Redact.Header(k) {
			h[k] = redact.Mask
		}
	}
	return h
}
