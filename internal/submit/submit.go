// Package submit decodes and validates a submission (the body of
// POST /requests) into a new request record. Every rule of the API's field
// table lives here, and every rejection names the field at fault.
package submit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/jsonobj"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
)

// Bounds and defaults of the submission fields.
const (
	MaxBytes          = 256 << 10
	MaxURLLen         = 2048
	MaxHeaders        = 64
	MaxHeaderBytes    = 16 << 10
	DefaultMaxRetries = 5
	MaxMaxRetries     = 25
	DefaultBackoffMs  = 1000
	MinBackoffMs      = 100
	MaxBackoffMs      = 3_600_000
	DefaultMaxBackoff = 3_600_000
	MaxMaxBackoffMs   = 7 * 24 * 3_600_000
	DefaultTimeoutMs  = 30_000
	MinTimeoutMs      = 100
	MaxTimeoutMs      = 900_000
	MaxDelay          = 365 * 24 * time.Hour
	MaxIdemKeyLen     = names.MaxIdempotencyKey
)

// Methods are the accepted HTTP methods.
var Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// Error is a rejected submission: which field, and why. Field is empty when
// the body as a whole is wrong (not JSON, not an object).
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func fieldErr(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
}

// fields is a submission split into its raw members, so every member is
// decoded on its own and a type error names exactly that member.
type fields map[string]json.RawMessage

func (f fields) raw(name string) (json.RawMessage, bool) {
	raw, ok := f[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func (f fields) str(name string) (*string, error) {
	raw, ok := f.raw(name)
	if !ok {
		return nil, nil
	}
	if s, ok := jsonobj.PlainString(raw); ok {
		return &s, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, fieldErr(name, "must be a string")
	}
	return &s, nil
}

// integer reads an integer member; 2.5, "5" and 1e99 are refused rather
// than silently converted.
func (f fields) integer(name string, def, lo, hi int64) (int64, bool, error) {
	raw, ok := f.raw(name)
	if !ok {
		return def, false, nil
	}
	var n json.Number
	if raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, false, fieldErr(name, "must be an integer between %d and %d", lo, hi)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, false, fieldErr(name, "must be an integer between %d and %d", lo, hi)
	}
	if v < lo || v > hi {
		return 0, false, fieldErr(name, "must be between %d and %d, got %d", lo, hi, v)
	}
	return v, true, nil
}

// Known are the members a submission may have.
var Known = []string{"url", "method", "headers", "body", "maxRetries", "backoffMs", "maxBackoffMs",
	"timeoutMs", "delayMs", "notBefore", "callbackUrl", "flowControl", "credential", "proxy"}

// Bounds of flowControl.
const (
	MaxFlowKeyLen     = names.MaxFlowKey
	MaxParallelism    = 10_000
	MaxFlowRate       = 1_000_000
	MinFlowPeriodMs   = 1000
	MaxFlowPeriodMs   = 7 * 24 * 3_600_000
	DefaultFlowPeriod = 1000
)

// flowControlFields are the members of flowControl.
var flowControlFields = []string{"key", "parallelism", "rate", "periodMs"}

// flowControl decodes the flowControl member: {key, parallelism, rate,
// periodMs}, each optional, periodMs only with rate.
func flowControl(raw json.RawMessage) (*record.FlowControl, error) {
	var f fields
	if raw[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return nil, fieldErr("flowControl", "must be an object like {\"key\": \"tenant-1\", \"parallelism\": 2, \"rate\": 10, \"periodMs\": 1000}")
	}
	var unknown []string
	for name := range f {
		if !contains(flowControlFields, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fieldErr("flowControl."+unknown[0], "is not a flowControl member; it has only %s", strings.Join(flowControlFields, ", "))
	}
	nested := func(err error) error {
		var e *Error
		if errors.As(err, &e) {
			e.Field = "flowControl." + e.Field
		}
		return err
	}
	fc := &record.FlowControl{}
	key, err := f.str("key")
	if err != nil {
		return nil, nested(err)
	}
	if key != nil {
		if *key == "" || names.FlowKey.Check("flowControl.key", *key) != nil {
			return nil, fieldErr("flowControl.key", "must be 1 to %d bytes without control characters", MaxFlowKeyLen)
		}
		fc.Key = *key
	}
	parallelism, _, err := f.integer("parallelism", 0, 1, MaxParallelism)
	if err != nil {
		return nil, nested(err)
	}
	rate, hasRate, err := f.integer("rate", 0, 1, MaxFlowRate)
	if err != nil {
		return nil, nested(err)
	}
	period, hasPeriod, err := f.integer("periodMs", DefaultFlowPeriod, MinFlowPeriodMs, MaxFlowPeriodMs)
	if err != nil {
		return nil, nested(err)
	}
	if hasPeriod && !hasRate {
		return nil, fieldErr("flowControl.periodMs", "needs rate: periodMs is the period rate counts in")
	}
	fc.Parallelism, fc.Rate = int(parallelism), int(rate)
	if hasRate {
		fc.PeriodMs = period
	}
	return fc, nil
}

// Parse decodes body into a new pending request created at now. It does
// not assign an id and does not check destination safety (that needs DNS;
// the caller does it). An unknown member is refused and named: a typo such
// as "mehtod" must not silently send a GET, and a document that is not a
// submission (a callback aimed back at retryd) must not pass for one.
func Parse(body []byte, now time.Time) (*record.Request, error) {
	if f, ok := jsonobj.Members(body); ok {
		return parseFields(f, now)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &Error{Message: "request body is empty; send a JSON object"}
	}
	var f fields
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &Error{Message: "request body must be a JSON object"}
		}
		return nil, &Error{Message: "request body is not valid JSON: " + err.Error()}
	}
	if f == nil {
		return nil, &Error{Message: "request body must be a JSON object"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Message: "request body must hold exactly one JSON object"}
	}
	return parseFields(f, now)
}

func parseFields(f fields, now time.Time) (*record.Request, error) {
	if err := unknownMember(f); err != nil {
		return nil, err
	}
	r := &record.Request{Status: record.Pending, CreatedAt: now, NextAttemptAt: now, Headers: map[string]string{}}
	rawURL, err := f.str("url")
	if err != nil {
		return nil, err
	}
	if rawURL == nil || *rawURL == "" {
		return nil, fieldErr("url", "is required")
	}
	u, err := egress.ValidateURL(*rawURL)
	if err != nil {
		return nil, fieldErr("url", "%s", err)
	}
	r.URL, r.Host = *rawURL, strings.ToLower(u.Hostname())

	r.Method = "GET"
	method, err := f.str("method")
	if err != nil {
		return nil, err
	}
	if method != nil && *method != "" {
		m := strings.ToUpper(*method)
		if !contains(Methods, m) {
			return nil, fieldErr("method", "must be one of %s", strings.Join(Methods, ", "))
		}
		r.Method = m
	}
	if raw, ok := f.raw("headers"); ok {
		h, ok := jsonobj.PlainStrings(raw)
		if !ok && json.Unmarshal(raw, &h) != nil {
			return nil, fieldErr("headers", "must be an object of string values")
		}
		if err := checkHeaders(h); err != nil {
			return nil, err
		}
		for k, v := range h {
			r.Headers[http.CanonicalHeaderKey(k)] = v
		}
	}
	body, err := f.str("body")
	if err != nil {
		return nil, err
	}
	if body != nil {
		r.Body = *body
	}

	maxRetries, _, err := f.integer("maxRetries", DefaultMaxRetries, 0, MaxMaxRetries)
	if err != nil {
		return nil, err
	}
	r.MaxRetries = int(maxRetries)
	if r.BackoffMs, _, err = f.integer("backoffMs", DefaultBackoffMs, MinBackoffMs, MaxBackoffMs); err != nil {
		return nil, err
	}
	if r.MaxBackoffMs, _, err = f.integer("maxBackoffMs", DefaultMaxBackoff, MinBackoffMs, MaxMaxBackoffMs); err != nil {
		return nil, err
	}
	if r.MaxBackoffMs < r.BackoffMs {
		return nil, fieldErr("maxBackoffMs", "must be at least backoffMs (%d)", r.BackoffMs)
	}
	if r.TimeoutMs, _, err = f.integer("timeoutMs", DefaultTimeoutMs, MinTimeoutMs, MaxTimeoutMs); err != nil {
		return nil, err
	}

	delay, hasDelay, err := f.integer("delayMs", 0, 0, MaxDelay.Milliseconds())
	if err != nil {
		return nil, err
	}
	notBefore, err := f.str("notBefore")
	if err != nil {
		return nil, err
	}
	switch {
	case hasDelay && notBefore != nil:
		return nil, fieldErr("notBefore", "cannot be combined with delayMs; send one of them")
	case hasDelay:
		r.NextAttemptAt = now.Add(time.Duration(delay) * time.Millisecond)
	case notBefore != nil:
		t, err := time.Parse(time.RFC3339Nano, *notBefore)
		if err != nil {
			// The example is a day from now: always one the limit takes.
			return nil, fieldErr("notBefore", "must be an RFC 3339 time within 365 days, such as %s",
				now.Add(24*time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339))
		}
		if t.After(now.Add(MaxDelay)) {
			return nil, fieldErr("notBefore", "must be at most 365 days ahead")
		}
		// A time in the past means "as soon as possible", as in Cloud Tasks.
		if t.After(now) {
			r.NextAttemptAt = t
		}
	}

	callback, err := f.str("callbackUrl")
	if err != nil {
		return nil, err
	}
	if callback != nil && *callback != "" {
		if _, err := egress.ValidateURL(*callback); err != nil {
			return nil, fieldErr("callbackUrl", "%s", err)
		}
		r.CallbackURL = *callback
	}
	if raw, ok := f.raw("flowControl"); ok {
		if r.FlowControl, err = flowControl(raw); err != nil {
			return nil, err
		}
	}
	if r.Credential, err = credentialName(f, "credential"); err != nil {
		return nil, err
	}
	if r.Proxy, err = credentialName(f, "proxy"); err != nil {
		return nil, err
	}
	return r, nil
}

// credentialName reads a member that names one of the tenant's
// credentials, through the one validator of credential names. Whether the
// tenant has it is the caller's to ask (it needs the store).
func credentialName(f fields, field string) (string, error) {
	v, err := f.str(field)
	if err != nil || v == nil {
		return "", err
	}
	if *v == "" {
		return "", fieldErr(field, "must name a credential (1 to %d bytes), or be left out", names.MaxCredential)
	}
	var nameErr *names.Error
	if err := names.Credential.Check(field, *v); errors.As(err, &nameErr) {
		return "", &Error{Field: field, Message: nameErr.Message}
	}
	return *v, nil
}

// unknownMember names the first member (in sorted order, so the answer is
// stable) that is not a submission field.
func unknownMember(f fields) error {
	var unknown []string
	for name := range f {
		if !contains(Known, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return &Error{Field: names.Short(unknown[0]), Message: fmt.Sprintf("unknown field %s; a submission has only %s", names.Quote(unknown[0]), strings.Join(Known, ", "))}
}

// hopByHop are the headers a client may not set: they describe one
// connection, not the request, and Host/Content-Length are retryd's to set.
var hopByHop = []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Te", "Trailer", "Upgrade", "Host", "Content-Length"}

// Framing reports whether header name (canonical) is one a client may not
// set: hop-by-hop, Proxy-*, Host or Content-Length.
func Framing(name string) bool {
	return contains(hopByHop, name) || strings.HasPrefix(name, "Proxy-")
}

// CheckHeaders applies a submission's rules for headers to h (those a
// callback's call carries, say).
func CheckHeaders(h map[string]string) error { return checkHeaders(h) }

func checkHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return fieldErr("headers", "must have at most %d entries, got %d", MaxHeaders, len(h))
	}
	total := 0
	seen := make(map[string]bool, len(h))
	for k, v := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fieldErr("headers", "has an invalid header name %q", k)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return fieldErr("headers", "header %q has an invalid value (control characters are not allowed)", k)
		}
		ck := http.CanonicalHeaderKey(k)
		if seen[ck] {
			return fieldErr("headers", "names %q twice (header names are case-insensitive)", ck)
		}
		seen[ck] = true
		if Framing(ck) {
			return fieldErr("headers", "must not set %q: hop-by-hop headers, Host and Content-Length are set by retryd", ck)
		}
		total += len(k) + len(v)
	}
	if total > MaxHeaderBytes {
		return fieldErr("headers", "must total at most %d bytes, got %d", MaxHeaderBytes, total)
	}
	return nil
}

// ValidIdempotencyKey checks an Idempotency-Key header value.
func ValidIdempotencyKey(k string) error {
	if names.IdempotencyKey.Check("Idempotency-Key", k) != nil {
		return &Error{Field: "Idempotency-Key", Message: fmt.Sprintf("Idempotency-Key must be at most %d bytes without control characters", MaxIdemKeyLen)}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
