package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/tenant"
)

// The flow-control API: an operator reads a named flow-control key's
// state and pauses, resumes, pins, unpins or resets it (QStash's
// /v2/flowControl; retryd's /flows/{key}). A key is its tenant's.

// FlowInfo is one key's state, in QStash's names.
type FlowInfo struct {
	FlowControlKey      string `json:"flowControlKey"`
	Tenant              string `json:"tenant"`
	WaitListSize        int64  `json:"waitListSize"`
	ParallelismMax      int    `json:"parallelismMax"`
	ParallelismCount    int64  `json:"parallelismCount"`
	RateMax             int    `json:"rateMax"`
	RateCount           int64  `json:"rateCount"`
	RatePeriod          int64  `json:"ratePeriod"` // seconds
	RatePeriodStart     int64  `json:"ratePeriodStart"`
	IsPaused            bool   `json:"isPaused"`
	IsPinnedParallelism bool   `json:"isPinnedParallelism"`
	IsPinnedRate        bool   `json:"isPinnedRate"`
	// Released is how many waiting requests a resume let go (the answer
	// of POST /flows/{key}/resume only: after it, waitListSize is 0).
	Released *int `json:"released,omitempty"`
}

// checkKey refuses a key no client could have given its requests. Both
// APIs reach a key through Info and Act, so checking here covers every
// path that names one: a key holding a control character could spell
// another tenant's internal name.
func checkKey(key string) error {
	if key == "" {
		return Errorf(CodeInvalid, "key", "key: a flow-control key is 1 to 255 bytes")
	}
	return names.FlowKey.Check("key", key)
}

// Info reads key (as its tenant named it) of tenant owner.
func (f *Flows) Info(ctx context.Context, owner, key string) (FlowInfo, error) {
	if err := checkKey(key); err != nil {
		return FlowInfo{}, err
	}
	name := tenant.Qualify(owner, key)
	// What its requests ask for, as the workers last published it.
	var asked flow.KeyStats
	if stats, err := flow.Read(ctx, f.RDB, f.API.Now()); err == nil {
		for _, s := range stats {
			if s.Key == name {
				asked = s
			}
		}
	}
	return f.InfoOf(ctx, owner, key, asked)
}

// InfoOf is Info for a key whose published figures (asked) the caller
// read already: a list reads them once for all its keys.
func (f *Flows) InfoOf(ctx context.Context, owner, key string, asked flow.KeyStats) (FlowInfo, error) {
	now := f.API.Now()
	name := tenant.Qualify(owner, key)
	ctl, err := flow.ReadControl(ctx, f.RDB, name)
	if err != nil {
		return FlowInfo{}, err
	}
	d := FlowInfo{FlowControlKey: key, Tenant: tenant.Of(owner), ParallelismMax: asked.Parallelism, RateMax: asked.Rate,
		RatePeriod: asked.PeriodMs / 1000, IsPaused: ctl.Paused, IsPinnedParallelism: ctl.PinParallelism > 0, IsPinnedRate: ctl.PinRate > 0}
	if ctl.PinParallelism > 0 {
		d.ParallelismMax = ctl.PinParallelism
	}
	if ctl.PinRate > 0 {
		d.RateMax, d.RatePeriod = ctl.PinRate, int64(ctl.PinPeriod/time.Second)
	}
	info, err := flow.Info(ctx, f.RDB, name, d.RateMax, time.Duration(d.RatePeriod)*time.Second, now)
	if err != nil {
		return FlowInfo{}, err
	}
	d.WaitListSize, d.ParallelismCount, d.RateCount = info.Waiting, info.InFlight, info.RateCount
	if d.RatePeriod > 0 {
		d.RatePeriodStart = now.Truncate(time.Duration(d.RatePeriod) * time.Second).UnixMilli()
	}
	return d, nil
}

// FlowAction is one operator action on a key.
type FlowAction string

// The actions.
const (
	ActionPause     FlowAction = "pause"
	ActionResume    FlowAction = "resume"
	ActionPin       FlowAction = "pin"
	ActionUnpin     FlowAction = "unpin"
	ActionResetRate FlowAction = "resetRate"
)

// Act applies action to key of tenant owner. pin reads parallelism, rate
// and period (seconds) from the query, unpin parallelism and rate
// (true/false), as QStash's client sends them.
func (f *Flows) Act(c *gin.Context, owner, key string, action FlowAction) error {
	_, err := f.act(c, owner, key, action)
	return err
}

// act is Act answering, for a resume, how many waiting requests it let go.
func (f *Flows) act(c *gin.Context, owner, key string, action FlowAction) (released int, err error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	ctx, name := c.Request.Context(), tenant.Qualify(owner, key)
	switch action {
	case ActionPause:
		return 0, flow.Pause(ctx, f.RDB, name)
	case ActionResume:
		return flow.Resume(ctx, f.RDB, f.Mover, f.API.Log, name)
	case ActionResetRate:
		return 0, flow.ResetRate(ctx, f.RDB, name)
	case ActionPin:
		n := func(q string, lo, hi int) (int, error) {
			v := c.Query(q)
			if v == "" {
				return 0, nil
			}
			i, err := strconv.Atoi(v)
			if err != nil || i < lo || i > hi {
				return 0, Errorf(CodeInvalid, q, q+" must be an integer between "+strconv.Itoa(lo)+" and "+strconv.Itoa(hi))
			}
			return i, nil
		}
		par, err := n("parallelism", 1, 1_000_000)
		if err != nil {
			return 0, err
		}
		rate, err := n("rate", 1, 1_000_000)
		if err != nil {
			return 0, err
		}
		period, err := n("period", 1, 7*24*3600)
		if err != nil {
			return 0, err
		}
		if par == 0 && rate == 0 {
			return 0, Errorf(CodeInvalid, "parallelism", "pin needs parallelism or rate")
		}
		return 0, flow.Pin(ctx, f.RDB, name, par, rate, time.Duration(max(period, 1))*time.Second)
	case ActionUnpin:
		return 0, flow.Unpin(ctx, f.RDB, name, c.Query("parallelism") == "true", c.Query("rate") == "true")
	}
	return 0, Errorf(CodeNotFound, "", "no flow-control action "+names.Quote(string(action)))
}

// keyRoutes registers retryd's own /flows/{key} routes.
func (f *Flows) keyRoutes(r gin.IRouter) {
	r.GET("/flows/:key", func(c *gin.Context) { f.answer(c, "") })
	r.POST("/flows/:key/:action", func(c *gin.Context) { f.answer(c, FlowAction(c.Param("action"))) })
}

// answer does action ("": nothing) on the key the path names, then
// answers the key's state; a resume's answer says how many it released.
func (f *Flows) answer(c *gin.Context, action FlowAction) {
	owner, err := OwnTenant(c)
	released := 0
	if err == nil && action != "" {
		released, err = f.act(c, owner, c.Param("key"), action)
	}
	var d FlowInfo
	if err == nil {
		d, err = f.Info(c.Request.Context(), owner, c.Param("key"))
	}
	if err != nil {
		Abort(c, f.API.Log, err)
		return
	}
	if action == ActionResume {
		d.Released = &released
	}
	c.JSON(http.StatusOK, d)
}
