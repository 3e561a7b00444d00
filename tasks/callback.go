package tasks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/sign"
	"github.com/retryd/retryd/internal/workflow/invoke"
)

// TypeCallback is the asynq task type of an outcome callback; its payload
// is the request id.
const TypeCallback = "retryd:callback"

// The callback's retry policy is the submission defaults.
const (
	callbackMaxAttempts = 6 // 5 retries
	callbackTimeout     = 30 * time.Second
)

var callbackPolicy = retry.Policy{Base: time.Second, Max: time.Hour}

// SignatureHeader carries the HMAC of a callback body.
const SignatureHeader = "Retryd-Signature"

// Sign returns the Retryd-Signature value of body: sha256=<hex HMAC-SHA256>.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// EnqueueCallback schedules the outcome callback of request id. One exists
// per request at a time (the task id is derived from the request id).
func (e *Enqueuer) EnqueueCallback(ctx context.Context, id string) error {
	err := e.Waiting.Enqueue(ctx, e.Client, asynq.NewTask(TypeCallback, []byte(id)), id, time.Time{},
		asynq.TaskID(CallbackTaskID(id)), asynq.Queue(e.QueueOf(id)), asynq.MaxRetry(maxAsynqRetry),
		asynq.Timeout(TaskTimeout(callbackTimeout)))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

// CallbackWebhookID is the webhook-id of request id's outcome callback.
func CallbackWebhookID(id string) string { return id + "_callback" }

// CallbackTaskID is the asynq task id of request id's outcome callback.
func CallbackTaskID(id string) string { return "callback:" + id }

// CallbackStore is the part of the record store callbacks need.
type CallbackStore interface {
	Get(ctx context.Context, id string) (*record.Request, error)
	CallbackAttempt(ctx context.Context, id, status string, code int, errText string, now time.Time) (int, error)
	DropCallback(ctx context.Context, id string) error
}

// callbackTarget is where request r's outcome is posted: its callbackUrl;
// for a QStash message, its callback on success and its failure callback
// on failure. "" means none.
func callbackTarget(r *record.Request) string {
	if r.Dialect != record.DialectQStash {
		return r.CallbackURL
	}
	switch {
	case r.Status == record.Completed:
		return r.CallbackURL
	case r.Status == record.Failed && r.QStash != nil:
		return r.QStash.FailureCallback
	}
	return ""
}

// QStashCallback is the body QStash posts to a message's callback and
// failure callback: the destination's last answer and the message.
type QStashCallback struct {
	Status          int                 `json:"status"`
	Header          map[string][]string `json:"header"`
	Body            string              `json:"body"` // base64
	Retried         int                 `json:"retried"`
	MaxRetries      int                 `json:"maxRetries"`
	SourceMessageID string              `json:"sourceMessageId"`
	URL             string              `json:"url"`
	Method          string              `json:"method"`
	SourceHeader    map[string][]string `json:"sourceHeader"`
	SourceBody      string              `json:"sourceBody"` // base64
	NotBefore       int64               `json:"notBefore"`
	CreatedAt       int64               `json:"createdAt"`
	ScheduleID      string              `json:"scheduleId,omitempty"`
	DLQID           string              `json:"dlqId,omitempty"`
	// The Upstash Workflow run of a step's message (its failure function
	// replays the run from SourceBody, the step's delivered body).
	WorkflowRunID     string `json:"workflowRunId,omitempty"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt,omitempty"`
}

// qstashCallback is r's callback body, shown as every other view of r
// is: the URL's secrets, secret headers and the fields the message's
// Upstash-Redact-Fields names are masked (a failure callback may go to
// another party than the destination, and is often logged whole).
func qstashCallback(r *record.Request) QStashCallback {
	cb := QStashCallback{Status: r.LastStatusCode, Header: map[string][]string{}, MaxRetries: r.MaxRetries,
		SourceMessageID: r.ID, URL: redact.URL(r.URL), Method: r.Method, SourceHeader: map[string][]string{},
		SourceBody: base64.StdEncoding.EncodeToString([]byte(r.Body)), CreatedAt: r.CreatedAt.UnixMilli(),
		NotBefore: r.CreatedAt.UnixMilli()}
	if n := len(r.Attempts); n > 0 {
		last := r.Attempts[n-1]
		cb.Retried = n - 1
		for k, v := range last.ResponseHeaders {
			cb.Header[k] = []string{v}
		}
		if last.ResponseBody != nil {
			cb.Body = base64.StdEncoding.EncodeToString([]byte(*last.ResponseBody))
		}
	}
	if r.HasResult && (r.Status == record.Completed || r.Status == record.Failed) {
		// A failed message's result is the answer that failed it, kept
		// whole for its failure callback.
		cb.Body = base64.StdEncoding.EncodeToString([]byte(r.Result))
	}
	for k, v := range redact.Headers(r.Headers) {
		if r.QStash != nil && r.QStash.Redact.Header(k) {
			v = redact.Mask
		}
		cb.SourceHeader[k] = []string{v}
	}
	if r.QStash != nil {
		cb.ScheduleID = r.QStash.ScheduleID
		if r.QStash.Redact != nil && r.QStash.Redact.Body {
			cb.SourceBody = "" // as GET /v2/messages shows a redacted body
		}
	}
	if r.Status == record.Failed {
		cb.DLQID = r.ID // a failed message's DLQ id is its id
	}
	return cb
}

// CallbackHandler POSTs a finished request's document to its callbackUrl.
// Its outcome is recorded in the request's callback state and never changes
// the request's own status.
type CallbackHandler struct {
	Store  CallbackStore
	Client *http.Client
	Secret string // CALLBACK_SIGNING_SECRET; no signature when empty
	// Signer signs callbacks (Standard Webhooks) of a tenant without
	// signing secrets of its own; nil signs nothing.
	Signer *sign.Webhooks
	// Credentials hold the tenants' own signing secrets; nil: none.
	Credentials *credentials.Book
	// QStash signs the callbacks of /v2 messages; nil signs nothing.
	QStash *sign.QStash
	// Workflows hold the Upstash Workflow runs; nil: a step's callback
	// carries its own body.
	Workflows WorkflowLogs
	// Invokes return a failed step's run's failure to the run that
	// invoked it; nil: none is told.
	Invokes Invokes
	Log     *slog.Logger
	Now     func() time.Time
}

// ProcessTask implements asynq.Handler.
func (h *CallbackHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	id := string(t.Payload())
	r, err := h.Store.Get(ctx, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: load %s for its callback: %w", retry.ErrInfrastructure, id, err)
	}
	if r.Callback == nil || r.Callback.Status == "delivered" || r.Callback.Status == "failed" || !r.Status.Terminal() {
		return nil
	}
	target := callbackTarget(r)
	if target == "" {
		// A QStash message calls back on one outcome only (its callback
		// on success, its failure callback on failure, none on cancel).
		if err := h.Store.DropCallback(ctx, id); err != nil {
			return fmt.Errorf("%w: drop callback of %s: %w", retry.ErrInfrastructure, id, err)
		}
		return nil
	}
	if r.Status == record.Failed && h.Invokes != nil && r.QStash != nil && r.QStash.WorkflowRun != "" {
		// A step of an invoked run failed: its failure returns to the
		// run that invoked it, here too, where a failure to return is
		// retried with the callback (the attempt's handler tried once).
		if _, err := h.Invokes.Return(ctx, r.Tenant, r.QStash.WorkflowRun, invoke.Outcome{Failed: true}); err != nil && !errors.Is(err, invoke.ErrParentEnded) {
			return fmt.Errorf("%w: return the failure of workflow run %s: %w", retry.ErrInfrastructure, r.QStash.WorkflowRun, err)
		}
	}
	var doc any = apidoc.NewDocument(r, false, h.Now())
	if r.Dialect == record.DialectQStash {
		cb := qstashCallback(r)
		if err := h.workflowSource(ctx, r, &cb); err != nil {
			return fmt.Errorf("%w: callback of %s: %w", retry.ErrInfrastructure, id, err)
		}
		doc = cb
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode callback of %s: %w: %w", id, err, asynq.SkipRetry)
	}
	code, callErr := h.post(ctx, r, target, body)
	now := h.Now()
	var resp *http.Response
	if callErr == nil {
		resp = &http.Response{StatusCode: code, Header: http.Header{}}
	}
	res := retry.Classify(resp, callErr, now)
	errText := ""
	switch {
	case callErr != nil:
		errText = redact.Text(callErr.Error())
	case res.Kind != retry.Success:
		errText = fmt.Sprintf("callback answered %d %s", code, http.StatusText(code))
	}
	status := "pending"
	switch {
	case res.Kind == retry.Success:
		status = "delivered"
	case res.Kind == retry.Permanent || r.Callback.Attempts+1 >= callbackMaxAttempts:
		status = "failed"
	}
	attempts, err := h.Store.CallbackAttempt(context.WithoutCancel(ctx), id, status, code, errText, now)
	if errors.Is(err, record.ErrNotFound) {
		return nil // deleted past its retention meanwhile
	}
	if err != nil {
		return fmt.Errorf("%w: record callback of %s: %w", retry.ErrInfrastructure, id, err)
	}
	h.Log.Info("callback attempt", "requestId", id, "attempt", attempts, "statusCode", code, "status", status)
	switch status {
	case "delivered":
		return nil
	case "failed":
		return fmt.Errorf("callback of %s failed: %s: %w", id, errText, asynq.SkipRetry)
	default:
		return retry.NotBefore(now.Add(callbackPolicy.Delay(attempts, rand.Float64())), errors.New(errText))
	}
}

// workflowSource fills in what a step of an Upstash Workflow run adds to
// its callback: the run, and as the source body the log the step's
// delivery carried, from which the failure function replays the run.
func (h *CallbackHandler) workflowSource(ctx context.Context, r *record.Request, cb *QStashCallback) error {
	q := r.QStash
	if q == nil || q.WorkflowRun == "" {
		return nil
	}
	cb.WorkflowRunID = q.WorkflowRun
	if sameOrigin(callbackTarget(r), r.URL) {
		// The failure function rebuilds the run's context from the
		// headers its steps were delivered with (an Authorization the
		// workflow checks, say): shown as sent to the party that got
		// them on every step, masked as usual for anyone else.
		for k, v := range r.Headers {
			if q.Redact == nil || !q.Redact.Header(k) {
				cb.SourceHeader[k] = []string{v}
			}
		}
	}
	if h.Workflows == nil {
		return nil
	}
	run, err := h.Workflows.Steps(ctx, r.Tenant, q.WorkflowRun, r.ID)
	if err != nil {
		return err
	}
	if run.Found {
		cb.WorkflowCreatedAt = run.CreatedAt.UnixMilli()
		if q.Redact == nil || !q.Redact.Body {
			cb.SourceBody = base64.StdEncoding.EncodeToString(run.Log)
		}
	}
	return nil
}

func (h *CallbackHandler) post(ctx context.Context, r *record.Request, target string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, callbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", retry.ErrInvalid, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "retryd/1")
	req.Header.Set(egress.RequestIDHeader, r.ID)
	if h.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(h.Secret, body))
	}
	// Signed like the tenant's deliveries: with its own secrets when it
	// has some.
	signer := h.Signer
	if h.Credentials != nil {
		if signer, err = h.Credentials.Signer(ctx, r.Tenant, h.Signer); err != nil {
			return 0, err
		}
	}
	// The callback is a message of its own: its webhook-id differs from
	// the deliveries' (a receiver deduping on it must not drop either).
	signer.Sign(req.Header, CallbackWebhookID(r.ID), h.Now(), body)
	if r.Dialect == record.DialectQStash {
		if q := r.QStash; q != nil {
			extra := q.CallbackHeaders
			if r.Status == record.Failed {
				extra = q.FailureHeaders
			}
			for k, v := range extra {
				req.Header.Set(k, v)
			}
		}
		req.Header.Set("User-Agent", "Upstash-QStash")
		req.Header.Set("Upstash-Message-Id", r.ID)
		if tok := h.QStash.Token(target, body, h.Now()); tok != "" {
			req.Header.Set("Upstash-Signature", tok)
		}
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// sameOrigin says whether URLs a and b have the same scheme, host and
// port.
func sameOrigin(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil {
		return false
	}
	ub, err := url.Parse(b)
	if err != nil {
		return false
	}
	return ua.Scheme == ub.Scheme && ua.Host != "" && strings.EqualFold(ua.Host, ub.Host)
}
