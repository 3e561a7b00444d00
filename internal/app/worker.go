package app

// The worker: an asynq server performing the attempts, with the timer,
// the sweeper, the scheduler and flow control's loops beside it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/agree"
	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/events"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/gopool"
	"github.com/retryd/retryd/internal/listeners"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/scheduler"
	"github.com/retryd/retryd/internal/sign"
	"github.com/retryd/retryd/internal/sweeper"
	"github.com/retryd/retryd/internal/tracing"
	"github.com/retryd/retryd/internal/waiting"
	"github.com/retryd/retryd/internal/workflow"
	"github.com/retryd/retryd/internal/workflow/invoke"
	"github.com/retryd/retryd/tasks"
)

// WorkerOptions are a worker's test hooks.
type WorkerOptions struct {
	// Faults are crash-test fault points; nil in production.
	Faults *faultpoint.Points
	// Listeners are the process's listeners when the worker runs inside
	// the API (-dev), which keeps them; nil: the worker keeps its own.
	Listeners *listeners.Book
	// Waiting shrinks the timings of waiting (the timer, the safety net);
	// zero fields take waiting.DefaultTuning's.
	Waiting waiting.Tuning
	// Flow sets flow control's timings; zero fields take
	// flow.DefaultTuning's.
	Flow flow.Tuning
	// InTransit holds a parked request's task before it goes back to
	// asynq, and OnWake hears of each wake (tasks.Handler.InTransit,
	// waiting.Config.OnWake): tests of a wake that meets a task in
	// transit.
	InTransit func(ctx context.Context, id string)
	OnWake    func(id string, err error)
	// RedisHooks go on the worker's Redis client before any hook of its
	// own (tests that watch every command it sends).
	RedisHooks []redis.Hook
}

// RunWorker runs an asynq server performing deliveries, and the sweeper,
// until ctx ends. Then it stops fetching, lets in-flight attempts run for
// DrainBound, cuts the rest short (their attempts are recorded as
// interrupted and repeated by another worker) and exits.
func RunWorker(ctx context.Context, cfg config.Config, opts WorkerOptions, log *slog.Logger) error {
	log.Info("retryd worker starting", "config", cfg.String())
	warnDefaultRedis(cfg, log)
	rdb, _, err := redisConn(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	for _, h := range opts.RedisHooks {
		rdb.AddHook(h)
	}
	if err := checkRedis(ctx, rdb, log); err != nil {
		return err
	}
	parts, err := partition.New(cfg.Partitions)
	if err != nil {
		return err
	}
	store := record.NewPartitioned(rdb, cfg.Retention, parts)
	store.SetPayloadRetention(cfg.PayloadRetention)
	// The doorbell turns asynq's empty fetch into a wait.
	// Worker fetching: asynq polls for pending tasks; the doorbell (see
	// internal/waiting) makes an empty dequeue wait for a new task
	// instead, so a new request starts within a round trip and an idle
	// worker makes a few Redis calls a second.
	tune := opts.Waiting.WithDefaults()
	bell := tasks.NewPartitionedBell(rdb, parts, tune.BellWait, tune)
	rdb.AddHook(bell)

	book := opts.Listeners
	if book == nil {
		book = listeners.New(store, &egress.Own{}, clock.Real, log.With("component", "listeners"))
		if err := book.Refresh(ctx); err != nil {
			log.Warn("could not read retryd's listeners from Redis; the next renewal will", "err", err)
		}
		bookCtx, stopBook := context.WithCancel(context.Background())
		bookDone := make(chan struct{})
		go func() { defer close(bookDone); book.Run(bookCtx) }()
		// Kept until the last attempt ended: deliveries dial until then.
		defer func() { stopBook(); <-bookDone }()
	}
	// Retryd's own listeners are never destinations, whatever is allowed.
	// The settings that decide a request's fate, recorded for the other
	// processes; a destination refused here that an API accepted under
	// other rules says so.
	agreement := agree.New(store, agree.Self(cfg, config.Worker), clock.Real, log.With("component", "agree"))
	if err := agreement.Refresh(ctx); err != nil {
		log.Warn("could not record this worker's settings in Redis; the next renewal will", "err", err)
	}
	agreeCtx, stopAgree := context.WithCancel(context.Background())
	agreeDone := make(chan struct{})
	go func() { defer close(agreeDone); agreement.Run(agreeCtx) }()
	defer func() { stopAgree(); <-agreeDone }()
	guard := &egress.Guard{AllowPrivate: cfg.AllowPrivateTargets, Allowed: cfg.AllowedCIDRs, Own: book.Own(),
		Disagreement: func() string { return agreement.Explain(config.DestinationRules...) }}
	inspector := asynq.NewInspectorFromRedisClient(rdb)
	// retryd's timer starts waiting tasks on time; every worker runs it.
	timers := waiting.NewTimer(rdb, parts, tasks.Queue, bell, log.With("component", "timer"), opts.Waiting)
	wait := tasks.NewWaiting(rdb, parts, timers, opts.Waiting, opts.OnWake)
	queue := &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: inspector, Parts: parts, Waiting: wait}
	// Every delivery leaves through EGRESS_PROXY, when set, unless a proxy
	// credential of its own applies.
	client := guard.ClientWith(egress.ClientOptions{Proxy: cfg.EgressProxy})
	signer, err := sign.ParseSecrets(cfg.SigningSecrets)
	if err != nil {
		return fmt.Errorf("SIGNING_SECRETS: %w", err)
	}
	qsigner := &sign.QStash{Current: cfg.QStashCurrentSigningKey, Next: cfg.QStashNextSigningKey}
	traces, err := tracing.New(ctx, "retryd-worker")
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = traces.Shutdown(sctx)
	}()
	// The operator's events: request.failed here, endpoint changes in flow
	// control. What is given up is counted cluster-wide.
	notifier := events.New(cfg.OperatorEventsURLs, signer, func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = store.Count(ctx, "events", "given_up", int64(n))
	}, log.With("component", "events"), events.Tuning{})
	eventsCtx, stopEvents := context.WithCancel(context.Background())
	eventsDone := make(chan struct{})
	go func() { defer close(eventsDone); notifier.Run(eventsCtx) }()
	// Stopped last: the attempts cut short at shutdown may still fail.
	defer func() { stopEvents(); <-eventsDone }()
	// The attempts' counters, added to Redis once a second; stopped
	// after the last attempt ended (deferred, so after srv.Shutdown).
	countsCtx, stopCounts := context.WithCancel(context.Background())
	countsDone := make(chan struct{})
	go func() {
		defer close(countsDone)
		store.RunCounts(countsCtx, time.Second, func(err error) {
			log.Warn("could not add the attempts' counters to Redis; kept for the next try", "err", err)
		})
	}()
	defer func() { stopCounts(); <-countsDone }()
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	workflows := workflow.New(rdb, cfg.Retention)
	invokes := &invoke.Returner{Store: store, Queue: queue, Runs: workflows, Log: log, Now: time.Now}
	h := &tasks.Handler{
		Store:        store,
		Callbacks:    queue,
		Client:       client,
		Log:          log,
		Clock:        clock.Real,
		Rand:         rand.Float64,
		RedriveLimit: cfg.RedriveLimit,
		Stopping:     stopping,
		Faults:       opts.Faults,
		Signer:       signer,
		QStash:       qsigner,
		Waiting:      wait,
		InTransit:    opts.InTransit,
		Events:       notifier,
		Traces:       traces,
		EarlyWait:    tune.EarlyWait,
		Workflows:    workflows,
		Invokes:      invokes,
	}
	creds := &credentials.Book{Store: &credentials.Store{RDB: rdb, Keys: cfg.SecretsKeys}, Guard: guard, EgressProxy: cfg.EgressProxy, Base: client,
		Now: time.Now, Log: log.With("component", "credentials"), Failing: func(t, name, lastError string) {
			notifier.Emit(events.CredentialFailing, map[string]any{"tenant": t, "credential": name, "lastError": lastError})
		}}
	credsCtx, stopCreds := context.WithCancel(context.Background())
	creds.Start(credsCtx)
	credsDone := make(chan struct{})
	go func() {
		defer close(credsDone)
		creds.Store.WatchExpiring(credsCtx, time.Now, func(tr credentials.Trouble) {
			notifier.Emit(events.CredentialExpiring, map[string]any{"tenant": tr.Tenant, "credential": tr.Name, "notAfter": tr.NotAfter})
		}, func(err error) { log.Warn("could not look for expiring credentials", "err", err) })
	}()
	defer func() { stopCreds(); <-credsDone }()
	h.Credentials = creds
	// Fairness between tenants works from the tenant stamped on each
	// request (flow learns which tenants are about): no API keys here.
	h.Flow = flow.New(flow.Config{Concurrency: cfg.WorkerConcurrency, FairShare: cfg.FlowFairShare, TenantShare: cfg.FlowTenantShare,
		Adaptive: cfg.FlowAdaptive, MinRate: cfg.FlowAdaptiveMinRate, Finished: func(ctx context.Context, id string) bool {
			r, err := store.Get(ctx, id)
			return errors.Is(err, record.ErrNotFound) || (err == nil && r.Status.Terminal())
		}, Breaker: flow.BreakerConfig{Off: !cfg.Breaker, Window: cfg.BreakerWindow, MinAttempts: cfg.BreakerMinAttempts,
			FailureRatio: cfg.BreakerFailureRatio, ProbeMax: cfg.BreakerProbeMax, FailAfter: cfg.BreakerFailAfter},
		OnEndpoint: func(e flow.EndpointChange) {
			typ, data := events.EndpointClosed, map[string]any{"tenant": e.Tenant, "endpoint": e.Endpoint}
			if e.Open {
				typ, data["failureRatio"], data["attempts"] = events.EndpointOpened, e.FailureRatio, e.Attempts
			}
			notifier.Emit(typ, data)
		},
		Tuning: opts.Flow}, rdb, wait, log.With("component", "flow"), clock.Real)
	defer h.Flow.Close()
	cb := &tasks.CallbackHandler{Store: store, Client: client, Secret: cfg.CallbackSigningSecret, Signer: signer, Credentials: creds, QStash: qsigner, Workflows: workflows, Invokes: invokes, Log: log, Now: time.Now}
	// One asynq server per process: a second one would fetch more tasks
	// per second (each server fetches with one loop) but doubles the idle
	// calls and the context switches; at the throughput one process reaches
	// on its own share of the CPU, the fetch loop is not the limit.
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              cfg.WorkerConcurrency,
		Queues:                   queueWeights(parts),
		TaskCheckInterval:        tune.AsynqPoll,
		DelayedTaskCheckInterval: tune.AsynqForward,
		RetryDelayFunc:           retry.DelayFunc(time.Now, wait.Lag(), retry.Policy{Base: tune.TroubleBase, Max: tune.TroubleMax}),
		IsFailure:                retry.IsFailure,
		ShutdownTimeout:          WorkerShutdownTimeout,
		Logger:                   asynqLogger{log.With("component", "asynq")},
		LogLevel:                 asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(tasks.TypeDeliver, h)
	mux.Handle(tasks.TypeCallback, cb)
	handlers := gopool.New(mux, cfg.WorkerConcurrency, log.With("component", "asynq"))
	defer handlers.Close() // after srv.Shutdown, below
	if err := srv.Start(handlers); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	stopMetrics := serveWorkerMetrics(ctx, cfg.MetricsAddr, clusterMetrics(store, inspector, rdb), AdminSecrets(cfg), store, book, log)
	defer stopMetrics()
	sw := newSweeper(cfg, rdb, store, queue, log)
	sw.Bell = bell
	sched := &scheduler.Scheduler{Store: store, Queue: queue, Log: log.With("component", "scheduler"),
		Interval: SchedulerInterval, Clock: clock.Real}
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); sw.Run(sweepCtx) }()
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); sched.Run(sweepCtx) }()
	flowDone := make(chan struct{})
	endpointsDone := make(chan struct{})
	id := workerID()
	go func() { defer close(flowDone); h.Flow.Publish(sweepCtx, id) }()
	go func() { defer close(endpointsDone); h.Flow.PublishEndpoints(sweepCtx, id) }()
	go h.Flow.Rebalance(sweepCtx)
	timerDone := make(chan struct{})
	go func() { defer close(timerDone); timers.Run(sweepCtx) }()

	log.Info("retryd worker running", "concurrency", cfg.WorkerConcurrency, "queues", parts.Tags())
	<-ctx.Done()
	log.Info("retryd worker shutting down: in-flight attempts may finish", "bound", DrainBound)
	stopSweep()
	<-sweepDone
	<-schedDone
	<-flowDone
	<-endpointsDone
	<-timerDone
	bell.Stop()
	// asynq's Shutdown waits up to WorkerShutdownTimeout without canceling
	// handlers; cut in-flight calls at DrainBound so they end first.
	drain := time.AfterFunc(DrainBound, stop)
	defer drain.Stop()
	srv.Shutdown()
	return nil
}

// workerID names this worker process in what it publishes.
func workerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano()%1e6)
}

// queueWeights serves every partition's queue with the same weight.
func queueWeights(parts partition.Set) map[string]int {
	w := make(map[string]int, parts.Len())
	for _, q := range parts.Tags() {
		w[q] = 1
	}
	return w
}

// newSweeper builds the worker's sweeper; its repairs are counted in the
// cluster-wide stats.
func newSweeper(cfg config.Config, rdb redis.UniversalClient, store *record.Store, queue *tasks.Enqueuer, log *slog.Logger) *sweeper.Sweeper {
	host, _ := os.Hostname()
	var q sweeper.Queue = queue
	if cfg.RedisWaitReplicas > 0 {
		q = confirmingQueue{Enqueuer: queue, rdb: rdb, replicas: cfg.RedisWaitReplicas, wait: time.Second}
	}
	return &sweeper.Sweeper{
		RDB: rdb, Store: store, Queue: q,
		Log: log.With("component", "sweeper"), Interval: cfg.SweepInterval, Grace: SweepGrace,
		Owner: fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano()),
		OnSweep: func(st sweeper.Stats) {
			for kind, n := range map[string]int{"missing": st.Missing, "archived": st.Archived, "stranded": st.Stranded, "callback": st.CallbackLost} {
				if n > 0 {
					_ = store.Count(context.Background(), "sweep", kind, int64(n))
				}
			}
		},
	}
}

// asynqLogger routes asynq's own logging into slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) msg(args []any) string { return strings.TrimSpace(fmt.Sprintln(args...)) }
func (a asynqLogger) Debug(args ...any)     { a.l.Debug(a.msg(args)) }
func (a asynqLogger) Info(args ...any)      { a.l.Info(a.msg(args)) }
func (a asynqLogger) Warn(args ...any)      { a.l.Warn(a.msg(args)) }
func (a asynqLogger) Error(args ...any)     { a.l.Error(a.msg(args)) }
func (a asynqLogger) Fatal(args ...any)     { a.l.Error(a.msg(args)); os.Exit(1) }

// refuseOwnCalls answers 403 to every call carrying
// egress.RequestIDHeader: a delivery or callback of retryd's.
func refuseOwnCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(egress.RequestIDHeader) != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":"loop_detected","message":"this call is a retryd delivery or callback (it carries `+
				egress.RequestIDHeader+`); a worker's metrics listener does not answer retryd's own calls"}}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// confirmingQueue is the sweeper's queue under REDIS_WAIT_REPLICAS: a
// record found without a task is handed to the workers only once the
// replicas hold it. The API enqueues what it acknowledged itself; what
// the sweeper finds without a task may be a submission answered 503 that
// only this primary holds, and a primary's writes no replica holds are
// thrown away by a failover (or by the resync of a restarted old primary
// that clients reached before Sentinel turned it into a replica). Were it
// delivered meanwhile, its Idempotency-Key, retried on the node that
// survives, would become a second request. Unconfirmed, the sweep stops
// there and the next one tries again.
type confirmingQueue struct {
	*tasks.Enqueuer
	rdb      redis.UniversalClient
	replicas int
	wait     time.Duration
}

func (q confirmingQueue) Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error {
	if err := record.Confirm(ctx, q.rdb, q.replicas, q.wait); err != nil {
		return fmt.Errorf("request %s is left without a task until the replicas hold it (REDIS_WAIT_REPLICAS): %w", id, err)
	}
	return q.Enqueuer.Enqueue(ctx, id, due, attemptTimeout, maxRetries)
}
