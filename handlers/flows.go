package handlers

import (
	"context"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/tenant"
)

// Flows serves GET /flows: each active flow-control key, summed over the
// workers that publish it.
type Flows struct {
	RDB redis.UniversalClient
	API *API // logging, the clock
	// Mover starts the requests a resumed key held (the owner of
	// waiting).
	Mover flow.Mover
	// Capacity is the slots of every live worker and how many are busy
	// (QStash's global parallelism).
	Capacity func(ctx context.Context) (slots, busy int, err error)
}

// Routes registers the flows routes.
func (f *Flows) Routes(r gin.IRouter) {
	r.GET("/flows", f.list)
	f.keyRoutes(r)
}

// FlowDocument is one key of GET /flows.
type FlowDocument struct {
	Key string `json:"key"`
	// Tenant is whose key it is; a destination's own key (host:port, for
	// requests without a flowControl key) is shown as the default
	// tenant's.
	Tenant string `json:"tenant"`
	// InFlight are the attempts running now; Waiting the requests parked
	// for a slot (from Redis for keys with a parallelism, else those
	// parked in the last second).
	InFlight    int64  `json:"inFlight"`
	Waiting     int64  `json:"waiting"`
	Parallelism *int   `json:"parallelism"`
	Rate        *int   `json:"rate"`
	PeriodMs    *int64 `json:"periodMs"`
	// EffectiveRate is the starts per second the key is held to now: its
	// configured rate, or lower where adaptive backpressure cut it (summed
	// over the workers that did); null when nothing limits it.
	EffectiveRate *float64 `json:"effectiveRate"`
	// Attempts are the key's recent attempts (the last one to two
	// minutes); FailureShare the share of them that failed, whatever the
	// reason, and OverloadShare the share that answered 429 or 503 or
	// timed out (what adaptive backpressure acts on).
	Attempts      int     `json:"recentAttempts"`
	FailureShare  float64 `json:"failureShare"`
	OverloadShare float64 `json:"overloadShare"`
	// Paused: an operator paused the key; its requests wait (counted in
	// Waiting) until it is resumed.
	Paused bool `json:"paused"`
}

func (f *Flows) list(c *gin.Context) {
	now := f.API.Now()
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, f.API.Log, err)
		return
	}
	stats, err := flow.Read(c.Request.Context(), f.RDB, now)
	if err != nil {
		Abort(c, f.API.Log, err)
		return
	}
	// A paused key's waiters are in its paused line, which no worker
	// publishes: every paused key is listed with them.
	paused, err := flow.PausedKeys(c.Request.Context(), f.RDB)
	if err != nil {
		Abort(c, f.API.Log, err)
		return
	}
	for k := range paused {
		if !slices.ContainsFunc(stats, func(s flow.KeyStats) bool { return s.Key == k }) {
			stats = append(stats, flow.KeyStats{Key: k})
		}
	}
	out := make([]FlowDocument, 0, len(stats))
	for _, s := range stats {
		owner, key := tenant.Split(s.Key)
		if !scope.Has(owner) {
			continue
		}
		d := FlowDocument{Key: key, Tenant: owner, InFlight: int64(s.InFlight), Waiting: int64(s.Parked),
			Attempts: s.Succeeded + s.Overloaded + s.Failed}
		if s.Parallelism > 0 {
			d.Parallelism = &s.Parallelism
			if taken, waiting, err := flow.Slots(c.Request.Context(), f.RDB, s.Key, now); err == nil {
				d.InFlight, d.Waiting = taken, waiting
			}
		}
		n, isPaused := paused[s.Key]
		d.Waiting += n
		d.Paused = isPaused
		var eff float64
		if s.Rate > 0 {
			d.Rate, d.PeriodMs = &s.Rate, &s.PeriodMs
			eff = float64(s.Rate) * 1000 / float64(max(s.PeriodMs, 1))
		}
		if s.EffectiveRate > 0 && (eff == 0 || s.EffectiveRate < eff) {
			eff = s.EffectiveRate
		}
		if eff > 0 {
			d.EffectiveRate = &eff
		}
		if d.Attempts > 0 {
			d.FailureShare = float64(s.Overloaded+s.Failed) / float64(d.Attempts)
			d.OverloadShare = float64(s.Overloaded) / float64(d.Attempts)
		}
		out = append(out, d)
	}
	c.JSON(http.StatusOK, gin.H{"data": out})
}
