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
	"regexp"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

// TopicStore is the record store as the topic routes use it.
type TopicStore interface {
	AddEndpoints(ctx context.Context, tenant, name string, eps []record.Endpoint, now time.Time) error
	RemoveEndpoints(ctx context.Context, tenant, name string, eps []record.Endpoint, now time.Time) error
	GetTopic(ctx context.Context, tenant, name string) (*record.Topic, error)
	ListTopics(ctx context.Context, scope tenant.Scope) ([]*record.Topic, error)
	DeleteTopic(ctx context.Context, tenant, name string) error
	SavePublication(ctx context.Context, p *record.Publication) error
	GetPublication(ctx context.Context, scope tenant.Scope, id string) (*record.Publication, error)
	ClaimPublication(ctx context.Context, tenant, idemKey, id string) (string, error)
	ReleasePublication(ctx context.Context, tenant, idemKey, id string) error
}

// Topics serves topics: named sets of endpoints a request is published to,
// one request per endpoint (QStash's URL groups, in retryd's own API).
type Topics struct {
	Store TopicStore
	API   *API
}

// Routes registers the topic routes.
func (t *Topics) Routes(r gin.IRouter) {
	r.GET("/topics", t.list)
	r.GET("/topics/:name", t.get)
	r.DELETE("/topics/:name", t.delete)
	r.POST("/topics/:name/endpoints", t.addEndpoints)
	r.DELETE("/topics/:name/endpoints", t.removeEndpoints)
	r.POST("/topics/:name/requests", t.publish)
	r.GET("/publications/:id", t.publication)
}

// topicName is what a topic may be called: QStash's URL group names.
var topicName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// ValidTopicName refuses a name a topic cannot have.
func ValidTopicName(name string) error {
	if !topicName.MatchString(name) {
		return Errorf(CodeInvalid, "name", "a topic's name is 1 to 128 of letters, digits, _ . : and -")
	}
	return nil
}

// OwnTenant is whose named things (a topic, a flow-control key) a call
// names: the key's tenant, or for an admin the tenant its tenant
// parameter names (else the default one's).
func OwnTenant(c *gin.Context) (string, error) {
	scope, err := ScopeOf(c)
	if err != nil {
		return "", err
	}
	if one, ok := scope.One(); ok {
		return one, nil
	}
	return TenantOf(c), nil
}

// TopicDocument is a topic as the API shows it.
type TopicDocument struct {
	Name      string            `json:"name"`
	Tenant    string            `json:"tenant"`
	Endpoints []record.Endpoint `json:"endpoints"`
	CreatedAt string            `json:"createdAt"`
	UpdatedAt string            `json:"updatedAt"`
}

func topicDocument(tp *record.Topic) TopicDocument {
	return TopicDocument{Name: tp.Name, Tenant: tp.Tenant, Endpoints: TopicEndpoints(tp),
		CreatedAt: tp.CreatedAt.UTC().Format(apidoc.TimeLayout), UpdatedAt: tp.UpdatedAt.UTC().Format(apidoc.TimeLayout)}
}

// TopicEndpoints are tp's endpoints as people see them: secrets in their
// URLs redacted, as everywhere.
func TopicEndpoints(tp *record.Topic) []record.Endpoint {
	out := make([]record.Endpoint, 0, len(tp.Endpoints))
	for _, e := range tp.Endpoints {
		out = append(out, record.Endpoint{Name: e.Name, URL: redact.URL(e.URL)})
	}
	return out
}

// notFoundTopic is the answer for a topic the tenant does not have.
func notFoundTopic(name string) error {
	return Errorf(CodeNotFound, "", "no topic named "+name)
}

// load reads the topic the path names.
func (t *Topics) load(c *gin.Context) (*record.Topic, string, error) {
	name := c.Param("name")
	if err := ValidTopicName(name); err != nil {
		return nil, "", notFoundTopic(name)
	}
	owner, err := OwnTenant(c)
	if err != nil {
		return nil, "", err
	}
	tp, err := t.Store.GetTopic(c.Request.Context(), owner, name)
	if errors.Is(err, record.ErrNotFound) {
		err = notFoundTopic(name)
	}
	return tp, owner, err
}

func (t *Topics) list(c *gin.Context) {
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	tps, err := t.Store.ListTopics(c.Request.Context(), scope)
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	out := make([]TopicDocument, len(tps))
	for i, tp := range tps {
		out[i] = topicDocument(tp)
	}
	c.JSON(http.StatusOK, gin.H{"data": out})
}

func (t *Topics) get(c *gin.Context) {
	tp, _, err := t.load(c)
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, topicDocument(tp))
}

func (t *Topics) delete(c *gin.Context) {
	tp, owner, err := t.load(c)
	if err == nil {
		err = t.Store.DeleteTopic(c.Request.Context(), owner, tp.Name)
	}
	if errors.Is(err, record.ErrNotFound) {
		err = notFoundTopic(c.Param("name"))
	}
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, topicDocument(tp))
}

// ReadEndpoints reads {"endpoints": [{"name": …, "url": …}, …]}: 1 to
// MaxTopicEndpoints of them; with adding, each URL must pass the
// destination rules (checked now, and again on every publish).
func (a *API) ReadEndpoints(c *gin.Context, adding bool) ([]record.Endpoint, error) {
	raw, err := readBody(c)
	if err != nil {
		return nil, err
	}
	var in struct {
		Endpoints []record.Endpoint `json:"endpoints"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, Errorf(CodeInvalid, "endpoints", `body must be {"endpoints": [{"name": "optional", "url": "https://…"}]}`)
	}
	if len(in.Endpoints) == 0 || len(in.Endpoints) > record.MaxTopicEndpoints {
		return nil, Errorf(CodeInvalid, "endpoints", fmt.Sprintf("endpoints must list 1 to %d endpoints", record.MaxTopicEndpoints))
	}
	for i, e := range in.Endpoints {
		field := fmt.Sprintf("endpoints[%d]", i)
		if len(e.Name) > 128 {
			return nil, Errorf(CodeInvalid, field+".name", "an endpoint's name is at most 128 characters")
		}
		if !adding {
			if e.URL == "" && e.Name == "" {
				return nil, Errorf(CodeInvalid, field, "name an endpoint by its url or its name")
			}
			continue
		}
		if _, err := egress.ValidateURL(e.URL); err != nil {
			return nil, Errorf(CodeInvalid, field+".url", field+".url "+err.Error())
		}
		if err := a.checkDestinations(c, &record.Request{URL: e.URL}, field+"."); err != nil {
			return nil, err
		}
	}
	return in.Endpoints, nil
}

func (t *Topics) changeEndpoints(c *gin.Context, adding bool) {
	name := c.Param("name")
	if err := ValidTopicName(name); err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	owner, err := OwnTenant(c)
	var eps []record.Endpoint
	if err == nil {
		eps, err = t.API.ReadEndpoints(c, adding)
	}
	if err == nil {
		ctx, now := c.Request.Context(), t.API.Now()
		if adding {
			err = t.Store.AddEndpoints(ctx, owner, name, eps, now)
		} else {
			err = t.Store.RemoveEndpoints(ctx, owner, name, eps, now)
		}
	}
	if errors.Is(err, record.ErrTopicFull) {
		err = Errorf(CodeInvalid, "endpoints", err.Error())
	}
	if err != nil {
		Abort(c, t.API.Log, err)
		return
	}
	tp, err := t.Store.GetTopic(c.Request.Context(), owner, name)
	switch {
	case errors.Is(err, record.ErrNotFound): // the last endpoint removed: gone
		c.JSON(http.StatusOK, TopicDocument{Name: name, Tenant: owner, Endpoints: []record.Endpoint{}})
	case err != nil:
		Abort(c, t.API.Log, err)
	default:
		c.JSON(http.StatusOK, topicDocument(tp))
	}
}

func (t *Topics) addEndpoints(c *gin.Context)    { t.changeEndpoints(c, true) }
func (t *Topics) removeEndpoints(c *gin.Context) { t.changeEndpoints(c, false) }

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
