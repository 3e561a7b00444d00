package retry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// Kind is what an attempt's result means for the request.
type Kind string

// The attempt outcomes, as shown in the API.
const (
	Success     Kind = "success"
	Retryable   Kind = "retryable"
	Permanent   Kind = "permanent"
	Interrupted Kind = "interrupted"
	// Exhausted is the outcome recorded for a retryable failure that was
	// its run's last allowed attempt: the request failed on it, and
	// "retryable" would promise a retry that does not come.
	Exhausted Kind = "exhausted"
)

// FailureClass names why an attempt failed.
type FailureClass string

// The failure classes, as shown in the API.
const (
	ClientError        FailureClass = "client_error"
	Redirect           FailureClass = "redirect"
	ServerError        FailureClass = "server_error"
	RateLimited        FailureClass = "rate_limited"
	Timeout            FailureClass = "timeout"
	Network            FailureClass = "network"
	BlockedDestination FailureClass = "blocked_destination"
	// Interrupted: crashes cut record.MaxInterruptions attempts short, and
	// the request was ended rather than looping (no destination answer
	// decided it).
	InterruptedClass FailureClass = "interrupted"
	// EndpointDown ends a request whose endpoint stayed open (failing)
	// longer than BREAKER_FAIL_AFTER: no attempt was made.
	EndpointDown FailureClass = "endpoint_down"
	// CredentialFailed: retryd could not make the call's credential (its
	// token endpoint failed, or the credential is gone or unreadable): no
	// call was made.
	CredentialFailed FailureClass = "credential_error"
)

// CredentialError is an attempt stopped by its credential before any call:
// retried like a 5xx unless Permanent (a token endpoint's 4xx, a
// credential deleted).
type CredentialError struct {
	Permanent bool
	Err       error
}

func (e *CredentialError) Error() string { return "credential: " + e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

// ErrBlocked marks an error caused by the destination safety rules (the
// egress guard wraps it); such an attempt is permanent.
var ErrBlocked = errors.New("destination blocked by safety rules")

// ErrInvalid marks a request retryd cannot even send (it passed validation
// but the HTTP library refuses it); such an attempt is permanent.
var ErrInvalid = errors.New("request cannot be sent")

// Result is the classification of one attempt.
type Result struct {
	Kind  Kind
	Class FailureClass // empty on success
	// RetryAfter is the destination's own Retry-After (429 and 503 only).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// NoCall says retryd made no call to the destination: it refused to
	// send the request before dialling (the destination rules, or a
	// request the HTTP library cannot build). Such an attempt is recorded
	// with what stopped it, and counted nowhere attempts are counted.
	NoCall bool
}

// Rules names whose retry rules judge an attempt: the API a request came
// through decides, since its clients were promised different things.
type Rules uint8

const (
	// RetrydRules are retryd's own API's: most 4xx and 3xx are permanent
	// (the request itself is wrong), Retry-After is read on 429 and 503.
	RetrydRules Rules = iota
	// QStashRules are QStash's (/v2): every non-2xx answer is retried,
	// but a 489 with Upstash-NonRetryable-Error: true, which fails the
	// message at once; Retry-After and X-RateLimit-Reset(-Requests|
	// -Tokens) are read on any of them, capped at a day.
	QStashRules
)

// NonRetryableStatus with NonRetryableHeader: true is how a destination
// tells QStash not to retry a message.
const (
	NonRetryableStatus = 489
	NonRetryableHeader = "Upstash-NonRetryable-Error"
)

// qstashRetryAfterCap is QStash's longest wait before a retry (its
// backoff's own cap).
const qstashRetryAfterCap = 24 * time.Hour

// MaxRetryAfter is what the longest Retry-After reads as. A longer one
// (of any size or spelling) is this, so it cannot overflow a Duration
// or be mistaken for garbage; each caller caps it further.
const MaxRetryAfter = 365 * 24 * time.Hour

// qstashRetryAfterHeaders are read in this order; the first that parses
// gives the wait.
var qstashRetryAfterHeaders = []string{"Retry-After", "X-RateLimit-Reset", "X-RateLimit-Reset-Requests", "X-RateLimit-Reset-Tokens"}

// Classify judges an attempt by retryd's own API's rules.
func Classify(resp *http.Response, err error, now time.Time) Result {
	return RetrydRules.Classify(resp, err, now)
}

// Classify is the one place that decides what an attempt's result means.
// Exactly one of resp and err is meaningful: err is the transport error of
// an attempt that got no response. Transport errors mean the same under
// every rules.
func (rules Rules) Classify(resp *http.Response, err error, now time.Time) Result {
	if err == nil && rules == QStashRules {
		return classifyQStash(resp, now)
	}
	if err != nil {
		var nerr net.Error
		var cerr *CredentialError
		switch {
		case errors.As(err, &cerr):
			if cerr.Permanent {
				return Result{Kind: Permanent, Class: CredentialFailed, NoCall: true}
			}
			return Result{Kind: Retryable, Class: CredentialFailed, NoCall: true}
		case errors.Is(err, ErrBlocked):
			return Result{Kind: Permanent, Class: BlockedDestination, NoCall: true}
		case errors.Is(err, ErrInvalid):
			return Result{Kind: Permanent, Class: ClientError, NoCall: true}
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
			return Result{Kind: Retryable, Class: Timeout}
		default:
			// DNS failures, refused or reset connections, TLS errors.
			return Result{Kind: Retryable, Class: Network}
		}
	}
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return Result{Kind: Success}
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		r := Result{Kind: Retryable, Class: ServerError}
		if code == http.StatusTooManyRequests {
			r.Class = RateLimited
		}
		r.RetryAfter, r.HasRetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), now)
		return r
	case code == http.StatusRequestTimeout:
		return Result{Kind: Retryable, Class: Timeout}
	case code == http.StatusTooEarly:
		return Result{Kind: Retryable, Class: RateLimited}
	case code >= 500:
		return Result{Kind: Retryable, Class: ServerError}
	case code >= 300 && code < 400:
		return Result{Kind: Permanent, Class: Redirect}
	default:
		// Other 4xx (and anything unexpected, e.g. 1xx left over): the
		// request itself is wrong; sending it again cannot help.
		return Result{Kind: Permanent, Class: ClientError}
	}
}

// classifyQStash judges an answer as QStash does: anything but a 2xx is
// retried, unless the destination said it must not be (489 with
// Upstash-NonRetryable-Error: true).
func classifyQStash(resp *http.Response, now time.Time) Result {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return Result{Kind: Success}
	}
	if code == NonRetryableStatus && strings.EqualFold(strings.TrimSpace(resp.Header.Get(NonRetryableHeader)), "true") {
		return Result{Kind: Permanent, Class: ClientError}
	}
	// The failure class still says what the answer was: only the decision
	// to retry differs from retryd's own rules.
	r := RetrydRules.Classify(resp, nil, now)
	r.Kind, r.RetryAfter, r.HasRetryAfter = Retryable, 0, false
	for _, name := range qstashRetryAfterHeaders {
		if d, ok := ParseRetryAfter(resp.Header.Get(name), now); ok {
			r.RetryAfter, r.HasRetryAfter = min(d, qstashRetryAfterCap), true
			break
		}
	}
	return r
}
