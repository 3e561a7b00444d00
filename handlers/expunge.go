package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/apidoc"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// expungeBody names who erases a payload (optional; DefaultActor).
type expungeBody struct {
	Actor string `json:"actor"`
}

// expunge erases a finished request's payload (DELETE
// /requests/{id}/payload): its body, headers, result and the response
// bodies of its attempts, keeping the metadata. 200 with the document,
// which then reads "expunged": true; expunging again changes nothing and
// answers the same. A pending or retrying request is 409: its next
// attempt needs the payload, so it is canceled first.
func (a *API) expunge(c *gin.Context) {
	id := c.Param("id")
	if !ids.Valid(id) {
		Abort(c, a.Log, record.ErrNotFound)
		return
	}
	raw, err := readBody(c)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	b := &expungeBody{}
	if len(strings.TrimSpace(string(raw))) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(b); err != nil {
			Abort(c, a.Log, Errorf(CodeInvalid, "", "body must be empty or a JSON object like {\"actor\": \"alice\"}"))
			return
		}
	}
	if b.Actor, err = actorOf(c.Request.Context(), b.Actor); err != nil {
		Abort(c, a.Log, err)
		return
	}
	scope, err := ScopeOf(c)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	ctx := c.Request.Context()
	already, err := a.Store.Expunge(ctx, scope, id, b.Actor, a.Now())
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	if !already {
		a.Log.Info("request payload expunged", "requestId", id, "actor", b.Actor)
	}
	r, err := a.Store.GetIn(ctx, scope, id)
	if err != nil {
		Abort(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, apidoc.NewDocument(r, true, a.Now()))
}
