package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/names"
)

// NewSigningSecret is the answer to POST /signing-secrets: the secret as
// listed, and its text (whsec_… for hmac; for ed25519 the public key,
// whpk_…), shown this once.
type NewSigningSecret struct {
	credentials.SigningSecret
	Secret string `json:"secret,omitempty"`
}

func (h *Credentials) createSecret(c *gin.Context) {
	owner, err := OwnTenant(c)
	if err == nil && h.Store.Keys == nil {
		err = noKeys()
	}
	var raw []byte
	if err == nil {
		raw, err = readBody(c)
	}
	var b struct {
		Type string `json:"type"`
	}
	if err == nil && len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(&b) != nil {
			err = Errorf(CodeInvalid, "", `body must be empty or a JSON object like {"type": "ed25519"} (type: hmac, the default, or ed25519)`)
		}
	}
	var out NewSigningSecret
	if err == nil {
		out.SigningSecret, out.Secret, err = h.Store.CreateSigningSecret(c.Request.Context(), owner, b.Type, h.API.Now())
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	if out.Type == credentials.Ed25519 {
		// The public key is the text shown; the private key stays sealed.
		out.Secret = ""
	}
	h.API.Log.Info("signing secret created", "tenant", owner, "id", out.ID, "type", out.Type)
	c.Header("Location", "/signing-secrets/"+out.ID)
	c.JSON(http.StatusCreated, out)
}

func (h *Credentials) deleteSecret(c *gin.Context) {
	owner, err := OwnTenant(c)
	id := c.Param("id")
	var gone *credentials.SigningSecret
	if err == nil {
		var all []credentials.SigningSecret
		all, err = h.Store.ListSigningSecrets(c.Request.Context(), owner)
		for i := range all {
			if all[i].ID == id {
				gone = &all[i]
			}
		}
	}
	if err == nil && gone != nil {
		var deleted bool
		if deleted, err = h.Store.DeleteSigningSecret(c.Request.Context(), owner, id); err == nil && !deleted {
			gone = nil
		}
	}
	if err == nil && gone == nil {
		err = Errorf(CodeNotFound, "", "no signing secret with id "+names.Quote(id)+" (GET /signing-secrets lists this tenant's)")
	}
	if err != nil {
		Abort(c, h.API.Log, err)
		return
	}
	h.API.Log.Info("signing secret deleted", "tenant", owner, "id", id)
	c.JSON(http.StatusOK, gone)
}
