package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/tenant"
)

// Endpoints serves the endpoints' breakers: GET /endpoints lists those
// that are not closed or were used in the window (a tenant's own; an
// admin's, every tenant's), and
// POST /endpoints/{endpoint}/open and /close let an operator decide. In
// the path an endpoint is written scheme:host:port (https:api.example.com:443).
type Endpoints struct {
	RDB redis.UniversalClient
	API *API // logging, the clock
	// Mover starts the requests a closed endpoint held (the owner of
	// waiting).
	Mover flow.Mover
	// Limit is the most endpoints one tenant may have opened by hand
	// (ENDPOINT_LIMIT; 0: no limit).
	Limit int
}

// Routes registers the endpoints routes.
func (e *Endpoints) Routes(r gin.IRouter) {
	r.GET("/endpoints", e.list)
	r.POST("/endpoints/:endpoint/open", func(c *gin.Context) { e.act(c, true) })
	r.POST("/endpoints/:endpoint/close", func(c *gin.Context) { e.act(c, false) })
}

// EndpointDocument is one endpoint of GET /endpoints.
type EndpointDocument struct {
	// Endpoint is scheme://host:port; ID is how a path names it
	// (scheme:host:port).
	Endpoint string `json:"endpoint"`
	ID       string `json:"id"`
	Tenant   string `json:"tenant"`
	// State is closed, open or half_open (its probe is out), since Since.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// FailureRatio is the share of the window's attempts that failed for
	// the endpoint's reasons when it opened.
	FailureRatio float64 `json:"failureRatio"`
	// Waiting are the requests waiting for it to close.
	Waiting int64 `json:"waiting"`
	// NextProbeAt is when a waiting request is next sent as its probe
	// (half open: when the probe out ends at the latest); null when none
	// is planned: closed, opened by an operator (never probed), or no
	// request waits (the next to come is sent as the probe once the probe
	// interval has passed).
	NextProbeAt *time.Time `json:"nextProbeAt"`
	// OpenedBy is "breaker" or "operator".
	OpenedBy string `json:"openedBy,omitempty"`
}

func endpointDocument(info flow.EndpointInfo) EndpointDocument {
	owner, ep := tenant.Split(info.Name)
	d := EndpointDocument{Endpoint: ep, ID: strings.Replace(ep, "://", ":", 1), Tenant: owner, State: info.State,
		Since: info.Since.UTC(), FailureRatio: info.FailureRatio, Waiting: info.Waiting}
	if info.State != flow.EndpointClosed {
		d.OpenedBy = info.By
	}
	if !info.NextProbe.IsZero() {
		at := info.NextProbe.UTC()
		d.NextProbeAt = &at
	}
	return d
}

func (e *Endpoints) list(c *gin.Context) {
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, e.API.Log, err)
		return
	}
	infos, err := flow.Endpoints(c.Request.Context(), e.RDB, e.API.Now(), func(name string) bool {
		owner, _ := tenant.Split(name)
		return scope.Has(owner)
	})
	if err != nil {
		Abort(c, e.API.Log, err)
		return
	}
	out := make([]EndpointDocument, 0, len(infos))
	for _, info := range infos {
		out = append(out, endpointDocument(info))
	}
	c.JSON(http.StatusOK, gin.H{"data": out})
}

// endpointOf reads a path's scheme:host:port as scheme://host:port,
// through the one validator of endpoint names.
func endpointOf(id string) (string, error) { return names.Endpoint("endpoint", id) }

// act opens (open) or closes the endpoint the path names, of the caller's
// tenant, and answers its state.
func (e *Endpoints) act(c *gin.Context, open bool) {
	owner, err := OwnTenant(c)
	var ep string
	if err == nil {
		ep, err = endpointOf(c.Param("endpoint"))
	}
	ctx, now := c.Request.Context(), e.API.Now()
	name := flow.EndpointName(owner, ep)
	if err == nil {
		if open {
			_, err = flow.HandOpenEndpoint(ctx, e.RDB, name, e.Limit, now, flow.Tuning{})
			if errors.Is(err, flow.ErrEndpointLimit) {
				err = Errorf(CodeConflict, "endpoint", "endpoint limit reached: this tenant has "+strconv.Itoa(e.Limit)+
					" endpoints opened by hand (ENDPOINT_LIMIT); close one before opening "+strconv.Quote(ep))
			}
		} else {
			_, err = flow.CloseEndpoint(ctx, e.RDB, e.Mover, e.API.Log, name, now, flow.Tuning{})
		}
	}
	var info flow.EndpointInfo
	if err == nil {
		info, err = flow.ReadEndpoint(ctx, e.RDB, name)
	}
	if err != nil {
		Abort(c, e.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, endpointDocument(info))
}
