package tasks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/sign"
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
	_, err := e.Client.EnqueueContext(ctx, asynq.NewTask(TypeCallback, []byte(id)),
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
}

// CallbackHandler POSTs a finished request's document to its callbackUrl.
// Its outcome is recorded in the request's callback state and never changes
// the request's own status.
type CallbackHandler struct {
	Store  CallbackStore
	Client *http.Client
	Secret string // CALLBACK_SIGNING_SECRET; no signature when empty
	// Signer signs callbacks (Standard Webhooks); nil signs nothing.
	Signer *sign.Webhooks
	Log    *slog.Logger
	Now    func() time.Time
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
	body, err := json.Marshal(apidoc.NewDocument(r, false))
	if err != nil {
		return fmt.Errorf("encode callback of %s: %w: %w", id, err, asynq.SkipRetry)
	}
	code, callErr := h.post(ctx, r, body)
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

func (h *CallbackHandler) post(ctx context.Context, r *record.Request, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, callbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", retry.ErrInvalid, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "retryd/1")
	req.Header.Set(egress.RequestIDHeader, r.ID)
	if h.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(h.Secret, body))
	}
	// The callback is a message of its own: its webhook-id differs from
	// the deliveries' (a receiver deduping on it must not drop either).
	h.Signer.Sign(req.Header, CallbackWebhookID(r.ID), h.Now(), body)
	resp, err := h.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
