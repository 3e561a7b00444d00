package qstash

// What a workflow run's steps inherit of its start. The workflow SDK
// (1.x) sets a run's retries, retry delay, flow control, failure
// function and the user's headers only on the message that starts it,
// and expects the server to apply them to every later step (its feature
// WF_TriggerOnConfig): its steps carry none of them.

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
)

// inherited says whether header name of a run's start is one its later
// steps inherit.
func inherited(name string) bool {
	lower := strings.ToLower(name)
	switch lower {
	case "upstash-retries", "upstash-retry-delay", "upstash-flow-control-key", "upstash-flow-control-value",
		"upstash-failure-callback", "upstash-label", "content-type":
		return true
	}
	return strings.HasPrefix(lower, "upstash-forward-") || strings.HasPrefix(lower, "upstash-failure-callback-")
}

// runConfig is what a run's later steps inherit of h, its start's
// headers, as JSON; nil when nothing.
func runConfig(h http.Header) []byte {
	keep := http.Header{}
	for name, values := range h {
		if inherited(name) {
			keep[http.CanonicalHeaderKey(name)] = values
		}
	}
	if len(keep) == 0 {
		return nil
	}
	b, _ := json.Marshal(keep) // a map of strings: it encodes
	return b
}

// inherit is h, a later step's headers, with what it does not set itself
// taken from config (runConfig of the run's start). A step that sets its
// own retries or failure function keeps them.
func inherit(h http.Header, config []byte) http.Header {
	var keep http.Header
	if len(config) == 0 || json.Unmarshal(config, &keep) != nil || len(keep) == 0 {
		return h
	}
	out := h.Clone()
	for name, values := range keep {
		if out.Get(name) == "" {
			out[name] = values
		}
	}
	return out
}

// inheritRun is h, the headers of a step of run, with what the step
// inherits of the run's start. A run that is not found inherits nothing:
// its publish answers that.
func (q *API) inheritRun(c *gin.Context, run string, h http.Header) (http.Header, error) {
	if q.Workflows == nil {
		return h, nil
	}
	info, err := q.Workflows.Info(c.Request.Context(), handlers.TenantOf(c), run)
	if err != nil {
		return nil, err
	}
	return inherit(h, info.Config), nil
}
