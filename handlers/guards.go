package handlers

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
)

// Guards against retryd being turned on itself or on its operators.

// NoLoops refuses every call that is one of retryd's own deliveries or
// callbacks (every call retryd sends carries egress.RequestIDHeader),
// whatever its method and whatever address or proxy led it here. Without
// it one submission whose callbackUrl is POST /requests makes a request
// whose callback makes another, without end, and a GET delivery could
// read /metrics (every tenant's figures) into a tenant's response body.
// The refusal is a 4xx, so the delivery fails for good instead of being
// retried.
func NoLoops(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.GetHeader(egress.RequestIDHeader) == "" {
			return
		}
		Abort(c, log, Errorf(CodeLoopDetected, "", "this call is a retryd delivery or callback (it carries "+egress.RequestIDHeader+
			"); retryd does not accept its own deliveries, so one submission cannot grow into an endless chain"))
	}
}

// SameOrigin refuses state-changing calls that a browser sent from another
// site. Browsers attach cached basic-auth credentials (the dashboard's
// login) to cross-site form posts and no-cors fetches, so without this a
// page anywhere could pause queues or redrive requests in an operator's
// name. Programs (curl, SDKs) send neither header and are not affected.
func SameOrigin(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if safeMethod(c.Request.Method) {
			return
		}
		switch c.GetHeader("Sec-Fetch-Site") {
		case "cross-site", "same-site":
			Abort(c, log, Errorf(CodeForbidden, "", "cross-site "+c.Request.Method+" refused: retryd's API and dashboard take state-changing calls only from their own origin"))
			return
		}
		origin := c.GetHeader("Origin")
		if origin == "" {
			return
		}
		u, err := url.Parse(origin)
		if err != nil || origin == "null" || !strings.EqualFold(u.Host, c.Request.Host) {
			Abort(c, log, Errorf(CodeForbidden, "", "request from origin "+names.Quote(origin)+" refused: retryd's API and dashboard take state-changing calls only from their own origin"))
		}
	}
}

// LoopbackHost refuses (403) every request whose Host is not a loopback
// name: localhost, 127.0.0.1 or [::1], with any port. It guards -dev,
// which listens on loopback with loopback destinations allowed: a web page
// whose name an attacker re-points at 127.0.0.1 (DNS rebinding) reaches
// the port from the browser, but its requests still name the attacker's
// host.
func LoopbackHost(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !loopbackName(c.Request.Host) {
			c.Header("Connection", "close")
			Abort(c, log, Errorf(CodeForbidden, "", "Host "+names.Quote(c.Request.Host)+" refused: in -dev mode retryd answers only requests "+
				"addressed to localhost, 127.0.0.1 or [::1], so that no web page can drive it through DNS rebinding"))
		}
	}
}

// loopbackName reports whether host (a Host header, maybe with a port)
// names the loopback interface.
func loopbackName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// Self describes where this API listens, so that a destination aimed at
// it is refused at submission (NoLoops catches whatever this misses, such
// as a public host name of a load balancer in front of the API).
type Self struct {
	// Port is the port the API listens on.
	Port int
	// Addrs are the addresses of this machine's interfaces.
	Addrs []netip.Addr
}

// NewSelf describes an API listening on port of this machine.
func NewSelf(port int) *Self {
	s := &Self{Port: port}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				s.Addrs = append(s.Addrs, p.Addr())
			}
		}
	}
	return s
}

// targets reports whether raw (a validated URL) points at this API, as
// reached by a client through requestHost.
func (s *Self) targets(raw, requestHost string) bool {
	if s == nil {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	// A Host without a port (a proxy in front, TLS ended there) names the
	// API whatever the port: match the host alone.
	reqHost, reqPort, err := net.SplitHostPort(requestHost)
	if err != nil {
		reqHost, reqPort = requestHost, port
	}
	host := strings.TrimRight(egress.DialHost(u.Hostname()), ".")
	if port == reqPort && host == strings.TrimRight(strings.ToLower(reqHost), ".") {
		return true
	}
	if port != strconv.Itoa(s.Port) {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	addr, ok := egress.ParseHost(host)
	if !ok {
		return false
	}
	if addr.IsLoopback() || addr.IsUnspecified() {
		return true
	}
	for _, a := range s.Addrs {
		if egress.Canonical(a) == addr {
			return true
		}
	}
	return false
}

// Failed authentication is throttled per client address, counted in Redis
// so the count holds across API replicas.
const (
	AuthFailureLimit  = 20
	AuthFailureWindow = time.Minute
)

// AuthFailures counts failed authentications per client address.
type AuthFailures interface {
	AuthFailure(ctx context.Context, ip string, window time.Duration) (n int64, left time.Duration, err error)
}

// authFailed answers a request without a valid key: 401, or 429 with
// Retry-After once its address has failed more than AuthFailureLimit
// times in the window. If Redis cannot count, the answer stays 401.
func authFailed(c *gin.Context, failures AuthFailures, log *slog.Logger, unauthorized *Error) {
	// Answer now and close: the server would otherwise read (up to 256 KiB
	// of) a body first, and wait for one that never comes.
	c.Header("Connection", "close")
	if failures != nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		n, left, err := failures.AuthFailure(ctx, c.ClientIP(), AuthFailureWindow)
		cancel()
		if err != nil {
			log.Warn("could not count a failed authentication", "err", err)
		} else if n > AuthFailureLimit {
			c.Header("Retry-After", strconv.Itoa(max(1, int((left+time.Second-1)/time.Second))))
			Abort(c, log, Errorf(CodeRateLimited, "", "too many failed authentications from this address ("+
				strconv.Itoa(AuthFailureLimit)+" a minute); retry later with a valid API key"))
			return
		}
	}
	Abort(c, log, unauthorized)
}

// MemoryReader tells how full Redis is.
type MemoryReader interface {
	Memory(ctx context.Context) (record.Memory, error)
}

// MemoryRefuseAt is the share of Redis's maxmemory above which submissions
// are refused with 503: the rest is left to the workers, which need it to
// finish what was accepted.
const MemoryRefuseAt = 0.9

// memoryGate asks Redis for its memory use at most once a second.
type memoryGate struct {
	mu   sync.Mutex
	at   time.Time
	full float64
}

func (g *memoryGate) check(ctx context.Context, mem MemoryReader, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.at) >= time.Second {
		m, err := mem.Memory(ctx)
		if err != nil {
			return err
		}
		g.at, g.full = now, m.Full()
	}
	if g.full >= MemoryRefuseAt {
		return Errorf(CodeUnavailable, "", "Redis is at "+strconv.Itoa(int(g.full*100))+
			"% of its maxmemory: submissions are refused until the workers drain it; nothing was stored, retry later")
	}
	return nil
}

// owner is who a call counts against (rate limit, unfinished requests):
// the key's tenant, or the client address when no keys are configured.
func owner(c *gin.Context) string {
	if _, ok := c.Get(callerCtx); ok {
		return "tenant:" + TenantOf(c)
	}
	return "ip:" + c.ClientIP()
}
