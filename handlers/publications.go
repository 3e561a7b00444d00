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

	"github.com/gin-gonic/gin"
	"github.com/retryd/retryd/internal/apidoc"
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
}

// FanOut makes one request per endpoint of tp from sub, a submission
// without url: each is its own request, with its own retries, DLQ entry
// and callbacks, and knows its topic and publication pubID. idemKey
// ("": none) becomes one key per endpoint, so a repeated publish makes
// nothing twice. prepare adjusts each parsed request (the QStash dialect
// adds its fields). On an error, the requests accepted before it are
// returned with it.
func (a *API) FanOut(c *gin.Context, tp *record.Topic, pubID string, sub map[string]any, idemKey string,
	prepare func(*record.Request)) ([]FannedOut, error) {
	var out []FannedOut
	for _, ep := range tp.Endpoints {
		now := a.Now()
		sub["url"] = ep.URL
		raw, _ := json.Marshal(sub)
		r, err := submit.Parse(raw, now)
		if err != nil {
			return out, err
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
			return out, fmt.Errorf("endpoint %s: %w", ep.URL, err)
		}
		f := FannedOut{Child: record.Child{ID: r.ID, Endpoint: ep.Name, URL: ep.URL}}
		if replay != nil {
			f.ID, f.Replayed = replay.ID, true
		}
		out = append(out, f)
	}
	return out, nil
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
	if idemKey != "" {
		prev, err := t.Store.ClaimPublication(ctx, owner, idemKey, pub.ID)
		if err != nil {
			Abort(c, t.API.Log, err)
			return
		}
		if prev != "" {
			c.Header("Idempotent-Replayed", "true")
			t.writePublication(c, tenant.Only(owner), prev, http.StatusOK)
			return
		}
	}
	made, err := t.API.FanOut(c, tp, pub.ID, sub, idemKey, nil)
	for _, m := range made {
		pub.Children = append(pub.Children, m.Child)
	}
	if len(pub.Children) > 0 {
		if serr := t.Store.SavePublication(context.WithoutCancel(ctx), pub); serr != nil && err == nil {
			err = serr
		}
	} else if idemKey != "" {
		// Nothing made: a repeat with the key must try again.
		if rerr := t.Store.ReleasePublication(context.WithoutCancel(ctx), owner, idemKey, pub.ID); rerr != nil {
			t.API.Log.Error("could not release a publication's Idempotency-Key", "publicationId", pub.ID, "err", rerr)
		}
	}
	if err != nil {
		if len(made) > 0 {
			err = fmt.Errorf("%w (the requests to the endpoints before it were accepted: publication %s)", err, pub.ID)
		}
		Abort(c, t.API.Log, err)
		return
	}
	c.Header("Location", "/publications/"+pub.ID)
	t.writePublication(c, tenant.Only(owner), pub.ID, http.StatusAccepted)
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
