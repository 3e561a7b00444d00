package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/agree"
	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/dashboard"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/listeners"
	"github.com/retryd/retryd/internal/logs"
	"github.com/retryd/retryd/internal/openapi"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/qstash"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/tracing"
	"github.com/retryd/retryd/internal/waiting"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
	"github.com/retryd/retryd/tasks"
)

// Bounds on shutdown.
const (
	// DrainBound is how long in-flight attempts may run on after SIGTERM;
	// then their calls are cut and recorded as interrupted.
	DrainBound = 8 * time.Second
	// WorkerShutdownTimeout is asynq's bound, after which it hands
	// unfinished tasks back to the queue; above DrainBound so that the
	// handlers end on their own first.
	WorkerShutdownTimeout = 10 * time.Second
	// SchedulerInterval is the shortest pause of a worker between looks for
	// due schedules; it sleeps until the next fire it knows of, at most
	// scheduler.MaxSleep.
	SchedulerInterval = 100 * time.Millisecond
	// SweepGrace keeps the sweeper off records changed this recently.
	SweepGrace = 5 * time.Second
	// APIShutdownTimeout is how long the API drains in-flight requests.
	APIShutdownTimeout = 10 * time.Second
)

// NewLogger returns the programs' logger: JSON unless w is a terminal.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: redactAttr}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			h = slog.NewTextHandler(w, opts)
		}
	}
	log := slog.New(logs.Dedup(h))
	// go-redis logs through its own package-level logger: route it here.
	redis.SetLogger(logs.Redis{L: log.With("component", "go-redis")})
	return log
}

// redactAttr masks secret URL query parameters in every logged string and
// error, whichever code logged them (asynq's and go-redis' lines too).
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		if s := v.String(); strings.Contains(s, "://") {
			a.Value = slog.StringValue(redact.Text(s))
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && strings.Contains(err.Error(), "://") {
			a.Value = slog.StringValue(redact.Text(err.Error()))
		}
	}
	return a
}

// Options are the command-line switches of cmd/api.
type Options struct {
	// Dev runs the API with an in-process worker on an embedded,
	// in-memory Redis, with private destinations allowed.
	Dev bool
	// Faults are crash-test fault points; nil in production.
	Faults *faultpoint.Points
	// Listen is the address to serve on; empty means every interface on
	// PORT, or 127.0.0.1 on PORT with Dev (a laptop's dev server is not
	// for the network it sits on).
	Listen string
	// QStashDevAddr is where Dev also serves the API as QStash's local
	// development server (QSTASH_DEV=true clients call 127.0.0.1:8080);
	// empty serves it nowhere.
	QStashDevAddr string
}

// The public credentials of QStash's local development server, built into
// its official SDK: with QSTASH_DEV=true a client sends this token, and a
// Receiver verifies with these keys.
const (
	QStashDevToken      = "eyJVc2VySUQiOiJkZWZhdWx0VXNlciIsIlBhc3N3b3JkIjoiZGVmYXVsdFBhc3N3b3JkIn0="
	QStashDevCurrentKey = "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r"
	QStashDevNextKey    = "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs"
)

// listenAddr is where the API serves.
func (o Options) listenAddr(port int) string {
	switch {
	case o.Listen != "":
		return o.Listen
	case o.Dev:
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	return fmt.Sprintf(":%d", port)
}

// RunAPI serves the API until ctx ends, then drains in-flight requests.
func RunAPI(ctx context.Context, cfg config.Config, opts Options, log *slog.Logger) error {
	if opts.Dev {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return fmt.Errorf("start embedded redis: %w", err)
		}
		defer mr.Close()
		// Without a clock, miniredis never expires keys (retention,
		// the idempotency window).
		mr.ClockTTL(true)
		cfg.RedisURL = "redis://" + mr.Addr()
		cfg.RedisSentinelAddrs, cfg.RedisClusterAddrs = nil, nil
		cfg.AllowPrivateTargets = true
		if cfg.SecretsKeys == nil {
			// A key of this process's own, in the cfg the in-process
			// worker gets too: what it seals lives as long as the
			// embedded Redis does.
			cfg.SecretsKeys = credentials.DevKeyring()
		}
		if opts.QStashDevAddr != "" {
			// QStash's dev server signs with the SDK's public dev keys and
			// takes its public dev token.
			if cfg.QStashCurrentSigningKey == "" {
				cfg.QStashCurrentSigningKey, cfg.QStashNextSigningKey = QStashDevCurrentKey, QStashDevNextKey
			}

		}
		log.Warn("DEV MODE: embedded in-memory Redis and an in-process worker; NOTHING PERSISTS, loopback and private destinations are allowed (link-local and cloud metadata stay refused)")
	}
	log.Info("retryd api starting", "config", cfg.String())
	if len(cfg.APIKeys) == 0 {
		log.Warn("API_KEYS is not set: the API accepts requests from anyone who can reach it")
	}
	warnDefaultRedis(cfg, log)
	// The port first: a port in use is the error to report, before any
	// word about Redis.
	ln, err := net.Listen("tcp", opts.listenAddr(cfg.Port))
	if err != nil {
		return fmt.Errorf("listen on %s (PORT, or -listen): %w", opts.listenAddr(cfg.Port), err)
	}
	defer ln.Close()

	rdb, connOpt, err := redisConn(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := checkRedis(ctx, rdb, log); err != nil {
		return err
	}
	// The API rings the workers' doorbell when it makes a task pending
	// (redrive, the dashboard's "run"); it never waits on it.
	parts, err := partition.New(cfg.Partitions)
	if err != nil {
		return err
	}
	rdb.AddHook(tasks.NewPartitionedBell(rdb, parts, 0, waiting.Tuning{}))
	if _, port, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		// The API refuses destinations aimed at itself: it must know the
		// port it really listens on.
		if p, err := strconv.Atoi(port); err == nil && p > 0 {
			cfg.Port = p
		}
	}
	// Every listener of this process is refused as a destination from the
	// moment it listens, and listed in Redis for the other processes.
	own := &egress.Own{}
	book := listeners.New(record.NewStore(rdb, cfg.Retention), own, clock.Real, log.With("component", "listeners"))
	agreement := agree.New(record.NewStore(rdb, cfg.Retention), agree.Self(cfg, config.API), clock.Real, log.With("component", "agree"))
	if err := agreement.Refresh(ctx); err != nil {
		log.Warn("could not record this API's settings in Redis; the next renewal will", "err", err)
	}
	traces, err := tracing.New(ctx, "retryd-api")
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = traces.Shutdown(sctx)
	}()
	eo := EngineOptions{Faults: opts.Faults, Own: own, Agreement: agreement, Traces: traces}
	if opts.Dev {
		eo.LoopbackOnly = true
		if opts.QStashDevAddr != "" {
			// The SDK's dev token is public: a key on its listener only.
			eo.DevListenerKeys = []handlers.Key{{Secret: QStashDevToken, Tenant: tenant.Default, Admin: len(cfg.AdminKeys) == 0}}
		}
	}
	engine, closeEngine := APIEngine(cfg, rdb, connOpt, eo, log)
	defer closeEngine()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workerDone := make(chan error, 1)
	bookDone := make(chan struct{})
	go func() { defer close(bookDone); book.Run(ctx) }()
	defer func() { cancel(); <-bookDone }()
	agreeDone := make(chan struct{})
	go func() { defer close(agreeDone); agreement.Run(ctx) }()
	defer func() { cancel(); <-agreeDone }()
	go watchWorkers(ctx, liveWorkers(asynq.NewInspectorFromRedisClient(rdb)), log)
	if opts.Dev {
		// The in-process worker shares this process's listeners.
		go func() { workerDone <- RunWorker(ctx, cfg, WorkerOptions{Listeners: book}, log) }()
	} else {
		close(workerDone)
	}

	srv := &http.Server{
		Handler:           engine,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	book.Add(ctx, ln.Addr())
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("retryd api listening", "addr", ln.Addr().String())
	if opts.Dev {
		base := "http://" + ln.Addr().String()
		fmt.Fprintf(os.Stderr, "\nretryd dev server\n  API:        %s\n  dashboard:  %s%s\n", base, base, DashboardPath)
		if addr := opts.QStashDevAddr; addr != "" && addr != ln.Addr().String() {
			// The same API, also where QStash's SDK looks for its dev server.
			if qln, err := net.Listen("tcp", addr); err != nil {
				log.Warn("the QStash dev server address is taken; QSTASH_DEV=true clients will not reach retryd", "addr", addr, "err", err)
			} else {
				qsrv := &http.Server{Handler: handlers.OnDevListener(engine), ReadHeaderTimeout: srv.ReadHeaderTimeout, ReadTimeout: srv.ReadTimeout,
					WriteTimeout: srv.WriteTimeout, IdleTimeout: srv.IdleTimeout}
				defer qsrv.Close()
				book.Add(ctx, qln.Addr())
				go func() { serveErr <- qsrv.Serve(qln) }()
				fmt.Fprintf(os.Stderr, "  QStash dev: http://%s (QSTASH_DEV=true clients; token and signing keys are the SDK's dev ones)\n", qln.Addr().String())
			}
		}
		fmt.Fprintln(os.Stderr)
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("retryd api shutting down: draining in-flight requests")
	sctx, scancel := context.WithTimeout(context.Background(), APIShutdownTimeout)
	defer scancel()
	err = srv.Shutdown(sctx)
	cancel()
	if werr := <-workerDone; werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// EngineOptions are what APIEngine takes beyond the configuration.
type EngineOptions struct {
	// Faults are crash-test fault points; nil in production.
	Faults *faultpoint.Points
	// Traces exports the submissions' spans; nil: off.
	Traces *tracing.Tracer
	// DevListenerKeys and LoopbackOnly: see Access (-dev sets them).
	DevListenerKeys []handlers.Key
	LoopbackOnly    bool
	// Own are retryd's listeners, refused as destinations; nil for none
	// (tests of the engine alone).
	Own *egress.Own
	// Agreement records this process's settings and reads the others';
	// nil: none (tests of the engine alone).
	Agreement *agree.Book
	// ReplicaWait is how long a change waits for REDIS_WAIT_REPLICAS
	// replicas before it is answered 503; zero: a second.
	ReplicaWait time.Duration
}

// APIEngine wires the whole API over one Redis: requests, DLQ, dashboard,
// metrics and the OpenAPI document, behind the access rules of cfg. close
// releases the dashboard's own Redis connection.
func APIEngine(cfg config.Config, rdb redis.UniversalClient, connOpt asynq.RedisConnOpt, eo EngineOptions, log *slog.Logger) (engine *gin.Engine, close func()) {
	faults := eo.Faults
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	guard := &egress.Guard{AllowPrivate: cfg.AllowPrivateTargets, Allowed: cfg.AllowedCIDRs, Own: eo.Own}
	parts, _ := partition.New(cfg.Partitions) // validated by config.Load
	store := record.NewPartitioned(rdb, cfg.Retention, parts)
	store.SetPayloadRetention(cfg.PayloadRetention)
	if cfg.RedisWaitReplicas > 0 {
		wait := eo.ReplicaWait
		if wait == 0 {
			wait = time.Second
		}
		store.RequireReplicas(cfg.RedisWaitReplicas, wait)
	}
	// The API never runs the timer; its bell rings the workers after a
	// wake the wake's own script could not ring (another partition's
	// task: an operator's resume, an endpoint closed).
	ringer := tasks.NewPartitionedBell(rdb, parts, 0, waiting.Tuning{})
	wait := tasks.NewWaiting(rdb, parts, waiting.NewTimer(rdb, parts, tasks.Queue, ringer, log, waiting.Tuning{}), waiting.Tuning{}, nil)
	queue := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: inspector, Parts: parts, Waiting: wait}
	m := clusterMetrics(store, inspector, rdb)
	api := &handlers.API{Traces: eo.Traces, Store: store, Queue: queue, Destinations: guard, Log: log, Now: time.Now, Metrics: m,
		Self: handlers.NewSelf(cfg.Port), Memory: store, MaxUnfinished: cfg.MaxUnfinishedPerKey,
		Parts: parts, Workers: liveWorkers(inspector), Replicas: store}
	if eo.Agreement != nil {
		api.Disagreements = eo.Agreement.Disagreements
	}
	creds := &credentials.Store{RDB: rdb, Keys: cfg.SecretsKeys}
	api.Credentials = creds
	rows := dashboard.Row{Records: store, Now: time.Now}
	ui := asynqmon.New(asynqmon.Options{RootPath: DashboardPath, RedisConnOpt: ringingConnOpt{connOpt, parts},
		PayloadFormatter: rows, ResultFormatter: rows})
	dlq := &handlers.DLQ{Store: store, Queue: queue, RedriveLimit: cfg.RedriveLimit, API: api, Faults: faults,
		EndpointStates: func(ctx context.Context, names []string) (map[string]string, error) {
			return flow.EndpointStates(ctx, rdb, names)
		}}
	schedules := &handlers.Schedules{Store: store, API: api, Limit: cfg.ScheduleLimit}
	workflows := workflow.New(rdb, cfg.Retention)
	topics := &handlers.Topics{Store: store, API: api, Faults: faults}
	// A canceled queue message gives its place to the next; a canceled
	// request waiting for its open endpoint, its turn to be the probe.
	api.Canceled = func(ctx context.Context, id string) {
		r, err := store.Get(ctx, id)
		if err != nil {
			return
		}
		if err := flow.EndpointCanceled(ctx, rdb, wait, log, r.Tenant, r.Endpoint(), id); err != nil {
			log.Warn("could not take a canceled request out of its endpoint's line; the next probe may wait for a waiter's safety net", "requestId", id, "err", err)
		}
		if r.QStash == nil || r.QStash.Queue == "" {
			return
		}
		if err := flow.QueueNext(ctx, rdb, wait, log, tenant.Qualify(r.Tenant, r.QStash.Queue), id); err != nil {
			log.Warn("could not give a canceled message's place in its queue to the next; the next admission does", "requestId", id, "err", err)
		}
	}
	flows := &handlers.Flows{RDB: rdb, API: api, Mover: wait, Capacity: func(ctx context.Context) (int, int, error) {
		servers, err := inspector.Servers()
		slots, busy := 0, 0
		for _, sv := range servers {
			slots += sv.Concurrency
			busy += len(sv.ActiveWorkers)
		}
		return slots, busy, err
	}}
	// The dashboard, /metrics and the signing keys (in qstash.API) show
	// every tenant: admin keys only.
	admin := func(r Router) Router {
		return RouterFunc(func(g gin.IRouter) { r.Routes(g.Group("/", handlers.AdminOnly(log))) })
	}
	dash := &dashboard.Dashboard{UI: ui, Root: DashboardPath, Records: store, Counter: store, Actions: dashboardActions{dlq, api}, Log: log, Now: time.Now,
		Endpoints: func(ctx context.Context) ([]flow.EndpointInfo, error) { return flow.HeldEndpoints(ctx, rdb) }}
	tenants := &handlers.Tenants{Store: store, Keys: AccessKeys(cfg), API: api}
	engine = NewEngine(api, Access{Keys: AccessKeys(cfg), RateLimitRPS: cfg.RateLimitRPS, Limiter: redis_rate.NewLimiter(rdb), Failures: store,
		DevListenerKeys: eo.DevListenerKeys, LoopbackOnly: eo.LoopbackOnly}, log,
		dlq,
		schedules,
		flows,
		&handlers.Endpoints{RDB: rdb, API: api, Mover: wait, Limit: cfg.EndpointLimit},
		&handlers.Retention{Store: store, Tenants: tenants, API: api},
		&handlers.Credentials{Store: creds, API: api},
		tenants,
		topics,
		&qstash.API{API: api, DLQ: dlq, Schedules: schedules, Topics: topics, Flows: flows, Queues: store, QueueLimit: cfg.QueueLimit, CurrentKey: cfg.QStashCurrentSigningKey, NextKey: cfg.QStashNextSigningKey,
			Workflows: workflows, Invokes: &invoke.Returner{Store: store, Queue: queue, Runs: workflows, Log: log, Now: time.Now}},
		admin(dash),
		admin(RouterFunc(func(r gin.IRouter) { r.GET("/metrics", gin.WrapH(m.Handler())) })),
		RouterFunc(func(r gin.IRouter) {
			r.GET("/openapi.json", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", openapi.Document) })
		}))
	dash.API = engine
	return engine, func() { _ = ui.Close() }
}

// AccessKeys are the API's keys as cfg lists them: API_KEYS of their
// tenants, ADMIN_KEYS admins of the default tenant. While ADMIN_KEYS is
// unset the default tenant's keys are the admins, as every key was before
// tenants; a named tenant's key never is.
func AccessKeys(cfg config.Config) []handlers.Key {
	var out []handlers.Key
	for _, k := range cfg.APIKeys {
		out = append(out, handlers.Key{Secret: k.Secret, Tenant: k.Tenant, Admin: len(cfg.AdminKeys) == 0 && k.Tenant == tenant.Default})
	}
	for _, k := range cfg.AdminKeys {
		out = append(out, handlers.Key{Secret: k, Tenant: tenant.Default, Admin: true})
	}
	return out
}

// Access is the API's access control: keys and the rate limit.
type Access struct {
	Keys         []handlers.Key
	RateLimitRPS int
	// Limiter counts requests for the rate limit; needed when RateLimitRPS > 0.
	Limiter *redis_rate.Limiter
	// Failures counts failed authentications per client address; nil
	// turns the throttle off.
	Failures handlers.AuthFailures
	// DevListenerKeys are keys on the QStash dev listener only (the SDK's
	// public dev token).
	DevListenerKeys []handlers.Key
	// LoopbackOnly refuses requests not addressed to a loopback name
	// (-dev).
	LoopbackOnly bool
}

// DashboardPath is where the asynqmon dashboard is mounted.
const DashboardPath = "/monitoring"

// Router registers more routes behind the API's access control.
type Router interface{ Routes(gin.IRouter) }

// RouterFunc adapts a function to Router.
type RouterFunc func(gin.IRouter)

// Routes implements Router.
func (f RouterFunc) Routes(r gin.IRouter) { f(r) }

// dashboardActions are the dashboard's actions: retryd's redrive and
// cancel.
type dashboardActions struct {
	dlq *handlers.DLQ
	api *handlers.API
}

func (a dashboardActions) Redrive(ctx context.Context, id, actor, reason string) error {
	return a.dlq.Redrive(ctx, tenant.All, id, actor, reason) // the dashboard is an admin's
}

func (a dashboardActions) Cancel(ctx context.Context, id string) error {
	return a.api.Cancel(ctx, tenant.All, id, dashboard.Actor)
}

// PublicRouter is a Router with routes that take no key.
type PublicRouter interface {
	PublicRoutes(r gin.IRouter)
}

// NewEngine builds the gin engine of the API: the probes, then everything
// else behind the API keys and the rate limit.
func NewEngine(api *handlers.API, access Access, log *slog.Logger, more ...Router) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	// ClientIP (the rate-limit key without API keys) must be the peer
	// address, not a client-supplied X-Forwarded-For.
	_ = e.SetTrustedProxies(nil)
	e.Use(gin.CustomRecovery(func(c *gin.Context, v any) {
		handlers.Abort(c, log, fmt.Errorf("panic: %v", v))
	}))
	e.HandleMethodNotAllowed = true
	e.NoRoute(func(c *gin.Context) {
		handlers.Abort(c, log, handlers.Errorf(handlers.CodeNotFound, "", "no such route: "+c.Request.Method+" "+c.Request.URL.Path))
	})
	e.NoMethod(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, gin.H{"error": handlers.Errorf("method_not_allowed", "", "method not allowed on "+c.Request.URL.Path)})
	})
	if access.LoopbackOnly {
		e.Use(handlers.LoopbackHost(log))
	}
	api.Health(e)
	e.Use(handlers.SameOrigin(log), handlers.NoLoops(log))
	// Routes whose URL is their credential (a workflow's webhook): no
	// key, the same rate limit (by client address).
	public := e.Group("/")
	if access.RateLimitRPS > 0 {
		public.Use(handlers.RateLimit(access.Limiter, access.RateLimitRPS, log))
	}
	for _, r := range more {
		if p, ok := r.(PublicRouter); ok {
			p.PublicRoutes(public)
		}
	}
	guarded := e.Group("/", handlers.Auth(access.Keys, access.DevListenerKeys, access.Failures, log))
	if access.RateLimitRPS > 0 {
		guarded.Use(handlers.RateLimit(access.Limiter, access.RateLimitRPS, log))
	}
	if api.Replicas != nil {
		// One rule for every route that changes something, whatever its
		// dialect: answered once the replicas hold the change.
		guarded.Use(handlers.WaitReplicas(api.Replicas, log))
	}
	api.Routes(guarded)
	for _, r := range more {
		r.Routes(guarded)
	}
	return e
}

// Healthcheck asks a local /healthz and reports whether it answered 200.
// The images have no shell or curl; compose and Kubernetes run the program
// itself with -healthcheck.
func Healthcheck(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// ringingConnOpt makes the Redis clients asynqmon opens ring the workers'
// doorbell, so a task run from the dashboard starts at once.
type ringingConnOpt struct {
	asynq.RedisConnOpt
	parts partition.Set
}

// MakeRedisClient implements asynq.RedisConnOpt.
func (o ringingConnOpt) MakeRedisClient() any {
	c := o.RedisConnOpt.MakeRedisClient().(redis.UniversalClient)
	c.AddHook(tasks.NewPartitionedBell(c, o.parts, 0, waiting.Tuning{}))
	return c
}
