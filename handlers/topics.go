package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/selection"
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
	ClaimPublication(ctx context.Context, tenant, idemKey, id, bodyHash string) (*record.Claim, error)
	ReleasePublication(ctx context.Context, tenant, idemKey, id string) error
}

// Topics serves topics: named sets of endpoints a request is published to,
// one request per endpoint (QStash's URL groups, in retryd's own API).
type Topics struct {
	Store  TopicStore
	API    *API
	Faults *faultpoint.Points // crash tests only; nil in production
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

// topicName is what a topic may be called: QStash's URL group names (and
// queue names), up to names.Topic's length.
var topicName = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// ValidTopicName refuses a name a topic cannot have.
func ValidTopicName(name string) error {
	if err := names.Topic.Check("name", name); err != nil {
		return err
	}
	if !topicName.MatchString(name) {
		return Errorf(CodeInvalid, "name", fmt.Sprintf("a topic's name is 1 to %d of letters, digits, _ . : and -", names.Topic.Max))
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
	return Errorf(CodeNotFound, "", "no topic named "+names.Quote(name))
}

// load reads the topic the path names: a name with a control character
// or too long is refused (400), one no topic can have is not found.
func (t *Topics) load(c *gin.Context) (*record.Topic, string, error) {
	name := c.Param("name")
	if err := names.Topic.Check("name", name); err != nil {
		return nil, "", err
	}
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
		if caller(c).Admin && c.Query(selection.TenantParam) == "" {
			// An admin key reaches every tenant's topics, but a name
			// alone is looked up in the key's own tenant.
			err = Errorf(CodeNotFound, "", fmt.Sprintf("no topic named %s in tenant %s; an admin key names another tenant's topic with ?tenant=NAME (GET /topics lists every tenant's topics)",
				names.Quote(name), names.Quote(owner)))
		}
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
		if err := names.EndpointName.Check(field+".name", e.Name); err != nil {
			return nil, err
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

// ChangeEndpoints adds (or removes) the endpoints the body lists to the
// topic the path names, and says whose topic it is; both APIs answer from
// there.
func (t *Topics) ChangeEndpoints(c *gin.Context, adding bool) (owner, name string, err error) {
	name = c.Param("name")
	if err := ValidTopicName(name); err != nil {
		return "", name, err
	}
	owner, err = OwnTenant(c)
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
	switch {
	case errors.Is(err, record.ErrTopicFull):
		err = Errorf(CodeConflict, "endpoints", fmt.Sprintf("topic limit reached: a topic has at most %d endpoints and a tenant at most %d topics; remove some first",
			record.MaxTopicEndpoints, record.MaxTopics))
	case errors.Is(err, record.ErrNotFound):
		err = notFoundTopic(name) // another tenant's topic is none of this one's
	}
	return owner, name, err
}

func (t *Topics) changeEndpoints(c *gin.Context, adding bool) {
	owner, name, err := t.ChangeEndpoints(c, adding)
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
