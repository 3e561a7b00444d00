package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/submit"
)

// DLQStore is the record store as the dead-letter routes use it.
type DLQStore interface {
	Get(ctx context.Context, id string) (*record.Request, error)
	ListFailed(ctx context.Context, f record.DLQFilter, cursor string, limit int) (*record.Page, error)
	Redrive(ctx context.Context, id string, in record.RedriveInput) (*record.RedriveResult, error)
}

// Requeuer hands a redriven request back to the workers.
type Requeuer interface {
	// Requeue replaces the request's (archived) task with a fresh one, so
	// asynq's own retry counter starts over too.
	Requeue(ctx context.Context, id string, attemptTimeout time.Duration) error
}

// DLQ serves the dead-letter queue: failed requests and their redrive.
type DLQ struct {
	Store        DLQStore
	Queue        Requeuer
	RedriveLimit int
	API          *API // for logging and the clock
	// Faults are crash-test fault points; nil in production.
	Faults *faultpoint.Points
}

// Routes registers the dead-letter routes.
func (d *DLQ) Routes(r gin.IRouter) {
	r.GET("/dlq", d.list)
	r.POST("/dlq/redrive", d.bulkRedrive)
	r.POST("/dlq/:id/redrive", d.redrive)
}

// FailureClasses lists the valid failureClass filter values.
var FailureClasses = []string{
	string(retry.ClientError), string(retry.Redirect), string(retry.ServerError), string(retry.RateLimited),
	string(retry.Timeout), string(retry.Network), string(retry.BlockedDestination),
}

func checkClass(class string) error {
	if class != "" && !slices.Contains(FailureClasses, class) {
		return Errorf(CodeInvalid, "failureClass", "failureClass must be one of "+strings.Join(FailureClasses, ", "))
	}
	return nil
}

func (d *DLQ) list(c *gin.Context) {
	f := record.DLQFilter{FailureClass: c.Query("failureClass"), Host: strings.ToLower(c.Query("host"))}
	if err := checkClass(f.FailureClass); err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	limit, cursor, err := pageParams(c)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	page, err := d.Store.ListFailed(c.Request.Context(), f, cursor, limit)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	writePage(c, page)
}

// redriveBody is the body of both redrive routes.
type redriveBody struct {
	Actor        string `json:"actor"`
	Reason       string `json:"reason"`
	FailureClass string `json:"failureClass"`
	Host         string `json:"host"`
	Limit        *int   `json:"limit"`
}

// DefaultActor is recorded when a redrive names no actor.
const DefaultActor = "api"

func readRedriveBody(c *gin.Context) (*redriveBody, error) {
	raw, err := io.ReadAll(io.LimitReader(c.Request.Body, 64<<10))
	if err != nil {
		return nil, Errorf(CodeInvalid, "", "could not read the request body")
	}
	b := &redriveBody{}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, b); err != nil {
			return nil, Errorf(CodeInvalid, "", "body must be a JSON object like {\"actor\": \"alice\", \"reason\": \"fixed the endpoint\"}")
		}
	}
	if b.Actor == "" {
		b.Actor = DefaultActor
	}
	if len(b.Actor) > 200 {
		return nil, Errorf(CodeInvalid, "actor", "actor must be at most 200 characters")
	}
	if len(b.Reason) > 2000 {
		return nil, Errorf(CodeInvalid, "reason", "reason must be at most 2000 characters")
	}
	return b, nil
}

func (d *DLQ) redrive(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		Abort(c, d.API.Log, record.ErrNotFound)
		return
	}
	idemKey := c.GetHeader("Idempotency-Key")
	if err := submit.ValidIdempotencyKey(idemKey); err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	b, err := readRedriveBody(c)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	ctx := c.Request.Context()
	res, err := d.redriveOne(ctx, id, b, idemKey)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	r, err := d.Store.Get(ctx, id)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	if res.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.Header("Location", "/requests/"+id)
	c.JSON(http.StatusAccepted, apidoc.NewDocument(r, true))
}

// Redrive redrives failed request id as actor (with reason) and hands it
// back to the workers; the QStash dialect's dlq.retry uses it.
func (d *DLQ) Redrive(ctx context.Context, id, actor, reason string) error {
	_, err := d.redriveOne(ctx, id, &redriveBody{Actor: actor, Reason: reason}, "")
	return err
}

// redriveOne redrives id and hands it back to the workers.
func (d *DLQ) redriveOne(ctx context.Context, id string, b *redriveBody, idemKey string) (*record.RedriveResult, error) {
	res, err := d.Store.Redrive(ctx, id, record.RedriveInput{
		Actor: b.Actor, Reason: b.Reason, Limit: d.RedriveLimit, IdemKey: idemKey, Now: d.API.Now(),
	})
	if err != nil || res.Replayed {
		return res, err
	}
	d.Faults.Hit(faultpoint.MidRedrive)
	r, err := d.Store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := d.Queue.Requeue(ctx, id, time.Duration(r.TimeoutMs)*time.Millisecond); err != nil {
		// The record is pending again; the sweeper hands requests that
		// have no task back to the workers.
		d.API.Log.Error("redriven request could not be requeued now", "requestId", id, "err", err)
	}
	d.API.Log.Info("request redriven", "requestId", id, "actor", b.Actor, "redrive", res.N)
	return res, nil
}

// Bulk redrive bounds.
const (
	DefaultBulkLimit = 100
	MaxBulkLimit     = 1000
)

type skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

func (d *DLQ) bulkRedrive(c *gin.Context) {
	b, err := readRedriveBody(c)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	if err := checkClass(b.FailureClass); err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	limit := DefaultBulkLimit
	if b.Limit != nil {
		if *b.Limit < 1 || *b.Limit > MaxBulkLimit {
			Abort(c, d.API.Log, Errorf(CodeInvalid, "limit", "limit must be between 1 and 1000"))
			return
		}
		limit = *b.Limit
	}
	ctx := c.Request.Context()
	f := record.DLQFilter{FailureClass: b.FailureClass, Host: strings.ToLower(b.Host)}
	out := struct {
		Redriven []string  `json:"redriven"`
		Skipped  []skipped `json:"skipped"`
	}{Redriven: []string{}, Skipped: []skipped{}}
	cursor := ""
	for seen := 0; seen < limit; {
		page, err := d.Store.ListFailed(ctx, f, cursor, min(limit-seen, MaxListLimit))
		if err != nil {
			Abort(c, d.API.Log, err)
			return
		}
		for _, r := range page.Requests {
			seen++
			_, err := d.redriveOne(ctx, r.ID, b, "")
			switch {
			case err == nil:
				out.Redriven = append(out.Redriven, r.ID)
			case errors.Is(err, record.ErrRedriveLimit), errors.Is(err, record.ErrNotFailed):
				out.Skipped = append(out.Skipped, skipped{ID: r.ID, Reason: err.Error()})
			default:
				Abort(c, d.API.Log, err)
				return
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	c.JSON(http.StatusOK, out)
}
