package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// Key is one API key and whose it is.
type Key struct {
	Secret string
	// Tenant owns what the key creates and is all it sees, unless Admin.
	Tenant string
	// Admin sees and acts on every tenant, and alone reaches the
	// dashboard, /metrics and the signing keys.
	Admin bool
}

// BareKeys are keys of the default tenant, admins as every key was before
// tenants (and as they are while ADMIN_KEYS is unset).
func BareKeys(secrets ...string) []Key {
	out := make([]Key, len(secrets))
	for i, s := range secrets {
		out[i] = Key{Secret: s, Tenant: tenant.Default, Admin: true}
	}
	return out
}

// callerCtx is where Auth leaves the caller's Key (without its secret).
const callerCtx = "retryd.caller"

// caller is who is calling: with no keys configured (or before Auth ran),
// the default tenant's admin, as every caller was before tenants.
func caller(c *gin.Context) Key {
	if k, ok := c.Get(callerCtx); ok {
		return k.(Key)
	}
	return Key{Tenant: tenant.Default, Admin: true}
}

// ActAs makes the caller of a route that takes no key (a workflow's
// webhook, whose URL is its credential) tenant t, with no more reach.
func ActAs(c *gin.Context, t string) { c.Set(callerCtx, Key{Tenant: t}) }

// TenantOf is the tenant what the caller creates belongs to.
func TenantOf(c *gin.Context) string { return tenant.Of(caller(c).Tenant) }

// Scope is what the caller reaches: a tenant key its own tenant; an admin
// key every tenant, or the one narrow names ("" for none: the tenant
// parameter of a list or bulk call). A tenant key that names another
// tenant is refused, rather than silently shown its own.
func Scope(c *gin.Context, narrow string) (tenant.Scope, error) {
	k := caller(c)
	if narrow != "" && !tenant.Valid(narrow) {
		return tenant.Scope{}, Errorf(CodeInvalid, selection.TenantParam, "tenant must be 1 to 64 of a-z, 0-9, _ and -")
	}
	if !k.Admin {
		if narrow != "" && narrow != tenant.Of(k.Tenant) {
			return tenant.Scope{}, Errorf(CodeForbidden, selection.TenantParam, "this API key sees its own tenant only")
		}
		return tenant.Only(k.Tenant), nil
	}
	if narrow != "" {
		return tenant.Only(narrow), nil
	}
	return tenant.All, nil
}

// ScopeOf is Scope narrowed by the request's tenant query parameter.
func ScopeOf(c *gin.Context) (tenant.Scope, error) { return Scope(c, c.Query(selection.TenantParam)) }

// AdminOnly refuses a caller whose key is not an admin key: 403.
func AdminOnly(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !caller(c).Admin {
			Abort(c, log, Errorf(CodeForbidden, "", "this needs an admin key (ADMIN_KEYS)"))
		}
	}
}

// TenantStore knows the tenants that have stored a request.
type TenantStore interface {
	// Tenants are the default tenant and every tenant that stored a
	// request, sorted.
	Tenants(ctx context.Context) ([]string, error)
}

// Tenants knows which tenants exist: the default tenant, each tenant an
// API_KEYS entry of this process names, and each that has stored a
// request (through any process). Every answer about a tenant asks it, so
// none names a tenant that does not exist.
type Tenants struct {
	Store TenantStore
	// Keys are this process' API keys.
	Keys []Key
	API  *API // logging
}

// TenantInfo is one tenant as GET /tenants lists it.
type TenantInfo struct {
	Tenant string `json:"tenant"`
	// Keys counts the API_KEYS entries of this process for it (0: it is
	// known from its stored requests only).
	Keys int `json:"keys"`
}

// Routes registers GET /tenants (an admin's).
func (h *Tenants) Routes(r gin.IRouter) {
	r.GET("/tenants", AdminOnly(h.API.Log), h.list)
}

// all are the tenants that exist, sorted.
func (h *Tenants) all(ctx context.Context) ([]TenantInfo, error) {
	names, err := h.Store.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	keys := map[string]int{}
	for _, k := range h.Keys {
		keys[tenant.Of(k.Tenant)]++
	}
	for t := range keys {
		names = append(names, t)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]TenantInfo, len(names))
	for i, t := range names {
		out[i] = TenantInfo{Tenant: t, Keys: keys[t]}
	}
	return out, nil
}

// Exists refuses a tenant that does not exist: 404 naming it.
func (h *Tenants) Exists(ctx context.Context, t string) error {
	all, err := h.all(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(all, func(i TenantInfo) bool { return i.Tenant == tenant.Of(t) }) {
		return nil
	}
	return Errorf(CodeNotFound, "tenant", "no tenant "+strconv.Quote(t)+": a tenant exists once an API_KEYS entry names it "+
		"or it has stored a request (GET /tenants lists them)")
}

func (h *Tenants) list(c *gin.Context) {
	all, err := h.all(c.Request.Context())
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"tenants": all})
}
