package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/metrics"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/tracing"
	"github.com/retryd/retryd/internal/waiting"
)

// Store is the record store as the API uses it.
type Store interface {
	Create(ctx context.Context, r *record.Request, idemKey string, body []byte, opts record.CreateOptions) (*record.Replay, error)
	// RingsOnCreate says whether Create rings the workers' doorbell.
	RingsOnCreate() bool
	// EnqueuesOnCreate says whether Create may write the request's task
	// (CreateOptions.Task).
	EnqueuesOnCreate() bool
	Remove(ctx context.Context, tenant, id, idemKey string) error
	// TakeBack removes an unconfirmed request, unless a replay of its
	// Idempotency-Key has seen it or a worker has begun it (removed is
	// then false).
	TakeBack(ctx context.Context, tenant, id, idemKey string) (removed bool, err error)
	Get(ctx context.Context, id string) (*record.Request, error)
	GetIn(ctx context.Context, scope tenant.Scope, id string) (*record.Request, error)
	List(ctx context.Context, scope tenant.Scope, status record.Status, cursor string, limit int) (*record.Page, error)
	ListIn(ctx context.Context, scope tenant.Scope, statuses []record.Status, cursor string, limit int, scan *record.Scan) (*record.Page, error)
	// Find lists the requests a filter selects (GET /requests).
	Find(ctx context.Context, scope tenant.Scope, f record.Filter, cursor string, limit int, scan *record.Scan) (*record.Page, error)
	Cancel(ctx context.Context, scope tenant.Scope, id, actor string, now time.Time) (callbackDue bool, err error)
	// Resend makes a new pending request from finished request orig.
	Resend(ctx context.Context, orig *record.Request, in record.ResendInput) (*record.ResendResult, error)
	// Expunge erases a finished request's payload, keeping its metadata.
	Expunge(ctx context.Context, scope tenant.Scope, id, actor string, now time.Time) (already bool, err error)
	Ping(ctx context.Context) error
}

// Queue hands requests to the workers.
type Queue interface {
	// Enqueue hands a stored request to the workers, due at due; a task
	// that exists already is not an error.
	Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error
	// PendingAtOnce says whether a task due at due is pending as soon as
	// it is enqueued (so its submission rings the workers' doorbell).
	PendingAtOnce(due time.Time) bool
	// PendingTask is a request's task, pending at once, for its submission
	// to write with the record; nil: Enqueue it afterwards.
	PendingTask(ctx context.Context, id string, attemptTimeout time.Duration, maxRetries int) (*record.Task, error)
	// Delete removes a request's task, best effort (it may be running).
	Delete(ctx context.Context, id string) error
	// EnqueueCallback schedules a finished request's outcome callback.
	EnqueueCallback(ctx context.Context, id string) error
}

// Destinations checks a destination's host and port against the safety
// rules: refused ranges (retry.ErrBlocked) and retryd's own listeners
// (egress.ErrOwnListener), on every address the host resolves to.
type Destinations interface {
	CheckTarget(ctx context.Context, host string, port uint16) error
}

// API holds the dependencies of the request handlers.
type API struct {
	// Traces exports a span per submission (nil: off).
	Traces       *tracing.Tracer
	Store        Store
	Queue        Queue
	Destinations Destinations
	Log          *slog.Logger
	Now          func() time.Time
	// Metrics counts submissions; nil for none.
	Metrics *metrics.Metrics
	// Self is where this API listens; destinations aimed at it are
	// refused. Nil skips the check (NoLoops still holds).
	Self *Self
	// Memory, when set, refuses submissions to a nearly full Redis.
	Memory MemoryReader
	// MaxUnfinished caps each owner's unfinished requests (0: no cap).
	MaxUnfinished int
	memory        memoryGate
	// Parts are the partitions: a new id is made in the partition its
	// Idempotency-Key picks. The zero value is one partition.
	Parts partition.Set
	// Canceled, when set, hears of every request canceled (a queue gives
	// its place to the next).
	Canceled func(ctx context.Context, id string)
	// Workers counts the live workers, for /readyz; nil: not counted.
	Workers func(ctx context.Context) (int, error)
	// Disagreements, when set, name the settings that retryd processes
	// on this Redis read differently (agree.Book), for /readyz.
	Disagreements func() []string
	// Replicas, when set, hold every answered change until Redis
	// replicas confirm it (WaitReplicas).
	Replicas Replicas
	// Credentials tells whether a tenant has the credential a submission
	// names; nil: it has none.
	Credentials CredentialTypes
}

// NoWorkers is what the API says while no worker runs.
const NoWorkers = "no worker is running: requests are accepted and stored, but none is delivered until a worker starts " +
	"(go run ./cmd/worker with the same REDIS_URL, or the API alone with -dev)"

// newID makes the id of a new request (or schedule).
// NewID is the id of a request submitted at now with idemKey, as Accept
// gives it: a caller that must name the request before it is accepted
// sets it on the request.
func (a *API) NewID(now time.Time, idemKey string) string { return a.newID(now, idemKey) }

func (a *API) newID(now time.Time, idemKey string) string {
	if a.Parts.Len() == 0 {
		return ids.New(now)
	}
	return a.Parts.NewID(now, idemKey)
}

// Routes registers the request routes on r.
func (a *API) Routes(r gin.IRouter) {
	r.POST("/requests", a.submit)
	r.POST("/request", a.submit) // the path older clients use
	r.GET("/requests", a.list)
	r.GET("/requests/:id", a.get)
	r.DELETE("/requests/:id", a.cancel)
	r.POST("/requests/:id/resend", a.resend)
	r.DELETE("/requests/:id/payload", a.expunge)
	r.POST("/requests/resend", a.bulkResend)
	r.DELETE("/requests/payload", a.bulkExpunge)
}

// Health registers /, /healthz and /readyz; they never need an API key.
func (a *API) Health(r gin.IRouter) {
	r.GET("/", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"service": "retryd", "links": gin.H{
			"openapi": "/openapi.json", "dashboard": "/monitoring/", "health": "/healthz", "ready": "/readyz", "requests": "/requests"}})
	})
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := a.Store.Ping(ctx); err != nil {
			Abort(c, a.Log, err)
			return
		}
		doc := gin.H{"status": "ready"}
		if a.Disagreements != nil {
			if ds := a.Disagreements(); len(ds) > 0 {
				// Ready all the same: each process works, but a request's
				// fate depends on which one handles it.
				doc["disagreements"] = ds
				doc["warning"] = "retryd processes on this Redis read settings that decide a request's fate differently: " +
					strings.Join(ds, "; ") + "; give every process the same value (docs/operating.md lists which program reads which)"
			}
		}
		if a.Workers != nil {
			n, err := a.Workers(ctx)
			if err != nil {
				Abort(c, a.Log, fmt.Errorf("%w: count the workers: %w", record.ErrUnavailable, err))
				return
			}
			doc["workers"] = n
			if n == 0 {
				doc["warning"] = NoWorkers
			}
		}
		c.JSON(http.StatusOK, doc)
	})
}

func (a *API) submit(c *gin.Context) {
	accepting := false // from then on Accept counts the submission
	defer func() {
		if !accepting {
			a.Metrics.Submission(metrics.Rejected)
		}
	}()
	if err := requireJSON(c); err != nil {
		Abort(c, a.Log, err)
		return
	}
	idemKey := c.GetHeader("Idempotency-Key")
	if err := submit.ValidIdempotencyKey(idemKey); err != nil {
		Abort(c, a.Log, err)
		return
	}
	if c.Request.ContentLength > submit.MaxBytes {
		Abort(c, a.Log, tooLarge())
		return
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, submit.MaxBytes+1))
	if err != nil {
		Abort(c, a.Log, Errorf(CodeInvalid, "", "could not read the request body"))
		return
	}
	if len(body) > submit.MaxBytes {
		Abort(c, a.Log, tooLarge())
		return
	}
	now := a.Now()
	r, err := submit.Parse(body, now)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	accepting = true
	replay, err := a.Accept(c, r, idemKey, body, now)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	if replay != nil {
		a.replay(c, replay)
		return
	}
	a.Log.Debug("request accepted", "requestId", r.ID, "method", r.Method, "host", r.Host,
		"nextAttemptAt", r.NextAttemptAt.UTC().Format(apidoc.TimeLayout))
	c.Header("Location", "/requests/"+r.ID)
	c.JSON(http.StatusAccepted, gin.H{"id": r.ID, "status": record.Pending})
}

// Accept stores a parsed request r and hands it to the workers: the
// destination checks, a new id (in the partition idemKey picks), the
// memory gate, the record (claiming idemKey, counting the owner's cap) and
// the enqueue. It returns the earlier request when idemKey was used
// before. Both APIs (retryd's and the QStash dialect) submit through it,
// and it pays the caller's rate limit for the request (Charge) and counts
// it in retryd_submissions_total. A route that refuses a submission before
// it reaches Accept counts it as rejected itself (SubmissionRejected).
func (a *API) Accept(c *gin.Context, r *record.Request, idemKey string, body []byte, now time.Time) (replay *record.Replay, err error) {
	defer func() { a.Metrics.Submission(acceptResult(replay, err)) }()
	ctx := c.Request.Context()
	if a.Traces != nil {
		var endSpan func(id, tenant, endpoint string, err error)
		r.TraceParent, endSpan = a.Traces.Submit(ctx, c.Request.Header)
		defer func() { endSpan(r.ID, r.Tenant, r.HostPort(), err) }()
	}
	if err := a.checkDestinations(c, r, ""); err != nil {
		return nil, err
	}
	if r.ID == "" {
		r.ID = a.newID(now, idemKey)
	}
	r.IdempotencyKey = idemKey
	r.Tenant = TenantOf(c)
	if err := a.checkCredentials(ctx, r, r.Tenant, ""); err != nil {
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
	atOnce := a.Queue.PendingAtOnce(r.NextAttemptAt)
	rang := a.Store.RingsOnCreate() && atOnce
	var task *record.Task
	if rang && a.Store.EnqueuesOnCreate() {
		// Stored with its record, by the script that rings: one round
		// trip. (A script that cannot ring leaves the ring to the enqueue.)
		if task, err = a.Queue.PendingTask(ctx, r.ID, time.Duration(r.TimeoutMs)*time.Millisecond, r.MaxRetries); err != nil {
			return nil, fmt.Errorf("%w: %w", record.ErrUnavailable, err)
		}
	}
	replay, err = a.Store.Create(ctx, r, idemKey, body, record.CreateOptions{
		Owner: record.Owner{ID: owner(c), Limit: a.MaxUnfinished}, Ring: rang, Task: task})
	unconfirmed := errors.Is(err, record.ErrNotReplicated)
	if err == nil && replay == nil && task == nil {
		// The record is stored (and the doorbell rung); its task is
		// enqueued through asynq's own client, with the request id as task
		// id (a repeat is a no-op).
		enqCtx := ctx
		if rang {
			enqCtx = waiting.WithoutRing(ctx)
		}
		if err = a.Queue.Enqueue(enqCtx, r.ID, r.NextAttemptAt, time.Duration(r.TimeoutMs)*time.Millisecond, r.MaxRetries); err != nil {
			err, unconfirmed = fmt.Errorf("%w: enqueue %s: %w", record.ErrUnavailable, r.ID, err), true
		}
	}
	if unconfirmed {
		a.takeBack(context.WithoutCancel(ctx), r, idemKey)
	}
	if err == nil {
		// Create confirmed the record with the replicas (or took it back).
		confirmedByCreate(c)
	}
	return replay, err
}

// takeBack removes an unconfirmed request before its submission is
// answered 503, so a retried submission does not deliver twice. A request
// that a replay of its Idempotency-Key saw in the meantime (the replay may
// have been acknowledged), or that a worker has begun (the enqueue did
// reach Redis), stays and is enqueued, once the replicas hold it: a
// request only this primary holds may be thrown away by a failover, and
// its key then made into a second request on the node that survives; were
// it delivered meanwhile, the destination would get both. Unconfirmed, it
// is left to the sweeper, which confirms before it enqueues. If the
// removal fails, the sweeper enqueues the record it finds without a task.
func (a *API) takeBack(ctx context.Context, r *record.Request, idemKey string) {
	removed, err := a.Store.TakeBack(ctx, r.Tenant, r.ID, idemKey)
	if err != nil {
		a.Log.Error("could not remove an unconfirmed request", "requestId", r.ID, "err", err)
		return
	}
	if removed {
		return
	}
	if a.Replicas != nil {
		if err := a.Replicas.Replicated(ctx); err != nil {
			a.Log.Warn("a replayed request the replicas do not hold yet is left to the sweeper", "requestId", r.ID, "err", err)
			return
		}
	}
	if err := a.Queue.Enqueue(ctx, r.ID, r.NextAttemptAt, time.Duration(r.TimeoutMs)*time.Millisecond, r.MaxRetries); err != nil {
		a.Log.Warn("a replayed request could not be enqueued; the sweeper will", "requestId", r.ID, "err", err)
	}
}

func (a *API) replay(c *gin.Context, replay *record.Replay) {
	if !replay.SameBody {
		Abort(c, a.Log, Errorf(CodeConflict, "Idempotency-Key",
			"Idempotency-Key was already used with a different body"))
		return
	}
	prev, err := a.Store.Get(c.Request.Context(), replay.ID)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	c.Header("Idempotent-Replayed", "true")
	c.Header("Location", "/requests/"+prev.ID)
	c.JSON(http.StatusOK, gin.H{"id": prev.ID, "status": prev.Status})
}

// requireJSON refuses a body that does not say it is JSON: 415.
func requireJSON(c *gin.Context) error {
	ct := c.GetHeader("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return Errorf(CodeUnsupportedMedia, "", "Content-Type must be application/json")
	}
	return nil
}

// Check applies to r the checks Accept makes of where and with what it
// delivers (destinations, credentials) without accepting it: for a
// message retryd makes later from r, such as a workflow invoke's result.
func (a *API) Check(c *gin.Context, r *record.Request) error {
	if err := a.checkDestinations(c, r, ""); err != nil {
		return err
	}
	return a.checkCredentials(c.Request.Context(), r, TenantOf(c), "")
}

// checkDestinations applies the safety rules to a request's url and
// callbackUrl: no refused address range, and not this API itself. prefix
// names where the request sits in the body ("request." in a schedule).
func (a *API) checkDestinations(c *gin.Context, r *record.Request, prefix string) error {
	targets := []struct{ field, url string }{{"url", r.URL}, {"callbackUrl", r.CallbackURL}}
	if r.QStash != nil {
		targets = append(targets, struct{ field, url string }{"Upstash-Failure-Callback", r.QStash.FailureCallback})
	}
	for _, d := range targets {
		if d.url == "" {
			continue
		}
		u, err := url.Parse(d.url)
		if err != nil {
			return Errorf(CodeInvalid, prefix+d.field, prefix+d.field+" must be an absolute http or https URL")
		}
		if a.Self.targets(d.url, c.Request.Host) {
			return Errorf(CodeLoopDetected, prefix+d.field, prefix+d.field+" points at this retryd API; retryd does not deliver to itself "+
				"(one submission could otherwise grow into an endless chain of requests)")
		}
		err = a.Destinations.CheckTarget(c.Request.Context(), u.Hostname(), urlPort(u))
		if errors.Is(err, egress.ErrOwnListener) {
			return Errorf(CodeLoopDetected, prefix+d.field, prefix+d.field+": "+strings.TrimPrefix(err.Error(), retry.ErrBlocked.Error()+": "))
		}
		if err != nil {
			return blocked(prefix+d.field, err)
		}
	}
	return nil
}

func (a *API) get(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		Abort(c, a.Log, record.ErrNotFound)
		return
	}
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	r, err := a.Store.GetIn(c.Request.Context(), scope, id)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, apidoc.NewDocument(r, true, a.Now()))
}

// List limits.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// listRoute is what GET /requests accepts besides its filters.
var listRoute = filterRoute{DefaultLimit: DefaultListLimit, MaxLimit: MaxListLimit}

func (a *API) list(c *gin.Context) {
	q, err := parseFilterQuery(listRoute, c.Request.URL.Query(), nil)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	scope, err := Scope(c, q.Tenant)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	page, err := a.Store.Find(c.Request.Context(), scope, q.Filter, q.Cursor, q.Limit, nil)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	writePage(c, page, a.Now())
}

func pageParams(c *gin.Context) (limit int, cursor string, err error) {
	limit = DefaultListLimit
	if v, ok := c.GetQuery("limit"); ok {
		n, convErr := strconv.Atoi(v)
		if convErr != nil || n < 1 || n > MaxListLimit {
			return 0, "", Errorf(CodeInvalid, "limit", "limit must be an integer between 1 and 500")
		}
		limit = n
	}
	cursor = c.Query("cursor")
	if cursor != "" && !ids.Valid(cursor) {
		return 0, "", Errorf(CodeInvalid, "cursor", "cursor is not one this API returned")
	}
	return limit, cursor, nil
}

func writePage(c *gin.Context, page *record.Page, now time.Time) {
	data := make([]apidoc.Document, len(page.Requests))
	for i, r := range page.Requests {
		data[i] = apidoc.NewDocument(r, false, now)
	}
	c.JSON(http.StatusOK, gin.H{"data": data, "nextCursor": nullable(page.NextCursor)})
}

func (a *API) cancel(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		Abort(c, a.Log, record.ErrNotFound)
		return
	}
	ctx := c.Request.Context()
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	if err := a.Cancel(ctx, scope, id, CancelActor); err != nil {
		if errors.Is(err, record.ErrConflict) {
			err = cancelConflict(ctx, a.Store, scope, id, err)
		}
		Abort(c, a.Log, err)
		return
	}
	r, err := a.Store.GetIn(ctx, scope, id)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, apidoc.NewDocument(r, true, a.Now()))
}

// CancelActor is the actor recorded on a cancel through DELETE /requests/{id}.
const CancelActor = "api"

// Cancel moves pending or retrying request id of scope to canceled for
// good, as actor (its outcome callback, if any, becomes due). It returns
// record.ErrNotFound (another tenant's request too), or
// record.ErrConflict when the request already finished.
func (a *API) Cancel(ctx context.Context, scope tenant.Scope, id, actor string) error {
	callbackDue, err := a.Store.Cancel(ctx, scope, id, actor, a.Now())
	if err != nil {
		return err
	}
	if a.Canceled != nil {
		a.Canceled(ctx, id)
	}
	if callbackDue {
		if err := a.Queue.EnqueueCallback(ctx, id); err != nil {
			// The record says the callback is pending; the sweeper
			// re-enqueues callbacks left pending without a task.
			a.Log.Error("could not enqueue the outcome callback", "requestId", id, "err", err)
		}
	}
	// The record is canceled, which alone stops every further attempt;
	// deleting the task only saves the worker a wasted hand-over.
	if err := a.Queue.Delete(ctx, id); err != nil {
		a.Log.Debug("could not delete the task of a canceled request", "requestId", id, "err", err)
	}
	a.Log.Info("request canceled", "requestId", id, "actor", actor)
	return nil
}

// cancelConflict is the 409 of a cancel of a finished request, naming
// the next step its status allows: only a failed request can be
// redriven, so only a failed one is pointed there.
func cancelConflict(ctx context.Context, store Store, scope tenant.Scope, id string, err error) error {
	msg := strings.TrimPrefix(err.Error(), record.ErrConflict.Error()+": ") +
		": only a pending or retrying request can be canceled"
	r, gerr := store.GetIn(ctx, scope, id)
	switch {
	case gerr == nil && r.Status == record.Failed:
		msg += "; a failed one can be delivered again with POST /dlq/" + id + "/redrive"
	case gerr == nil:
		msg += "; this one is " + string(r.Status) + " and has nothing left to cancel (to send it again, submit it as a new request with POST /requests)"
	}
	return Errorf(CodeConflict, "", msg)
}

func tooLarge() *Error {
	return Errorf(CodeTooLarge, "", "submission is larger than 256 KiB")
}

// blocked is the 422 of a refused destination, naming the setting that
// would open it: link-local addresses only open with ALLOWED_CIDRS.
func blocked(field string, err error) error {
	if errors.Is(err, egress.ErrLinkLocal) {
		return Errorf(CodeBlockedDestination, field, err.Error()+
			"; the operator can open a link-local range only with ALLOWED_CIDRS, and the metadata address 169.254.169.254 is best never opened")
	}
	if errors.Is(err, retry.ErrBlocked) {
		return Errorf(CodeBlockedDestination, field, err.Error()+
			"; to deliver to your own network, the operator opens its range with ALLOWED_CIDRS (e.g. 10.0.0.0/8), or every private range with ALLOW_PRIVATE_TARGETS=true")
	}
	return err
}

// urlPort is the port u is dialled on: its own, or its scheme's.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// nullable is s, or JSON null when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func acceptResult(replay *record.Replay, err error) string {
	switch {
	case err != nil:
		if apiErr, _, _ := explain(err); apiErr.Code == CodeUnavailable {
			return metrics.Unavailable
		}
		return metrics.Rejected
	case replay != nil && !replay.SameBody:
		return metrics.Rejected // 409: the key was used with another body
	case replay != nil:
		return metrics.Replayed
	}
	return metrics.Accepted
}

// SubmissionRejected counts a submission a route refused before it
// reached Accept (a body that does not parse, say).
func (a *API) SubmissionRejected() { a.Metrics.Submission(metrics.Rejected) }
