package qstash

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/tenant"
)

// QStash's URL groups are retryd's topics (the same records): a message
// published to one becomes one message per endpoint.

// URLGroup is a URL group as the QStash client reads it.
type URLGroup struct {
	Name      string            `json:"name"`
	CreatedAt int64             `json:"createdAt"`
	UpdatedAt int64             `json:"updatedAt"`
	Endpoints []record.Endpoint `json:"endpoints"`
}

func urlGroup(tp *record.Topic) URLGroup {
	return URLGroup{Name: tp.Name, CreatedAt: tp.CreatedAt.UnixMilli(), UpdatedAt: tp.UpdatedAt.UnixMilli(), Endpoints: handlers.TopicEndpoints(tp)}
}

// isURLGroup says whether a publish's destination names a URL group
// rather than a URL.
func isURLGroup(dest string) bool {
	return !strings.Contains(dest, "://") && handlers.ValidTopicName(dest) == nil
}

func (q *API) loadGroup(c *gin.Context, name string) (*record.Topic, string, error) {
	if err := names.Topic.Check("name", name); err != nil {
		return nil, "", err
	}
	owner, err := handlers.OwnTenant(c)
	if err != nil {
		return nil, "", err
	}
	tp, err := q.Topics.Store.GetTopic(c.Request.Context(), owner, name)
	if errors.Is(err, record.ErrNotFound) {
		err = handlers.Errorf(handlers.CodeNotFound, "", "url group "+names.Quote(name)+" not found")
	}
	return tp, owner, err
}

func (q *API) listGroups(c *gin.Context) {
	scope, err := handlers.ScopeOf(c)
	if err != nil {
		q.fail(c, err)
		return
	}
	tps, err := q.Topics.Store.ListTopics(c.Request.Context(), scope)
	if err != nil {
		q.fail(c, err)
		return
	}
	out := make([]URLGroup, len(tps))
	for i, tp := range tps {
		out[i] = urlGroup(tp)
	}
	c.JSON(http.StatusOK, out)
}

func (q *API) getGroup(c *gin.Context) {
	tp, _, err := q.loadGroup(c, c.Param("name"))
	if err != nil {
		q.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, urlGroup(tp))
}

// deleteGroup answers 200 for a URL group that does not exist, as QStash
// does: a client deletes a group to start afresh without asking first.
func (q *API) deleteGroup(c *gin.Context) {
	// A name no group can have is refused, as everywhere; a missing group
	// is deleted already, as on QStash.
	err := names.Topic.Check("name", c.Param("name"))
	owner := ""
	if err == nil {
		owner, err = handlers.OwnTenant(c)
	}
	if err == nil {
		err = q.Topics.Store.DeleteTopic(c.Request.Context(), owner, c.Param("name"))
	}
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		q.fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (q *API) changeGroup(c *gin.Context, adding bool) {
	if _, _, err := q.Topics.ChangeEndpoints(c, adding); err != nil {
		q.fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (q *API) addEndpoints(c *gin.Context)    { q.changeGroup(c, true) }
func (q *API) removeEndpoints(c *gin.Context) { q.changeGroup(c, false) }

// publishGroup publishes one message to each endpoint of URL group name:
// each its own message (retries, DLQ entry, callbacks), carrying the
// group's name.
func (q *API) publishGroup(c *gin.Context, name string, h http.Header, body []byte) ([]*Published, error) {
	tp, owner, err := q.loadGroup(c, name)
	if err != nil {
		return nil, err
	}
	sub, extra, err := submission(h, "", body)
	if err != nil {
		return nil, err
	}
	if extra.Queue != "" {
		if err := q.ensureQueue(c, owner, extra.Queue); err != nil {
			return nil, err
		}
	}
	key := dedupKey(h, name, body)
	made, err := q.API.FanOut(c, tp, "", sub, key, func(r *record.Request) {
		x := *extra
		r.Dialect, r.QStash = record.DialectQStash, &x
	})
	// The messages made before an error still join their queue's line.
	out := make([]*Published, len(made))
	for i, m := range made {
		out[i] = &Published{MessageID: m.ID, URL: redact.URL(m.URL), Deduplicated: m.Replayed}
		if extra.Queue != "" && !m.Replayed {
			if err := flow.JoinQueue(c.Request.Context(), q.Flows.RDB, tenant.Qualify(owner, extra.Queue), m.ID, q.API.Now()); err != nil {
				q.API.Log.Warn("could not put a message in its queue's line now", "requestId", m.ID, "err", err)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
