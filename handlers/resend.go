package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/waiting"
)

// resend makes a new request from a finished one (POST
// /requests/{id}/resend): 202 with the new request's document, or 200
// with Idempotent-Replayed when an earlier call with the same
// Idempotency-Key made it. The body, optional, names who resends and why,
// as a redrive's does.
func (a *API) resend(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		Abort(c, a.Log, record.ErrNotFound)
		return
	}
	idemKey := c.GetHeader("Idempotency-Key")
	if err := submit.ValidIdempotencyKey(idemKey); err != nil {
		Abort(c, a.Log, err)
		return
	}
	b, err := readRedriveBody(c)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	ctx := c.Request.Context()
	orig, err := a.Store.GetIn(ctx, scope, id)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	now := a.Now()
	res, err := a.resendOne(c, orig, b, idemKey, now)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	n, err := a.Store.Get(ctx, res.ID)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	status := http.StatusAccepted
	if res.Replayed {
		c.Header("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	c.Header("Location", "/requests/"+n.ID)
	c.JSON(status, apidoc.NewDocument(n, true, now))
}

// resendOne resends finished request orig as b says: a new delivery, so
// it meets today's destination rules and the memory gate first and pays
// the caller's rate limit (Charge); the new request is then handed to the
// workers.
func (a *API) resendOne(c *gin.Context, orig *record.Request, b *redriveBody, idemKey string, now time.Time) (*record.ResendResult, error) {
	ctx := c.Request.Context()
	// The destination rules may have changed since the original was
	// accepted: a resend is a new delivery and meets today's.
	if err := a.checkDestinations(c, orig, ""); err != nil {
		return nil, err
	}
	if a.Memory != nil {
		if err := a.memory.check(ctx, a.Memory, now); err != nil {
			return nil, err
		}
	}
	if err := Charge(ctx); err != nil {
		return nil, err
	}
	rang := a.Store.RingsOnCreate() && a.Queue.PendingAtOnce(now)
	res, err := a.Store.Resend(ctx, orig, record.ResendInput{Actor: b.Actor, Reason: b.Reason, IdemKey: idemKey,
		Owner: record.Owner{ID: owner(c), Limit: a.MaxUnfinished}, Ring: rang, Now: now})
	if err != nil || res.Replayed {
		Unspend(ctx)
	}
	if err != nil {
		return nil, err
	}
	if !res.Replayed {
		enqCtx := ctx
		if rang {
			enqCtx = waiting.WithoutRing(ctx)
		}
		if err := a.Queue.Enqueue(enqCtx, res.ID, now, time.Duration(orig.TimeoutMs)*time.Millisecond, orig.MaxRetries); err != nil {
			// The new request is stored as pending; the sweeper hands a
			// pending request without a task to the workers.
			a.Log.Error("resent request could not be enqueued now; the sweeper will", "requestId", res.ID, "err", err)
		}
		a.Log.Info("request resent", "requestId", orig.ID, "newRequestId", res.ID, "actor", b.Actor)
	}
	return res, nil
}
