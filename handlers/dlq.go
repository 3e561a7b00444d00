package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

// DLQStore is the record store as the dead-letter routes use it.
type DLQStore interface {
	Get(ctx context.Context, id string) (*record.Request, error)
	GetIn(ctx context.Context, scope tenant.Scope, id string) (*record.Request, error)
	ListFailed(ctx context.Context, scope tenant.Scope, f record.DLQFilter, cursor string, limit int, scan *record.Scan) (*record.Page, error)
	Redrive(ctx context.Context, id string, in record.RedriveInput) (*record.RedriveResult, error)
}

// Requeuer hands a redriven request back to the workers.
type Requeuer interface {
	// Requeue replaces the request's (archived) task with a fresh one, so
	// asynq's own retry counter starts over too.
	Requeue(ctx context.Context, id string, attemptTimeout time.Duration, maxRetries int) error
}

// DLQ serves the dead-letter queue: failed requests and their redrive.
type DLQ struct {
	Store        DLQStore
	Queue        Requeuer
	RedriveLimit int
	API          *API // for logging and the clock
	// Faults are crash-test fault points; nil in production.
	Faults *faultpoint.Points
	// EndpointStates answers, of names (tenant-qualified endpoints,
	// flow.EndpointName), those that are not closed, with their state, so
	// that a redrive says which of its requests go to an endpoint still
	// open. Nil: none is said to be.
	EndpointStates func(ctx context.Context, names []string) (map[string]string, error)
}

// EndpointStateHeader is set on a single redrive's answer when the
// request's endpoint is not closed: its state (open or half_open). The
// request waits for a probe that succeeds; the first to come is sent as
// the probe.
const EndpointStateHeader = "Retryd-Endpoint-State"

// HeldEndpoint is an endpoint that is not closed, with the requests of a
// bulk redrive that go to it.
type HeldEndpoint struct {
	Endpoint string   `json:"endpoint"`
	Tenant   string   `json:"tenant"`
	State    string   `json:"state"`
	IDs      []string `json:"ids"`
}

// heldEndpoints reads which of rs's endpoints are not closed, and lists
// each with the ids of rs that go to it, in rs's order. A failed read is
// logged and says none: the redrive is done either way.
func (d *DLQ) heldEndpoints(ctx context.Context, rs []*record.Request) []HeldEndpoint {
	out := []HeldEndpoint{}
	if d.EndpointStates == nil || len(rs) == 0 {
		return out
	}
	var names []string
	seen := map[string]bool{}
	for _, r := range rs {
		if ep := r.Endpoint(); ep != "" {
			if n := flow.EndpointName(r.Tenant, ep); !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	states, err := d.EndpointStates(ctx, names)
	if err != nil {
		d.API.Log.Warn("could not read whether redriven requests' endpoints are open", "err", err)
		return out
	}
	at := map[string]int{}
	for _, r := range rs {
		n := flow.EndpointName(r.Tenant, r.Endpoint())
		st, held := states[n]
		if !held {
			continue
		}
		i, ok := at[n]
		if !ok {
			i, at[n] = len(out), len(out)
			out = append(out, HeldEndpoint{Endpoint: r.Endpoint(), Tenant: r.Tenant, State: st})
		}
		out[i].IDs = append(out[i].IDs, r.ID)
	}
	return out
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
	string(retry.InterruptedClass), string(retry.EndpointDown), string(retry.CredentialFailed),
}

func checkClass(class string) error {
	if class != "" && !slices.Contains(FailureClasses, class) {
		return Errorf(CodeInvalid, "failureClass", "failureClass must be one of "+strings.Join(FailureClasses, ", "))
	}
	return nil
}

// What retryd's own DLQ routes accept. A bulk redrive naming no id and no
// filter covers every failed request (within its limit), as it always has.
var (
	dlqListRoute = selection.Route{Filters: []string{selection.FailureClass, selection.Host},
		CountParam: "limit", DefaultCount: DefaultListLimit, MaxCount: MaxListLimit, Cursor: true, NothingIsAll: true}
	bulkRedriveRoute = selection.Route{IDs: "ids", Filters: []string{selection.FailureClass, selection.Host}, Params: []string{"actor", "reason", "dryRun"},
		CountParam: "limit", DefaultCount: DefaultBulkLimit, MaxCount: MaxBulkLimit, Cursor: true, NothingIsAll: true}
)

// checkSelection refuses a failure class that does not exist.
func checkSelection(s selection.Selection) error {
	for _, class := range s.Values[selection.FailureClass] {
		if err := checkClass(class); err != nil {
			return err
		}
	}
	return nil
}

// walkFailed acts with fn on the failed requests of scope s selects and
// returns the cursor to continue from; skip (nil for a list) hears of
// those selected and not acted on. A single host or class is read from
// the DLQ's indexes; the selection decides on every entry.
func (d *DLQ) walkFailed(ctx context.Context, scope tenant.Scope, s selection.Selection, fn func(*record.Request) error, skip selection.Skipper) (string, error) {
	var f record.DLQFilter
	if v := s.Values[selection.FailureClass]; len(v) == 1 {
		f.FailureClass = v[0]
	}
	if v := s.Values[selection.Host]; len(v) == 1 {
		f.Host = strings.ToLower(v[0])
	}
	list := func(ctx context.Context, scan *record.Scan, cursor string, n int) (*record.Page, error) {
		return d.Store.ListFailed(ctx, scope, f, cursor, n, scan)
	}
	get := func(ctx context.Context, id string) (*record.Request, error) { return d.Store.GetIn(ctx, scope, id) }
	failed := func(r *record.Request) error {
		if r.Status != record.Failed {
			return fmt.Errorf("%w; this one is %s", record.ErrNotFailed, r.Status)
		}
		return nil
	}
	return s.Walk(ctx, list, get, failed, fn, skip)
}

func (d *DLQ) list(c *gin.Context) {
	s, err := selection.Parse(dlqListRoute, c.Request.URL.Query(), nil)
	if err == nil {
		err = checkSelection(s)
	}
	var scope tenant.Scope
	if err == nil {
		scope, err = Scope(c, s.Tenant)
	}
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	page := &record.Page{Requests: []*record.Request{}}
	kept := 0
	page.NextCursor, err = d.walkFailed(c.Request.Context(), scope, s, func(r *record.Request) error {
		page.Requests = append(page.Requests, r)
		if kept += record.Footprint(r); kept >= record.ListBudget {
			return selection.ErrFull
		}
		return nil
	}, nil)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	writePage(c, page, d.API.Now())
}

// redriveBody is who redrives and why.
type redriveBody struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// DefaultActor is recorded when a redrive names no actor.
const DefaultActor = "api"

type actingAsKey struct{}

// ActingAs marks ctx as a call that retryd's own part makes as actor
// (record.OwnActors): the dashboard's pages forward their calls under
// record.DashboardActor. A context value, which no HTTP caller can set.
func ActingAs(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actingAsKey{}, actor)
}

// actorOf is the actor a call records: retryd's own when ctx acts as it
// (ActingAs), whatever the call named; else the caller's, DefaultActor
// when it named none, which may not be one of retryd's own actors.
func actorOf(ctx context.Context, named string) (string, error) {
	if own, ok := ctx.Value(actingAsKey{}).(string); ok {
		return own, nil
	}
	if named == "" {
		named = DefaultActor
	}
	if err := record.CheckActor(named); err != nil {
		return "", Errorf(CodeInvalid, "actor", err.Error())
	}
	return named, nil
}

// readBody reads a small JSON body.
func readBody(c *gin.Context) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(c.Request.Body, 64<<10+1))
	if err != nil {
		return nil, Errorf(CodeInvalid, "", "could not read the request body")
	}
	if len(raw) > 64<<10 {
		return nil, Errorf(CodeTooLarge, "", "body is larger than 64 KiB")
	}
	return raw, nil
}

func readRedriveBody(c *gin.Context) (*redriveBody, error) {
	raw, err := readBody(c)
	if err != nil {
		return nil, err
	}
	b := &redriveBody{}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, b); err != nil {
			return nil, Errorf(CodeInvalid, "", "body must be a JSON object like {\"actor\": \"alice\", \"reason\": \"fixed the endpoint\"}")
		}
	}
	return b.check(c.Request.Context())
}

// check fills the actor (actorOf) and bounds both fields.
func (b *redriveBody) check(ctx context.Context) (*redriveBody, error) {
	var err error
	if b.Actor, err = actorOf(ctx, b.Actor); err != nil {
		return nil, err
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
	var scope tenant.Scope
	if err == nil {
		scope, err = ScopeOf(c)
	}
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	ctx := c.Request.Context()
	res, err := d.redriveOne(ctx, scope, id, b, idemKey)
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
	if held := d.heldEndpoints(ctx, []*record.Request{r}); len(held) > 0 {
		c.Header(EndpointStateHeader, held[0].State)
	}
	c.Header("Location", "/requests/"+id)
	c.JSON(http.StatusAccepted, apidoc.NewDocument(r, true, d.API.Now()))
}

// Redrive redrives failed request id of scope as actor (with reason) and
// hands it back to the workers; the QStash dialect's dlq.retry uses it.
func (d *DLQ) Redrive(ctx context.Context, scope tenant.Scope, id, actor, reason string) error {
	_, err := d.redriveOne(ctx, scope, id, &redriveBody{Actor: actor, Reason: reason}, "")
	return err
}

// redriveOne redrives id and hands it back to the workers. A redrive is
// a request made again: it pays the caller's rate limit (Charge).
func (d *DLQ) redriveOne(ctx context.Context, scope tenant.Scope, id string, b *redriveBody, idemKey string) (*record.RedriveResult, error) {
	if err := Charge(ctx); err != nil {
		return nil, err
	}
	res, err := d.Store.Redrive(ctx, id, record.RedriveInput{
		Scope: scope, Actor: b.Actor, Reason: b.Reason, Limit: d.RedriveLimit, IdemKey: idemKey, Now: d.API.Now(),
	})
	if err != nil || res.Replayed {
		Unspend(ctx)
		return res, err
	}
	d.Faults.Hit(faultpoint.MidRedrive)
	r, err := d.Store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := d.Queue.Requeue(ctx, id, time.Duration(r.TimeoutMs)*time.Millisecond, r.MaxRetries); err != nil {
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

// Skipped is a request a bulk call selected and did not act on, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// SkipList collects what a bulk call did not do.
type SkipList []Skipped

// orEmpty is l, as [] rather than null when nothing was skipped.
func (l SkipList) orEmpty() SkipList {
	if l == nil {
		return SkipList{}
	}
	return l
}

// Add lists id as not done because of why.
func (l *SkipList) Add(id string, why error) {
	*l = append(*l, Skipped{ID: id, Reason: SkipReason(why)})
}

// StopsBulk reports whether err, met on one request of a bulk call, stops
// the call: the store is unavailable or something unknown went wrong. A
// request gone meanwhile, or in a state the action refuses, is skipped
// and the call goes on.
func StopsBulk(err error) bool {
	var apiErr *Error
	return !errors.Is(err, record.ErrNotFound) && !errors.Is(err, record.ErrConflict) && !errors.As(err, &apiErr)
}

// bulkRedrive redrives what the selection names and reports it: every
// request redriven, and every one selected and not redriven with why (at
// its redrive limit, no longer failed, deleted meanwhile, a named id that
// is not there). When the store fails midway, what was redriven is still
// reported, the rest is skipped with that reason and nextCursor goes on
// from there; only a call that did nothing answers the error. With
// dryRun the walk is the same and nothing changes: wouldRedrive lists
// what the real call would send.
func (d *DLQ) bulkRedrive(c *gin.Context) {
	raw, err := readBody(c)
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	s, err := selection.Parse(bulkRedriveRoute, c.Request.URL.Query(), raw)
	if err == nil {
		err = checkSelection(s)
	}
	var b *redriveBody
	if err == nil {
		b, err = (&redriveBody{Actor: s.Params["actor"], Reason: s.Params["reason"]}).check(c.Request.Context())
	}
	dryRun := false
	if v, ok := s.Params["dryRun"]; ok && err == nil {
		if dryRun, err = strconv.ParseBool(v); err != nil {
			err = Errorf(CodeInvalid, "dryRun", "dryRun must be true or false")
		}
	}
	var scope tenant.Scope
	if err == nil {
		scope, err = Scope(c, s.Tenant)
	}
	if err != nil {
		Abort(c, d.API.Log, err)
		return
	}
	ctx := c.Request.Context()
	var skipped SkipList
	redriven := []string{}
	var sent []*record.Request // redriven, for their endpoints
	next, err := d.walkFailed(ctx, scope, s, func(r *record.Request) error {
		if dryRun {
			if r.RedriveCount >= d.RedriveLimit {
				skipped.Add(r.ID, record.ErrRedriveLimit)
			} else {
				redriven = append(redriven, r.ID)
				sent = append(sent, r)
			}
			return nil
		}
		switch _, err := d.redriveOne(ctx, scope, r.ID, b, ""); {
		case err == nil:
			redriven = append(redriven, r.ID)
			sent = append(sent, r)
		case StopsBulk(err):
			return err
		default:
			skipped.Add(r.ID, err)
		}
		return nil
	}, skipped.Add)
	if err != nil && len(redriven) == 0 {
		Abort(c, d.API.Log, err)
		return
	}
	// Redriven all the same: a request to an endpoint still open waits for
	// a probe that succeeds (the first to come is the probe), and the
	// answer says which.
	held := d.heldEndpoints(ctx, sent)
	doc := gin.H{"redriven": redriven, "skipped": skipped.orEmpty(), "nextCursor": nullable(next), "endpointsOpen": held}
	if dryRun {
		doc = gin.H{"dryRun": true, "wouldRedrive": redriven, "skipped": skipped.orEmpty(), "nextCursor": nullable(next), "endpointsOpen": held}
	}
	d.API.stopped(c, "bulk redrive", len(redriven), err, doc)
	c.JSON(http.StatusOK, doc)
}
