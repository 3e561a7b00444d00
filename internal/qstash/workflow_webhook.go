package qstash

// A workflow's webhook (the SDKs' createWebhook and waitForWebhook): the
// SDK makes its URL, /v2/workflows/hooks/{user}/{run}/{event}, with the
// user id its token carries (retryd reads it as the tenant's name) and an
// event id of its own; whoever calls the URL, with any method, notifies
// the run waiting on that event with the call itself. The URL is its
// credential: the route takes no key.

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

// PublicRoutes are the routes that take no key.
func (q *API) PublicRoutes(r gin.IRouter) {
	if q.Workflows != nil {
		r.Any("/v2/workflows/hooks/:user/:run/:eventId", q.webhook)
	}
}

// webhookCall is a webhook's call as the waiting step reads it.
type webhookCall struct {
	Proto  string              `json:"proto"`
	Host   string              `json:"host"`
	URL    string              `json:"url"`
	Method string              `json:"method"`
	Header map[string][]string `json:"header"`
	Body   string              `json:"body"` // base64
}

func (q *API) webhook(c *gin.Context) {
	user, run := c.Param("user"), c.Param("run")
	if !tenant.Valid(user) {
		q.fail(c, handlers.Errorf(handlers.CodeNotFound, "", "no such webhook"))
		return
	}
	id, err := eventID(c)
	if err == nil {
		err = names.WorkflowRun.Check("workflow run id", run)
	}
	if err != nil {
		q.fail(c, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, submit.MaxBytes+1))
	if err != nil || len(body) > submit.MaxBytes {
		q.fail(c, handlers.Errorf(handlers.CodeTooLarge, "", "a webhook's call is larger than 256 KiB"))
		return
	}
	proto := "http"
	if c.Request.TLS != nil {
		proto = "https"
	}
	data, _ := json.Marshal(webhookCall{Proto: proto, Host: c.Request.Host, URL: c.Request.URL.RequestURI(), Method: c.Request.Method,
		Header: c.Request.Header, Body: base64.StdEncoding.EncodeToString(body)}) // strings and a map of them: it encodes
	handlers.ActAs(c, user)
	out, err := q.notifyWaiters(c, id, run, data)
	if err != nil {
		q.fail(c, err)
		return
	}
	if len(out) == 0 {
		// Nobody heard it: its sender may call again once the run waits.
		q.fail(c, handlers.Errorf(handlers.CodeNotFound, "", "no workflow run waits for this webhook (yet): call it again once the run waits for it"))
		return
	}
	if out[0].Error != "" {
		q.fail(c, handlers.Errorf(handlers.CodeConflict, "", out[0].Error))
		return
	}
	c.JSON(http.StatusOK, gin.H{"messageId": out[0].MessageID})
}
