package record

import (
	"context"
	"fmt"
	"time"

	rediskeys "github.com/retryd/retryd/internal/keys"
)

// Resend refusals; each wraps ErrConflict.
var (
	ErrUnfinished = fmt.Errorf("%w: only a finished request (completed, failed or canceled) can be resent", ErrConflict)
	ErrExpunged   = fmt.Errorf("%w: the request's payload was expunged; it cannot be resent", ErrConflict)
	// ErrResendKeyReused: the resend's Idempotency-Key was used to resend
	// another request.
	ErrResendKeyReused = fmt.Errorf("%w: Idempotency-Key was already used to resend another request", ErrConflict)
)

// Resendable says why r cannot be resent (the error Resend would return),
// or nil: a bulk call's dry run asks it of each request.
func Resendable(r *Request) error {
	if !r.Status.Terminal() {
		return unfinished(r.ID, string(r.Status))
	}
	if r.Expunged {
		return ErrExpunged
	}
	return nil
}

func unfinished(id, status string) error {
	return fmt.Errorf("%w; this one is %s: wait until it finishes, or cancel it first with DELETE /requests/%s", ErrUnfinished, status, id)
}

// ResendInput is who resends, why, and how the new request is counted.
type ResendInput struct {
	Actor   string
	Reason  string
	IdemKey string // optional: a repeated call with it resends once
	// Owner is who the new request counts against (MaxUnfinished).
	Owner Owner
	// Ring rings the workers' doorbell in the script when the store can
	// (see CreateOptions.Ring).
	Ring bool
	Now  time.Time
}

// ResendResult is what Resend did.
type ResendResult struct {
	ID       string // the new request's
	Replayed bool   // an earlier call with the same Idempotency-Key made it
}

// resendScript: scripts/resend.lua.
var resendScript = script("resend")

// Resend makes a new pending request from finished request orig, in one
// script: the same URL, method, headers, body, retry settings, callback,
// flow control, labels, credential, proxy and tenant, a fresh budget,
// resentFrom on it and its id among orig's resends. The new request gets an id of its own in
// orig's partition and no Idempotency-Key of the original's, so its
// destination sees a new delivery, nor its traceparent: the resend's
// spans start a trace of their own. A QStash message's queue is not
// kept: the resend is delivered on its own. It returns ErrUnfinished,
// ErrExpunged, ErrResendKeyReused or ErrOwnerLimit.
func (s *Store) Resend(ctx context.Context, orig *Request, in ResendInput) (*ResendResult, error) {
	p := s.parts.OfID(orig.ID)
	n := &Request{
		ID: s.parts.NewIDIn(in.Now, p), Tenant: orig.Tenant,
		URL: orig.URL, Host: orig.Host, Method: orig.Method, Headers: orig.Headers, Body: orig.Body,
		MaxRetries: orig.MaxRetries, BackoffMs: orig.BackoffMs, MaxBackoffMs: orig.MaxBackoffMs, TimeoutMs: orig.TimeoutMs,
		CallbackURL: orig.CallbackURL, Dialect: orig.Dialect, FlowControl: orig.FlowControl, Topic: orig.Topic,
		Credential: orig.Credential, Proxy: orig.Proxy,
		Status: Pending, NextAttemptAt: in.Now, CreatedAt: in.Now,
		ResentFrom: &ResentFrom{ID: orig.ID, AtMs: in.Now.UnixMilli(), Actor: in.Actor, Reason: in.Reason},
	}
	if orig.QStash != nil {
		q := *orig.QStash
		q.Queue = ""
		n.QStash = &q
	}
	if err := s.register(ctx, n.Tenant); err != nil {
		return nil, err
	}
	k := s.k(orig.ID)
	tk := k.of(n.Tenant)
	owner := in.Owner
	ownerKey := k.req(n.ID) // unused without a limit; names the slot
	if owner.Limit > 0 {
		ownerKey = tk.owner(owner.ID)
		owner.Limit = (owner.Limit + s.parts.Len() - 1) / s.parts.Len()
	}
	bell, ring := k.req(n.ID), "0"
	if in.Ring && s.RingsOnCreate() {
		bell, ring = rediskeys.Bell(s.parts.Tag(p)), "1"
	}
	idemVal := ""
	if in.IdemKey != "" {
		idemVal = orig.ID + " " + n.ID
	}
	keys := append([]string{k.req(orig.ID), tk.resendIdem(in.IdemKey), k.req(n.ID), tk.index(Pending), k.spec(n.ID), ownerKey, bell},
		staticIndexes(tk, hostOf(n.URL), n.Labels())...)
	args := append([]any{orig.ID, n.ID, idemVal, IdempotencyWindow.Milliseconds(), n.spec(),
		owner.Limit, (s.retention + 24*time.Hour).Milliseconds(), in.Now.UnixMilli(), ring}, n.fields()...)
	for {
		res, err := resendScript.Run(ctx, s.rdb, keys, args...).StringSlice()
		if err != nil {
			return nil, wrap(err)
		}
		if len(res) < 1 {
			return nil, errReply("resend", res)
		}
		switch res[0] {
		case "ok":
			return &ResendResult{ID: n.ID}, nil
		case "missing":
			return nil, ErrNotFound
		case "expunged":
			return nil, ErrExpunged
		case "unfinished":
			if len(res) < 2 {
				return nil, errReply("resend", res)
			}
			return nil, unfinished(orig.ID, res[1])
		case "replay":
			if len(res) < 2 {
				return nil, errReply("resend", res)
			}
			from, id, _ := cutSpace(res[1])
			if from != orig.ID || id == "" {
				return nil, ErrResendKeyReused
			}
			return &ResendResult{ID: id, Replayed: true}, nil
		case "full":
			pruned, err := s.pruneOwner(ctx, ownerKey)
			if err != nil {
				return nil, err
			}
			if pruned == 0 {
				return nil, ErrOwnerLimit
			}
			continue
		}
		return nil, errReply("resend", res)
	}
}
