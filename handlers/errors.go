// Package handlers is retryd's HTTP API: gin handlers for requests
// (submit, read, list, cancel), the dead-letter queue and redrive,
// schedules, the health probes, and the access middleware (API keys, rate
// limit). Handlers depend on small interfaces declared here, not on Redis
// or asynq.
package handlers

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/submit"
)

// Code is an API error code.
type Code string

// The API error codes.
const (
	CodeInvalid            Code = "invalid_request"
	CodeUnauthorized       Code = "unauthorized"
	CodeForbidden          Code = "forbidden"
	CodeNotFound           Code = "not_found"
	CodeConflict           Code = "conflict"
	CodeTooLarge           Code = "payload_too_large"
	CodeUnsupportedMedia   Code = "unsupported_media_type"
	CodeBlockedDestination Code = "blocked_destination"
	CodeLoopDetected       Code = "loop_detected"
	// CodeInvalidCredential: a call names a credential its tenant does
	// not have, or one of the wrong type (a proxy as the credential).
	CodeInvalidCredential Code = "invalid_credential"
	CodeRateLimited       Code = "rate_limited"
	CodeUnavailable       Code = "unavailable"
	// CodeNotImplemented: this deployment cannot do it (no SECRETS_KEYS to
	// seal a credential with).
	CodeNotImplemented Code = "not_implemented"
	CodeInternal       Code = "internal"
)

// status is the one place API error codes become HTTP statuses.
func (c Code) status() int {
	switch c {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case CodeBlockedDestination, CodeLoopDetected, CodeInvalidCredential:
		return http.StatusUnprocessableEntity
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeNotImplemented:
		return http.StatusNotImplemented
	default:
		return http.StatusInternalServerError
	}
}

// Error is an error the API answers with.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds an API error.
func Errorf(code Code, field, message string) *Error {
	return &Error{Code: code, Message: message, Field: field}
}

// Abort answers err in the API's error shape and stops the handler chain.
// On a QStash route (/v2/…) it answers in QStash's shape,
// {"error": "..."}, whichever layer refuses (keys, rate limit, guards), so
// the official clients read the message there too.
func Abort(c *gin.Context, log *slog.Logger, err error) {
	apiErr := Resolve(c, log, err)
	if QStashPath(c.Request.URL.Path) {
		c.AbortWithStatusJSON(apiErr.Code.status(), gin.H{"error": apiErr.Message})
		return
	}
	c.AbortWithStatusJSON(apiErr.Code.status(), gin.H{"error": apiErr})
}

// QStashPath reports whether path is one of the QStash dialect's routes.
func QStashPath(path string) bool { return path == "/v2" || strings.HasPrefix(path, "/v2/") }

// Resolve turns err into the API error to answer (setting Retry-After
// where it belongs). Errors that are not API errors are mapped from the
// store's sentinels; anything unknown is logged and becomes a bare 500.
// Other dialects of the API (QStash's) render it in their own shape.
func Resolve(c *gin.Context, log *slog.Logger, err error) *Error {
	apiErr, retryAfter, logAs := explain(err)
	if logAs != "" {
		log.Error(logAs, "err", err, "path", c.FullPath())
	}
	if retryAfter != "" {
		c.Header("Retry-After", retryAfter)
	}
	return apiErr
}

// SkipReason is what a bulk call says of a request it did not act on
// because of err: the message a call on that request alone would get.
func SkipReason(err error) string {
	apiErr, _, _ := explain(err)
	return apiErr.Message
}

// explain maps err to the API error, the Retry-After it calls for and,
// for errors that are the server's, what to log them as.
func explain(err error) (apiErr *Error, retryAfter, logAs string) {
	var subErr *submit.Error
	var selErr *selection.Error
	var partial *PartialFanOut
	var nameErr *names.Error
	var filterErr *record.FilterError
	var limited *RateLimited
	var credErr *credentials.Error
	switch {
	case errors.As(err, &partial):
		inner, ra, l := explain(partial.Err)
		out := *inner
		out.Message += "; " + partial.describe()
		return &out, ra, l
	case errors.As(err, &apiErr):
	case errors.As(err, &limited):
		retryAfter = retryAfterSeconds(limited.RetryAfter)
		apiErr = Errorf(CodeRateLimited, "", limited.Message)
	case errors.As(err, &subErr):
		apiErr = Errorf(CodeInvalid, subErr.Field, subErr.Message)
	case errors.As(err, &selErr):
		apiErr = Errorf(CodeInvalid, selErr.Field, selErr.Message)
	case errors.As(err, &nameErr):
		apiErr = Errorf(CodeInvalid, nameErr.Field, nameErr.Message)
	case errors.As(err, &filterErr):
		apiErr = Errorf(CodeInvalid, filterErr.Field, filterErr.Message)
	case errors.As(err, &credErr) && credErr.Unprocessable:
		apiErr = Errorf(CodeBlockedDestination, credErr.Field, credErr.Message)
	case errors.As(err, &credErr):
		apiErr = Errorf(CodeInvalid, credErr.Field, credErr.Message)
	case errors.Is(err, credentials.ErrNoKeys):
		apiErr = Errorf(CodeNotImplemented, "", err.Error())
	case errors.Is(err, credentials.ErrTooManySecrets), errors.Is(err, credentials.ErrTooManyCredentials), errors.Is(err, credentials.ErrTooManySettings):
		apiErr = Errorf(CodeConflict, "", err.Error())
	case errors.Is(err, record.ErrNotFound):
		apiErr = Errorf(CodeNotFound, "", "no request with this id")
	case errors.Is(err, record.ErrRedriveLimit):
		apiErr = Errorf(CodeConflict, "", "redrive limit reached: this request was redriven REDRIVE_LIMIT times already; "+
			"submit it again as a new request (POST /requests with its url, method, headers and body), or raise REDRIVE_LIMIT")
	case errors.Is(err, record.ErrConflict):
		apiErr = Errorf(CodeConflict, "", err.Error())
	case errors.Is(err, selection.ErrBeyondCount), errors.Is(err, selection.ErrNoMatch):
		apiErr = Errorf(CodeConflict, "", err.Error())
	case errors.Is(err, record.ErrOwnerLimit):
		retryAfter = "60"
		apiErr = Errorf(CodeRateLimited, "", "this tenant (or, without keys, this client address) has too many unfinished requests; "+
			"wait for some to finish or cancel some (the cap is MAX_UNFINISHED_PER_KEY)")
	case errors.Is(err, record.ErrFull):
		logAs, retryAfter = "redis is out of memory", "5"
		apiErr = Errorf(CodeUnavailable, "", "Redis is out of memory: nothing was stored, retry later")
	case errors.Is(err, record.ErrUnavailable):
		logAs, retryAfter = "redis unavailable", "1"
		apiErr = Errorf(CodeUnavailable, "", "storage is unavailable; nothing was stored, retry later")
	default:
		logAs = "internal error"
		apiErr = Errorf(CodeInternal, "", "internal error")
	}
	return apiErr, retryAfter, logAs
}

// Status is the HTTP status of an API error.
func (e *Error) Status() int { return e.Code.status() }
