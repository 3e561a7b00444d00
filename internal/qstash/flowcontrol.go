package qstash

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/tenant"
)

// QStash's flow-control API over retryd's flow control: the same keys,
// the tenant's own.

func (q *API) listFlowControl(c *gin.Context) {
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	stats, err := flow.Read(c.Request.Context(), q.Flows.RDB, q.API.Now())
	if err != nil {
		q.fail(c, err)
		return
	}
	out := []handlers.FlowInfo{}
	for _, s := range stats {
		owner, key := tenant.Split(s.Key)
		if !s.Named || !scope.Has(owner) {
			continue // a destination's own (host:port) key, or another tenant's
		}
		d, err := q.Flows.InfoOf(c.Request.Context(), owner, key, s)
		if err != nil {
			q.fail(c, err)
			return
		}
		out = append(out, d)
	}
	c.JSON(http.StatusOK, out)
}

func (q *API) getFlowControl(c *gin.Context) {
	owner, err := handlers.OwnTenant(c)
	var d handlers.FlowInfo
	if err == nil {
		d, err = q.Flows.Info(c.Request.Context(), owner, c.Param("key"))
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func (q *API) actOnFlowControl(action handlers.FlowAction) gin.HandlerFunc {
	return func(c *gin.Context) {
		owner, err := handlers.OwnTenant(c)
		if err == nil {
			err = q.Flows.Act(c, owner, c.Param("key"), action)
		}
		if err != nil {
			q.fail(c, err)
			return
		}
		c.Status(http.StatusOK)
	}
}

// globalParallelism is every live worker's slots, and how many are busy.
func (q *API) globalParallelism(c *gin.Context) {
	slots, busy, err := q.Flows.Capacity(c.Request.Context())
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"parallelismMax": slots, "parallelismCount": busy})
}
