package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/names"
)

// SettingsBody is the body of PUT /endpoints/{endpoint}/settings: the
// credential and proxy the tenant's requests to the endpoint use when
// they name none.
type SettingsBody struct {
	Credential string `json:"credential"`
	Proxy      string `json:"proxy"`
}

// endpointSettings is the path's endpoint and whose settings it names.
func endpointSettings(c *gin.Context) (owner, ep string, err error) {
	if owner, err = OwnTenant(c); err != nil {
		return "", "", err
	}
	ep, err = endpointOf(c.Param("endpoint"))
	return owner, ep, err
}

func (h *Credentials) putSettings(c *gin.Context) {
	owner, ep, err := endpointSettings(c)
	var raw []byte
	if err == nil {
		raw, err = readBody(c)
	}
	var b SettingsBody
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(&b) != nil {
			err = Errorf(CodeInvalid, "", `body must be a JSON object like {"credential": "partner-oauth", "proxy": "fixed-egress"} `+
				`(each optional; neither removes the settings)`)
		}
	}
	for _, f := range []struct{ field, v string }{{"credential", b.Credential}, {"proxy", b.Proxy}} {
		if err == nil {
			err = names.Credential.Check(f.field, f.v)
		}
	}
	if err == nil {
		err = CheckCredentials(c.Request.Context(), h.Store, owner,
			NamedCredential{Field: "credential", Name: b.Credential}, NamedCredential{Field: "proxy", Name: b.Proxy, Proxy: true})
	}
	set := credentials.Settings{Endpoint: ep, Credential: b.Credential, Proxy: b.Proxy}
	if err == nil {
		err = h.Store.PutSettings(c.Request.Context(), owner, set)
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	h.API.Log.Info("endpoint settings set", "tenant", owner, "endpoint", ep, "credential", set.Credential, "proxy", set.Proxy)
	c.JSON(http.StatusOK, set)
}

func (h *Credentials) getSettings(c *gin.Context) {
	owner, ep, err := endpointSettings(c)
	var set credentials.Settings
	if err == nil {
		set, err = h.Store.GetSettings(c.Request.Context(), owner, ep)
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, set)
}

// deleteSettings removes the endpoint's settings and answers what they
// were, as other deletes do (empty when there were none: the state asked
// for holds either way).
func (h *Credentials) deleteSettings(c *gin.Context) {
	owner, ep, err := endpointSettings(c)
	var set credentials.Settings
	if err == nil {
		set, err = h.Store.GetSettings(c.Request.Context(), owner, ep)
	}
	if err == nil {
		err = h.Store.PutSettings(c.Request.Context(), owner, credentials.Settings{Endpoint: ep})
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	c.JSON(http.StatusOK, set)
}
