package record

import (
	"context"
	"fmt"
	"time"

	"github.com/retryd/retryd/internal/tenant"
)

// ErrExpungeUnfinished: a pending or retrying request's payload is still
// needed for its next attempt; it wraps ErrConflict.
var ErrExpungeUnfinished = fmt.Errorf("%w: only a finished request's payload can be expunged", ErrConflict)

// ErrAlreadyExpunged is what a bulk expunge says of a request expunged
// before (a single DELETE of its payload answers it as done); it wraps
// ErrConflict.
var ErrAlreadyExpunged = fmt.Errorf("%w: its payload was expunged already", ErrConflict)

// Expungeable says why r's payload cannot be expunged now (the error
// Expunge would return, or ErrAlreadyExpunged), or nil.
func Expungeable(r *Request) error {
	if !r.Status.Terminal() {
		return expungeUnfinished(r.ID, string(r.Status))
	}
	if r.Expunged {
		return ErrAlreadyExpunged
	}
	return nil
}

func expungeUnfinished(id, status string) error {
	return fmt.Errorf("%w; this one is %s: cancel it first with DELETE /requests/%s, then expunge it", ErrExpungeUnfinished, status, id)
}

// expungeScript: scripts/expunge.lua.
var expungeScript = script("expunge")

// Expunge erases the payload of finished request id of scope, as actor, in
// one script: its body and headers, its result and its attempts' response
// bodies (and so its DLQ entry's, the same record), keeping the metadata.
// A request expunged before is left as it is (already is then true). It
// returns ErrNotFound, or ErrExpungeUnfinished for a pending or retrying
// request.
func (s *Store) Expunge(ctx context.Context, scope tenant.Scope, id, actor string, now time.Time) (already bool, err error) {
	t, err := s.tenantOf(ctx, scope, id)
	if err != nil {
		return false, err
	}
	k := s.k(id)
	res, err := s.expunge(ctx, k, k.of(t).payloadDue(), id, actor, now)
	if err != nil {
		return false, err
	}
	switch res[0] {
	case "ok":
		return false, nil
	case "already":
		return true, nil
	case "missing":
		return false, ErrNotFound
	case "unfinished":
		if len(res) < 2 {
			return false, errReply("expunge", res)
		}
		return false, expungeUnfinished(id, res[1])
	}
	return false, errReply("expunge", res)
}

// expunge runs expungeScript on request id of partition k, whose tenant's
// payload-expiry index is due, and returns its answer: at least one
// element, two when the first is "unfinished".
func (s *Store) expunge(ctx context.Context, k keys, due, id, actor string, now time.Time) ([]string, error) {
	res, err := expungeScript.Run(ctx, s.rdb, []string{k.req(id), k.attempts(id), k.spec(id), k.result(id), due}, now.UnixMilli(), actor, id).StringSlice()
	if err != nil {
		return nil, wrap(err)
	}
	if len(res) < 1 || (res[0] == "unfinished" && len(res) < 2) {
		return nil, errReply("expunge", res)
	}
	return res, nil
}
