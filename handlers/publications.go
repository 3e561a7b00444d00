package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

// Publishing to a topic: one request per endpoint, and the publication
// that links them.

// FannedOut is one request a publish to a topic made (or found made by an
// earlier publish with the same idempotency key).
type FannedOut struct {
	record.Child
	Replayed bool
	// SameBody says a replayed request was made from the same submission.
	SameBody bool
}

// PartialFanOut is a fan-out cut short: the endpoints before Err got their
// request, Missing got none.
type PartialFanOut struct {
	Made    []FannedOut
	Missing []record.Endpoint
	Err     error
}

func (e *PartialFanOut) Error() string { return e.describe() + ": " + e.Err.Error() }

// describe says how far the fan-out went, and how to complete it.
func (e *PartialFanOut) describe() string {
	return fmt.Sprintf("%d of %d endpoints got a request and %d got none (%s); "+
		"publishing again with the same idempotency key (Idempotency-Key, or Upstash-Deduplication-Id) and body makes only the missing ones",
		len(e.Made), len(e.Made)+len(e.Missing), len(e.Missing), endpointList(e.Missing))
}

func (e *PartialFanOut) Unwrap() error { return e.Err }

// endpointList names up to a few endpoints, by name or else by redacted
// URL.
func endpointList(eps []record.Endpoint) string {
	const shown = 5
	var names []string
	for i, ep := range eps {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(eps)-shown))
			break
		}
		if ep.Name != "" {
			names = append(names, ep.Name)
		} else {
			names = append(names, redact.URL(ep.URL))
		}
	}
	return strings.Join(names, ", ")
}

// FanOut makes one request per endpoint of tp from sub, a submission
// without url: each is its own request, with its own retries, DLQ entry
// and callbacks, and knows its topic and publication pubID. idemKey
// ("": none) becomes one key per endpoint, so a repeated publish makes
// nothing twice and completes what an earlier one left undone. prepare
// adjusts each parsed request (the QStash dialect adds its fields). An
// error after the first endpoint is a *PartialFanOut.
func (a *API) FanOut(c *gin.Context, tp *record.Topic, pubID string, sub map[string]any, idemKey string,
	prepare func(*record.Request)) ([]FannedOut, error) {
	var out []FannedOut
	for i, ep := range tp.Endpoints {
		f, err := a.fanOutOne(c, tp, i, pubID, sub, idemKey, prepare)
		if err != nil {
			err = fmt.Errorf("endpoint %s: %w", redact.URL(ep.URL), err)
			if i > 0 {
				err = &PartialFanOut{Made: out, Missing: tp.Endpoints[i:], Err: err}
			}
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

// fanOutOne makes the request of endpoint i of tp.
func (a *API) fanOutOne(c *gin.Context, tp *record.Topic, i int, pubID string, sub map[string]any, idemKey string,
	prepare func(*record.Request)) (FannedOut, error) {
	ep := tp.Endpoints[i]
	now := a.Now()
	sub["url"] = ep.URL
	raw, _ := json.Marshal(sub)
	r, err := submit.Parse(raw, now)
	if err != nil {
		return FannedOut{}, err
	}
	r.Topic, r.Publication = tp.Name, pubID
	if prepare != nil {
		prepare(r)
	}
	key := ""
	if idemKey != "" {
		// Each endpoint's own key, which it also receives as its
		// Idempotency-Key: the publish's, and which endpoint.
		sum := sha256.Sum256([]byte(ep.URL))
		key = idemKey + "/" + hex.EncodeToString(sum[:6])
	}
	replay, err := a.Accept(c, r, key, raw, now)
	if err != nil {
		return FannedOut{}, err
	}
	f := FannedOut{Child: record.Child{ID: r.ID, Endpoint: ep.Name, URL: ep.URL, Index: i}, SameBody: true}
	if replay != nil {
		f.ID, f.Replayed, f.SameBody = replay.ID, true, replay.SameBody
	}
	return f, nil
}

// PublicationDocument is a publish to a topic: its requests, each with
// its status, and how many are in each status.
type PublicationDocument struct {
	ID        string               `json:"id"`
	Tenant    string               `json:"tenant"`
	Topic     string               `json:"topic"`
	CreatedAt string               `json:"createdAt"`
	Requests  []PublicationRequest `json:"requests"`
	Counts    map[string]int       `json:"counts"`
}

// PublicationRequest is one request of a publication; Status is null once
// the request's record expired.
type PublicationRequest struct {
	ID       string         `json:"id"`
	Endpoint string         `json:"endpoint,omitempty"`
	URL      string         `json:"url"`
	Status   *record.Status `json:"status"`
}

func (t *Topics) publish(c *gin.Context) {
	if err := requireJSON(c); err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	idemKey := c.GetHeader("Idempotency-Key")
	if err := submit.ValidIdempotencyKey(idemKey); err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, submit.MaxBytes+1))
	if err != nil || len(body) > submit.MaxBytes {
		Abort(c, t.API.Log, tooLarge())
		return
	}
	var sub map[string]any
	if err := json.Unmarshal(body, &sub); err != nil || sub == nil {
		Abort(c, t.API.Log, Errorf(CodeInvalid, "", "body must be a JSON object: a submission without url"))
		return
	}
	if u, ok := sub["url"]; ok && u != "" {
		Abort(c, t.API.Log, Errorf(CodeInvalid, "url", "a topic's requests go to its endpoints: leave url out"))
		return
	}
	tp, owner, err := t.load(c)
	if err == nil {
		err = PayFor(c, len(tp.Endpoints)) // the rate limit counts each request, before any is made
	}
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	ctx := c.Request.Context()
	pub := &record.Publication{ID: t.API.newID(t.API.Now(), ""), Tenant: owner, Topic: tp.Name, CreatedAt: t.API.Now()}
	resumed := false
	if idemKey != "" {
		// The key names one publication for its window. A publish that
		// finds it claimed resumes that publication: the endpoints' own
		// keys make nothing twice and make what is missing (a publish cut
		// short, a crash, or one running now beside this one).
		sum := sha256.Sum256(append([]byte(tp.Name+"\n"), body...))
		prev, err := t.Store.ClaimPublication(ctx, owner, idemKey, pub.ID, hex.EncodeToString(sum[:]))
		if err != nil {
			Abort(c, t.API.Log, err)
			return
		}
		if prev != nil {
			if !prev.SameBody {
				Abort(c, t.API.Log, Errorf(CodeConflict, "Idempotency-Key", "Idempotency-Key was already used with a different body"))
				return
			}
			pub.ID, resumed = prev.ID, true
		} else {
			t.Faults.Hit(faultpoint.AfterPublicationClaim)
		}
	}
	made, err := t.API.FanOut(c, tp, pub.ID, sub, idemKey, nil)
	replayed := len(made) > 0
	for _, m := range made {
		pub.Children = append(pub.Children, m.Child)
		replayed = replayed && m.Replayed
		if m.Replayed && !m.SameBody && err == nil {
			err = Errorf(CodeConflict, "Idempotency-Key", "Idempotency-Key was already used with a different body")
		}
	}
	if len(pub.Children) > 0 {
		if serr := t.Store.SavePublication(context.WithoutCancel(ctx), pub); serr != nil && err == nil {
			err = serr
		}
	} else if idemKey != "" && !resumed {
		// Nothing made: the key names nothing yet.
		if rerr := t.Store.ReleasePublication(context.WithoutCancel(ctx), owner, idemKey, pub.ID); rerr != nil {
			t.API.Log.Error("could not release a publication's Idempotency-Key", "publicationId", pub.ID, "err", rerr)
		}
	}
	if err != nil {
		t.abortPartial(c, pub.ID, err)
		return
	}
	c.Header("Location", "/publications/"+pub.ID)
	status := http.StatusAccepted
	if replayed {
		c.Header("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	t.writePublication(c, tenant.Only(owner), pub.ID, status)
}

// abortPartial answers the error that cut a publish short; a fan-out cut
// short also names its publication and the endpoints that got nothing.
func (t *Topics) abortPartial(c *gin.Context, pubID string, err error) {
	var partial *PartialFanOut
	if !errors.As(err, &partial) {
		Abort(c, t.API.Log, err)
		return
	}
	apiErr := Resolve(c, t.API.Log, err)
	missing := make([]string, len(partial.Missing))
	for i, ep := range partial.Missing {
		missing[i] = redact.URL(ep.URL)
	}
	c.Header("Location", "/publications/"+pubID)
	c.AbortWithStatusJSON(apiErr.Status(), gin.H{"error": apiErr, "publicationId": pubID, "missingEndpoints": missing})
}

func (t *Topics) publication(c *gin.Context) {
	id := c.Param("id")
	scope, err := ScopeOf(c)
	if err == nil && !ids.Valid(id) {
		err = Errorf(CodeNotFound, "", "no publication with this id")
	}
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	t.writePublication(c, scope, id, http.StatusOK)
}

// writePublication answers publication id of scope with its requests'
// statuses, read now.
func (t *Topics) writePublication(c *gin.Context, scope tenant.Scope, id string, status int) {
	ctx := c.Request.Context()
	p, err := t.Store.GetPublication(ctx, scope, id)
	if errors.Is(err, record.ErrNotFound) {
		err = Errorf(CodeNotFound, "", "no publication with this id")
	}
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	d := PublicationDocument{ID: p.ID, Tenant: p.Tenant, Topic: p.Topic, CreatedAt: p.CreatedAt.UTC().Format(apidoc.TimeLayout),
		Requests: []PublicationRequest{}, Counts: map[string]int{}}
	for _, st := range record.Statuses {
		d.Counts[string(st)] = 0
	}
	for _, ch := range p.Children {
		pr := PublicationRequest{ID: ch.ID, Endpoint: ch.Endpoint, URL: redact.URL(ch.URL)}
		if r, err := t.API.Store.GetIn(ctx, tenant.Only(p.Tenant), ch.ID); err == nil {
			st := r.Status
			pr.Status = &st
			d.Counts[string(st)]++
		}
		d.Requests = append(d.Requests, pr)
	}
	c.JSON(status, d)
}
