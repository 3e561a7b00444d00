package handlers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/record"
)

// Replicas confirms that Redis replicas hold every change this process
// has made so far (record.Store.Replicated).
type Replicas interface {
	Replicated(ctx context.Context) error
	// ReplicasRequired is how many replicas are asked for; 0 turns the
	// confirmation off.
	ReplicasRequired() int
}

// replicaRetryAfter is the Retry-After of a change the replicas did not
// confirm: they catch up, or Sentinel fails over, within seconds.
const replicaRetryAfter = 1

// Context keys of WaitReplicas.
const (
	// confirmedKey marks a call whose changes confirmed themselves (a
	// submission: record.Store.Create waits for the replicas, and takes
	// an unconfirmed request back before the 503).
	confirmedKey = "retryd.replicasConfirmed"
	// dialectKey holds how the route's dialect answers an error
	// (func(*gin.Context, error)); unset: Abort.
	dialectKey = "retryd.dialect"
)

// confirmedByCreate notes that this call's changes were confirmed by the
// store as it made them.
func confirmedByCreate(c *gin.Context) { c.Set(confirmedKey, true) }

// Dialect makes WaitReplicas answer the routes after it with fail, the
// dialect's own error shape (QStash's {"error": "..."}).
func Dialect(fail func(*gin.Context, error)) gin.HandlerFunc {
	return func(c *gin.Context) { c.Set(dialectKey, fail) }
}

// WaitReplicas holds the answer of every call that may change something
// (any method but GET, HEAD and OPTIONS) until the replicas confirm the
// change: a success is answered only once they hold it, and otherwise
// becomes a 503 with Retry-After. What the call changed is then in effect
// on the primary, and lost only if the primary fails before a replica has
// it; repeating the call is safe (docs/reliability.md). Failures are
// answered at once: they changed nothing to confirm. Without required
// replicas it adds nothing to a call.
func WaitReplicas(r Replicas, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if r.ReplicasRequired() == 0 {
			c.Next()
			return
		}
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			c.Next()
			return
		}
		orig := c.Writer
		before := orig.Header().Clone()
		held := &heldWriter{ResponseWriter: orig, status: http.StatusOK}
		c.Writer = held
		c.Next()
		c.Writer = orig
		if held.status >= 200 && held.status < 300 && !c.GetBool(confirmedKey) {
			if err := r.Replicated(c.Request.Context()); err != nil {
				// The held answer is dropped, headers and all but its
				// Location: what a creation made, to read before
				// making it again.
				h := orig.Header()
				made := h.Get("Location")
				for k := range h {
					delete(h, k)
				}
				for k, v := range before {
					h[k] = v
				}
				if made != "" {
					h.Set("Location", made)
				}
				notConfirmed(c, log, err, made)
				return
			}
		}
		orig.WriteHeader(held.status)
		if held.body.Len() > 0 {
			_, _ = orig.Write(held.body.Bytes())
		} else if held.wrote {
			orig.WriteHeaderNow()
		}
	}
}

// notConfirmed answers a change the replicas did not confirm.
// made is the Location of what the call created, if it did.
func notConfirmed(c *gin.Context, log *slog.Logger, err error, made string) {
	if errors.Is(err, record.ErrChangeNotReplicated) {
		log.Warn("a change was made but too few replicas confirmed it; answered 503", "path", c.FullPath(), "err", err)
		c.Header("Retry-After", strconv.Itoa(replicaRetryAfter))
		msg := "the change was made, but too few Redis replicas confirmed it in time (REDIS_WAIT_REPLICAS), " +
			"so a failover could still undo it; in a moment, repeat the call (a repeat changes nothing twice) or read the state back"
		if made != "" {
			msg = "it was made (" + made + "), but too few Redis replicas confirmed it in time (REDIS_WAIT_REPLICAS), " +
				"so a failover could still undo it; in a moment, read " + made + " back and make it again only if it is missing"
		}
		err = Errorf(CodeUnavailable, "", msg)
	}
	if fail, ok := c.Value(dialectKey).(func(*gin.Context, error)); ok {
		fail(c, err)
		return
	}
	Abort(c, log, err)
}

// heldWriter keeps a handler's answer until WaitReplicas lets it go.
// Headers go to the real writer's map at once; the status and body wait.
type heldWriter struct {
	gin.ResponseWriter
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *heldWriter) WriteHeader(code int) {
	if code > 0 && !w.wrote {
		w.status = code
	}
}

func (w *heldWriter) WriteHeaderNow() { w.wrote = true }

func (w *heldWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.body.Write(b)
}

func (w *heldWriter) WriteString(s string) (int, error) {
	w.wrote = true
	return w.body.WriteString(s)
}

func (w *heldWriter) Status() int { return w.status }

func (w *heldWriter) Size() int {
	if !w.wrote {
		return -1
	}
	return w.body.Len()
}

func (w *heldWriter) Written() bool { return w.wrote }

// Flush holds too: nothing reaches the client before the replicas
// confirm.
func (w *heldWriter) Flush() {}
