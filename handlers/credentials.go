package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
)

// Credentials serves a tenant's credentials (PUT, GET, DELETE
// /credentials/{name}, GET /credentials, an admin's POST
// /credentials/rekey), its defaults per endpoint (/endpoints/{endpoint}/
// settings) and its signing secrets (/signing-secrets). A tenant's key
// acts on its own tenant; an admin's on the default tenant, or the one
// ?tenant= names. Secrets go in and never come out: every answer is a
// credentials.View, a SigningSecret or Settings, which hold none (a new
// signing secret's text is shown once, in the answer that made it).
type Credentials struct {
	// Store keeps them; its Keys nil (SECRETS_KEYS unset) refuses to store
	// a secret with 501.
	Store *credentials.Store
	API   *API // logging, the clock, the destination rules
}

// Routes registers the credentials routes.
func (h *Credentials) Routes(r gin.IRouter) {
	r.PUT("/credentials/:name", h.put)
	r.GET("/credentials", ownList(h.API, h.Store.List))
	r.GET("/credentials/:name", h.get)
	r.DELETE("/credentials/:name", h.remove)
	r.POST("/credentials/rekey", AdminOnly(h.API.Log), h.rekey)
	r.GET("/endpoints/settings", ownList(h.API, h.Store.ListSettings))
	r.PUT("/endpoints/:endpoint/settings", h.putSettings)
	r.GET("/endpoints/:endpoint/settings", h.getSettings)
	r.DELETE("/endpoints/:endpoint/settings", h.deleteSettings)
	r.POST("/signing-secrets", h.createSecret)
	r.GET("/signing-secrets", ownList(h.API, h.Store.ListSigningSecrets))
	r.DELETE("/signing-secrets/:id", h.deleteSecret)
}

// noKeys is the answer when no key can seal a secret: 501, saying which
// variable to set.
func noKeys() error { return Errorf(CodeNotImplemented, "", credentials.ErrNoKeys.Error()) }

// credentialName is the path's credential name and whose it is.
func credentialName(c *gin.Context) (owner, name string, err error) {
	owner, err = OwnTenant(c)
	if err != nil {
		return "", "", err
	}
	name = c.Param("name")
	if name == "" {
		return "", "", Errorf(CodeInvalid, "name", fmt.Sprintf("name: a credential name is 1 to %d bytes", names.MaxCredential))
	}
	if err := names.Credential.Check("name", name); err != nil {
		return "", "", err
	}
	return owner, name, nil
}

func notFoundCredential(name string) error {
	return Errorf(CodeNotFound, "", "no credential named "+names.Quote(name)+" (GET /credentials lists this tenant's)")
}

// checker judges a URL a credential holds (a token endpoint, a proxy) by
// the destination rules that judge a request's url.
func (h *Credentials) checker(c *gin.Context) credentials.Checker {
	return func(ctx context.Context, u *url.URL) error {
		if h.API.Self.targets(u.String(), c.Request.Host) {
			return errors.New("it points at this retryd API")
		}
		return h.API.Destinations.CheckTarget(ctx, u.Hostname(), urlPort(u))
	}
}

func (h *Credentials) put(c *gin.Context) {
	owner, name, err := credentialName(c)
	if err == nil && h.Store.Keys == nil {
		err = noKeys()
	}
	var raw []byte
	if err == nil {
		raw, err = readBody(c)
	}
	now := h.API.Now()
	var spec *credentials.Spec
	if err == nil {
		spec, err = credentials.Parse(c.Request.Context(), raw, now, h.checker(c))
	}
	var view credentials.View
	created := false
	if err == nil {
		view, created, err = h.Store.Put(c.Request.Context(), owner, name, spec, now)
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	h.API.Log.Info("credential stored", "tenant", owner, "name", name, "type", view.Type, "created", created)
	c.JSON(status, view)
}

func (h *Credentials) get(c *gin.Context) {
	owner, name, err := credentialName(c)
	var view credentials.View
	if err == nil {
		view, err = h.Store.Get(c.Request.Context(), owner, name)
	}
	if errors.Is(err, credentials.ErrNotFound) {
		err = notFoundCredential(name)
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, view)
}

// ownList answers {"data": [...]}, what read lists of the caller's tenant:
// its credentials, endpoint defaults or signing secrets.
func ownList[T any](api *API, read func(ctx context.Context, tenant string) ([]T, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		owner, err := OwnTenant(c)
		var all []T
		if err == nil {
			all, err = read(c.Request.Context(), owner)
		}
		if err != nil {
			Abort(c, api.Log, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"data": all})
	}
}

// remove deletes a credential and answers what it was, as other deletes
// do. Requests that name it fail their next attempt with a
// credential_error.
func (h *Credentials) remove(c *gin.Context) {
	owner, name, err := credentialName(c)
	var view credentials.View
	if err == nil {
		view, err = h.Store.Get(c.Request.Context(), owner, name)
	}
	if err == nil {
		var deleted bool
		if deleted, err = h.Store.Delete(c.Request.Context(), owner, name); err == nil && !deleted {
			err = credentials.ErrNotFound
		}
	}
	if errors.Is(err, credentials.ErrNotFound) {
		err = notFoundCredential(name)
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	h.API.Log.Info("credential deleted", "tenant", owner, "name", name)
	c.JSON(http.StatusOK, view)
}

func (h *Credentials) rekey(c *gin.Context) {
	if h.Store.Keys == nil {
		Abort(c, h.API.Log, noKeys())
		return
	}
	n, err := h.Store.Rekey(c.Request.Context())
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	h.API.Log.Info("credentials resealed", "resealed", n, "key", h.Store.Keys.SealID())
	c.JSON(http.StatusOK, gin.H{"resealed": n})
}

// The headers that name a /v2 message's credential and proxy, retryd's
// own beside QStash's.
const (
	CredentialHeader = "Retryd-Credential"
	ProxyHeader      = "Retryd-Proxy"
)

// CredentialTypes tells the type of a tenant's credential
// (credentials.ErrNotFound when it has none of that name).
type CredentialTypes interface {
	TypeOf(ctx context.Context, tenant, name string) (string, error)
}

// NamedCredential is a credential a call names, and where: field is the
// body member or header that names it, proxy whether it must be a proxy.
type NamedCredential struct {
	Field, Name string
	Proxy       bool
}

// CheckCredentials refuses, with 422 naming the field, a credential the
// tenant does not have, a proxy named as a credential, and a credential
// that is not a proxy named as one.
func CheckCredentials(ctx context.Context, types CredentialTypes, owner string, named ...NamedCredential) error {
	for _, n := range named {
		if n.Name == "" {
			continue
		}
		typ := ""
		err := credentials.ErrNotFound
		if types != nil {
			typ, err = types.TypeOf(ctx, owner, n.Name)
		}
		switch {
		case errors.Is(err, credentials.ErrNotFound):
			return Errorf(CodeInvalidCredential, n.Field, fmt.Sprintf("%s names credential %s, which does not exist for this tenant "+
				"(PUT /credentials/{name} makes one; GET /credentials lists them)", n.Field, names.Quote(n.Name)))
		case err != nil:
			return fmt.Errorf("%w: read credential %s: %w", record.ErrUnavailable, n.Name, err)
		case n.Proxy && typ != credentials.Proxy:
			return Errorf(CodeInvalidCredential, n.Field, fmt.Sprintf("%s names credential %s, a %s credential, not a proxy; "+
				"name it as the credential instead", n.Field, names.Quote(n.Name), typ))
		case !n.Proxy && typ == credentials.Proxy:
			return Errorf(CodeInvalidCredential, n.Field, fmt.Sprintf("%s names %s, a proxy; name a proxy as the proxy instead", n.Field, names.Quote(n.Name)))
		}
	}
	return nil
}

// checkCredentials applies CheckCredentials to what request r names, for
// its tenant. prefix names where the request sits in the body ("request."
// in a schedule); a /v2 message names them in headers.
func (a *API) checkCredentials(ctx context.Context, r *record.Request, owner, prefix string) error {
	if r.Credential == "" && r.Proxy == "" {
		return nil
	}
	credField, proxyField := prefix+"credential", prefix+"proxy"
	if r.QStash != nil {
		credField, proxyField = CredentialHeader, ProxyHeader
	}
	return CheckCredentials(ctx, a.Credentials, owner,
		NamedCredential{Field: credField, Name: r.Credential}, NamedCredential{Field: proxyField, Name: r.Proxy, Proxy: true})
}
