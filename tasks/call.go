package tasks

// The HTTP call of an attempt.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
)

// ErrShutdown is the reason of an attempt the worker's shutdown cut short.
var ErrShutdown = errors.New("worker shutting down; attempt interrupted")

// call makes attempt n of r under its own deadline, with the headers
// extra (its trace's) set over the request's own, and gives up when the
// worker must stop. use is the credential and proxy it used (nil when
// none applied, or retryd has no credentials); an error of theirs is a
// *retry.CredentialError, and no call was made.
func (h *Handler) call(ctx context.Context, r *record.Request, n int, extra http.Header) (resp *http.Response, body []byte, truncated bool, use *credentials.Use, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(r.TimeoutMs)*time.Millisecond)
	defer cancel()
	if h.Stopping != nil {
		stop := context.AfterFunc(h.Stopping, cancel)
		defer stop()
	}
	sent, wfHeaders, err := h.bodyOf(ctx, r)
	if err != nil {
		return nil, nil, false, nil, err
	}
	var reqBody io.Reader // a nil interface, not a nil *strings.Reader, when there is no body
	if sent != "" {
		reqBody = strings.NewReader(sent)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, reqBody)
	if err != nil {
		return nil, nil, false, nil, fmt.Errorf("%w: build request: %w", retry.ErrInvalid, err)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range wfHeaders {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "retryd/1")
	}
	key := r.IdempotencyKey
	if key == "" {
		key = r.ID
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set(egress.RequestIDHeader, r.ID)
	req.Header.Set("Retryd-Attempt", strconv.Itoa(n))
	client, signer := h.Client, h.Signer
	if h.Credentials != nil {
		if use, err = h.Credentials.For(ctx, r.Tenant, r.Endpoint(), r.Credential, r.Proxy); err != nil {
			return nil, nil, false, nil, err
		}
		if err = use.Authorize(ctx, req.Header); err != nil {
			return nil, nil, false, use, err
		}
		if signer, err = h.Credentials.Signer(ctx, r.Tenant, h.Signer); err != nil {
			return nil, nil, false, use, err
		}
		client = use.Client
	}
	// webhook-id is the request id: the same on every attempt and redrive,
	// so a receiver can dedupe on it.
	signer.Sign(req.Header, r.ID, h.Clock.Now(), []byte(sent))
	if r.Dialect == record.DialectQStash {
		// What QStash's deliveries carry (attempts before this one, from 0).
		req.Header.Set("Upstash-Message-Id", r.ID)
		req.Header.Set("Upstash-Retried", strconv.Itoa(n-1))
		if q := r.QStash; q != nil && q.ScheduleID != "" {
			req.Header.Set("Upstash-Schedule-Id", q.ScheduleID)
		}
		if req.Header.Get("User-Agent") == "retryd/1" {
			req.Header.Set("User-Agent", "Upstash-QStash")
		}
		if tok := h.QStash.Token(r.URL, []byte(sent), h.Clock.Now()); tok != "" {
			req.Header.Set("Upstash-Signature", tok)
		}
	}
	resp, err = client.Do(req)
	if err != nil {
		var perr *egress.ProxyError
		if errors.As(err, &perr) {
			use.ProxyFailed(ctx, err)
		}
		return nil, nil, false, use, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		use.Unauthorized(ctx, req.Header)
	}
	body, truncated, err = egress.ReadCapped(resp.Body, ResultLimit)
	if err != nil {
		// The status line arrived; a body cut short is still a failed
		// attempt, classified by the read error (timeout or network).
		return nil, nil, false, use, fmt.Errorf("read response body: %w", err)
	}
	return resp, body, truncated, use, nil
}

// bodyOf is the body r's call sends, and the headers it adds: r's own
// body, or for a step of an Upstash Workflow run the run's log up to r
// (empty once the run has ended: the SDK then asks for the log, hears
// that the run is over, and answers 200).
func (h *Handler) bodyOf(ctx context.Context, r *record.Request) (string, map[string]string, error) {
	q := r.QStash
	if q == nil || q.WorkflowRun == "" || h.Workflows == nil {
		return r.Body, nil, nil
	}
	run, err := h.Workflows.Deliver(ctx, r.Tenant, q.WorkflowRun, r.ID, []byte(r.Body))
	if err != nil {
		return "", nil, fmt.Errorf("read the log of workflow run %s: %w", q.WorkflowRun, err)
	}
	headers := map[string]string{"Upstash-Workflow-RunId": q.WorkflowRun, "Upstash-Workflow-Url": r.URL}
	if !run.Found {
		return "", headers, nil
	}
	headers["Upstash-Workflow-CreatedAt"] = strconv.FormatInt(run.CreatedAt.UnixMilli(), 10)
	return string(run.Log), headers, nil
}
