package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
)

// RetentionStore keeps the retention an admin sets per tenant.
type RetentionStore interface {
	DefaultRetention() record.Retention
	TenantRetention(ctx context.Context, t string) (record.Retention, error)
	SetTenantRetention(ctx context.Context, t string, set record.Retention, now time.Time) error
}

// Retention serves each tenant's retention: GET
// /tenants/{tenant}/retention (an admin's key, or the tenant's own), PUT
// and DELETE (an admin's). It is kept in Redis, so every process applies
// the same (within record.RetentionRefresh).
type Retention struct {
	Store RetentionStore
	// Tenants refuses a tenant that does not exist (GET and PUT: 404);
	// DELETE clears whatever is set, so a setting for a tenant gone since
	// can still be removed.
	Tenants *Tenants
	API     *API // logging, the clock
}

// Routes registers the retention routes.
func (h *Retention) Routes(r gin.IRouter) {
	r.GET("/tenants/:tenant/retention", h.get)
	r.PUT("/tenants/:tenant/retention", AdminOnly(h.API.Log), h.put)
	r.DELETE("/tenants/:tenant/retention", AdminOnly(h.API.Log), h.clear)
}

// RetentionSettings are two retentions written as RETENTION is ("30d",
// "720h"); null is the default's.
type RetentionSettings struct {
	Retention        *string `json:"retention"`
	PayloadRetention *string `json:"payloadRetention"`
}

// RetentionDocument is a tenant's retention: what applies to its requests
// (Retention; PayloadRetention, null when payloads live as long as their
// records), and what an admin set for it (Set; null fields are the
// defaults, RETENTION and PAYLOAD_RETENTION).
type RetentionDocument struct {
	Tenant           string            `json:"tenant"`
	Retention        string            `json:"retention"`
	PayloadRetention *string           `json:"payloadRetention"`
	Set              RetentionSettings `json:"set"`
}

func durationOrNull(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	s := config.FormatDuration(d)
	return &s
}

func (h *Retention) document(t string, set record.Retention) RetentionDocument {
	in := h.Store.DefaultRetention().Over(set)
	return RetentionDocument{Tenant: t, Retention: config.FormatDuration(in.Records), PayloadRetention: durationOrNull(in.Payload),
		Set: RetentionSettings{Retention: durationOrNull(set.Records), PayloadRetention: durationOrNull(set.Payload)}}
}

// tenantParam is the path's tenant, which the caller must reach.
func tenantParam(c *gin.Context) (string, error) {
	t := c.Param("tenant")
	if !tenant.Valid(t) {
		return "", Errorf(CodeInvalid, "tenant", "tenant must be 1 to 64 of a-z, 0-9, _ and -")
	}
	if _, err := Scope(c, t); err != nil {
		return "", err
	}
	return t, nil
}

// existingTenant is the path's tenant, which the caller must reach and
// which must exist.
func (h *Retention) existingTenant(c *gin.Context) (string, error) {
	t, err := tenantParam(c)
	if err != nil {
		return "", err
	}
	if err := h.Tenants.Exists(c.Request.Context(), t); err != nil {
		return "", err
	}
	return t, nil
}

func (h *Retention) get(c *gin.Context) {
	t, err := h.existingTenant(c)
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	set, err := h.Store.TenantRetention(c.Request.Context(), t)
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, h.document(t, set))
}

// parseRetention reads one field of a PUT body: null or absent is 0 (the
// default's).
func parseRetention(field string, v *string) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	d, err := config.ParseDuration(strings.TrimSpace(*v))
	if err != nil || d < time.Minute || d > config.MaxRetention {
		return 0, Errorf(CodeInvalid, field, fmt.Sprintf("%s must be a duration from 1m to 3650d such as 30d or 720h, or null for the default, got %q",
			field, *v))
	}
	return d, nil
}

func (h *Retention) put(c *gin.Context) {
	t, err := h.existingTenant(c)
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	raw, err := readBody(c)
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	var b RetentionSettings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		Abort(c, h.API.Log, Errorf(CodeInvalid, "", `body must be a JSON object like {"retention": "30d", "payloadRetention": "7d"} `+
			`(null or absent: the default, RETENTION or PAYLOAD_RETENTION)`))
		return
	}
	var set record.Retention
	if set.Records, err = parseRetention("retention", b.Retention); err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	if set.Payload, err = parseRetention("payloadRetention", b.PayloadRetention); err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	if in := h.Store.DefaultRetention().Over(set); in.Payload > in.Records {
		what := "the tenant's retention"
		if set.Records == 0 {
			what = "RETENTION, the default the tenant has"
		}
		Abort(c, h.API.Log, Errorf(CodeInvalid, "payloadRetention", fmt.Sprintf("payloadRetention %s is longer than %s (%s): a payload "+
			"cannot outlive its record; shorten payloadRetention or lengthen retention", config.FormatDuration(in.Payload), what,
			config.FormatDuration(in.Records))))
		return
	}
	h.save(c, t, set)
}

// clear gives the tenant the defaults again.
func (h *Retention) clear(c *gin.Context) {
	t, err := tenantParam(c)
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	h.save(c, t, record.Retention{})
}

func (h *Retention) save(c *gin.Context, t string, set record.Retention) {
	if err := h.Store.SetTenantRetention(c.Request.Context(), t, set, h.API.Now()); err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	doc := h.document(t, set)
	h.API.Log.Info("tenant retention set", "tenant", t, "retention", doc.Retention, "payloadRetention", doc.PayloadRetention)
	c.JSON(http.StatusOK, doc)
}
