package retry

import (
	"context"
	"errors"
	"net"
	"net/http"
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
)

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
}

// Classify is the one place that decides what an attempt's result means.
// Exactly one of resp and err is meaningful: err is the transport error of
// an attempt that got no response.
func Classify(resp *http.Response, err error, now time.Time) Result {
	if err != nil {
		var nerr net.Error
		switch {
		case errors.Is(err, ErrBlocked):
			return Result{Kind: Permanent, Class: BlockedDestination}
		case errors.Is(err, ErrInvalid):
			return Result{Kind: Permanent, Class: ClientError}
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
