package dashboard

import (
	"embed"
	"html/template"
	"net/http"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// retryd's own pages, beside asynqmon's: its schedules (asynqmon's
// Schedulers page would list asynq's periodic tasks, which retryd does not
// use), and a request with its Resend and Expunge buttons. Their scripts
// call the API's own routes (POST /requests/{id}/resend, DELETE
// /requests/{id}/payload, GET /schedules, GET /requests/{id}) through
// apiPrefix, below the dashboard's path, where the browser sends the
// dashboard's credentials: every check, audit and Idempotency-Key of the
// API holds, and nothing of it is written twice.
const (
	pagesPrefix = "/retryd/"
	apiPrefix   = "/retryd/api"
)

//go:embed pages/*.html
var pageFiles embed.FS

var pages = template.Must(template.ParseFS(pageFiles, "pages/*.html"))

// apiRoutes are the API routes the pages call: method, the path below
// apiPrefix, and nothing else.
var apiRoutes = []struct {
	method string
	path   *regexp.Regexp
}{
	{http.MethodGet, regexp.MustCompile(`^/schedules$`)},
	{http.MethodGet, regexp.MustCompile(`^/requests/[0-9a-z]+$`)},
	{http.MethodPost, regexp.MustCompile(`^/requests/[0-9a-z]+/resend$`)},
	{http.MethodDelete, regexp.MustCompile(`^/requests/[0-9a-z]+/payload$`)},
}

var requestPage = regexp.MustCompile(`^/retryd/requests/([0-9a-z]+)$`)

// ownPage serves path (below Root) when it is one of retryd's pages or
// their API calls, and says whether it was.
func (d *Dashboard) ownPage(c *gin.Context, path string) bool {
	if rest, ok := strings.CutPrefix(path, apiPrefix); ok {
		d.forwardAPI(c, rest)
		return true
	}
	if c.Request.Method != http.MethodGet || path == countsPath || !strings.HasPrefix(path, pagesPrefix) {
		return false
	}
	switch m := requestPage.FindStringSubmatch(path); {
	case path == pagesPrefix+"schedules":
		d.render(c, "schedules.html", "")
	case m != nil && ids.Valid(m[1]):
		d.render(c, "request.html", m[1])
	default:
		handlers.Abort(c, d.Log, handlers.Errorf(handlers.CodeNotFound, "", "no such dashboard page: retryd's are "+
			d.Root+"/retryd/schedules and "+d.Root+"/retryd/requests/{id}"))
	}
	return true
}

func (d *Dashboard) render(c *gin.Context, name, id string) {
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(http.StatusOK)
	if err := pages.ExecuteTemplate(c.Writer, name, struct{ Root, ID string }{d.Root, id}); err != nil {
		d.Log.Error("dashboard page", "page", name, "err", err)
	}
}

// forwardAPI has the API serve the call of one of retryd's pages: the
// same request, credentials and body, at the API's path.
func (d *Dashboard) forwardAPI(c *gin.Context, path string) {
	allowed := false
	for _, r := range apiRoutes {
		allowed = allowed || (r.method == c.Request.Method && r.path.MatchString(path))
	}
	if !allowed || d.API == nil {
		handlers.Abort(c, d.Log, handlers.Errorf(handlers.CodeNotFound, "", "the dashboard's pages call GET /schedules, "+
			"GET /requests/{id}, POST /requests/{id}/resend and DELETE /requests/{id}/payload only"))
		return
	}
	// The pages' calls are the dashboard's: recorded as its actor, which
	// no caller of the API may claim.
	req := c.Request.Clone(handlers.ActingAs(c.Request.Context(), record.DashboardActor))
	req.URL.Path, req.URL.RawPath, req.RequestURI = path, "", ""
	d.API.ServeHTTP(c.Writer, req)
	c.Abort()
}
