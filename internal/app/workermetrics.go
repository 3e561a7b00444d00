package app

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/listeners"
	"github.com/retryd/retryd/internal/metrics"
	"github.com/retryd/retryd/internal/record"
)

// clusterMetrics is a process's registry with every cluster-wide series:
// the Redis counters, asynq's queues, the flow-control keys and the
// endpoints' breakers. The API and every worker serve the same one, so
// whichever a deployment scrapes answers every documented alert; each
// process reports the same values (aggregate with max, not sum).
func clusterMetrics(store *record.Store, inspector *asynq.Inspector, rdb redis.UniversalClient) *metrics.Metrics {
	m := metrics.New(store, inspector)
	m.RegisterFlows(func(ctx context.Context) ([]flow.KeyStats, error) { return flow.Read(ctx, rdb, time.Now()) })
	m.RegisterEndpoints(func(ctx context.Context) ([]flow.EndpointInfo, error) { return flow.HeldEndpoints(ctx, rdb) })
	creds := &credentials.Store{RDB: rdb}
	m.RegisterCredentials(func(ctx context.Context) (expiring, failing int, err error) {
		troubles, err := creds.Troubles(ctx, time.Now())
		for _, tr := range troubles {
			if tr.Expiring {
				expiring++
			}
			if tr.Failing {
				failing++
			}
		}
		return expiring, failing, err
	})
	return m
}

// AdminSecrets are the keys that reach /metrics, on the API and on a
// worker alike: the admin keys of AccessKeys (ADMIN_KEYS, or the default
// tenant's keys of API_KEYS while ADMIN_KEYS is unset). None: no keys are
// configured at all, and the API itself is open.
func AdminSecrets(cfg config.Config) []string {
	var out []string
	for _, k := range AccessKeys(cfg) {
		if k.Admin {
			out = append(out, k.Secret)
		}
	}
	return out
}

// serveWorkerMetrics serves /metrics and /healthz on addr (nothing when
// addr is empty), listed in book as one of retryd's listeners, and
// returns the function that stops it. /metrics names every tenant, so it
// asks for an admin key, as the API's does.
func serveWorkerMetrics(ctx context.Context, addr string, reg *metrics.Metrics, admins []string, redis pinger, book *listeners.Book, log *slog.Logger) (stop func()) {
	if addr == "" {
		return func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// Deliveries go on without metrics, as they always did.
		log.Error("worker metrics listener failed", "addr", addr, "err", err)
		return func() {}
	}
	if len(admins) == 0 {
		log.Warn("neither ADMIN_KEYS nor API_KEYS is set: the worker's /metrics answers loopback callers only; set ADMIN_KEYS to scrape it from elsewhere", "addr", addr)
	}
	book.Add(ctx, ln.Addr())
	srv := &http.Server{Handler: workerMux(reg, admins, redis), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("worker metrics listener failed", "addr", addr, "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}

// pinger says whether Redis answers.
type pinger interface {
	Ping(ctx context.Context) error
}

// workerMux serves a worker's /metrics (to admin keys), /healthz
// (liveness: the process runs) and /readyz (readiness: Redis answers, so
// the worker can work). The probes name nothing and stay open: the
// kubelet and the container's health check send no key.
func workerMux(reg *metrics.Metrics, admins []string, redis pinger) http.Handler {
	m := http.NewServeMux()
	m.Handle("GET /metrics", adminOnly(admins, reg.Handler()))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	m.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := redis.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"status":"unavailable","reason":"redis unreachable"}`)
			return
		}
		_, _ = io.WriteString(w, `{"status":"ready"}`)
	})
	return refuseOwnCalls(m)
}

// adminOnly serves next to a caller that sends one of admins as the API
// takes keys (Authorization: Bearer, or Basic's password), and answers
// 401 in the API's error shape to any other. No admins: no keys are
// configured, and next answers loopback callers only (403 to others):
// a port that names every tenant is never an open door.
func adminOnly(admins []string, next http.Handler) http.Handler {
	if len(admins) == 0 {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
				if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
					next.ServeHTTP(w, r)
					return
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": &handlers.Error{Code: handlers.CodeForbidden,
				Message: "no admin key is configured: a worker's /metrics answers loopback callers only; set ADMIN_KEYS to scrape it from elsewhere"}})
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := handlers.Credential(r)
		msg := "missing admin key: send Authorization: Bearer <key> with a key of ADMIN_KEYS"
		if ok {
			for _, a := range admins {
				if subtle.ConstantTimeCompare([]byte(key), []byte(a)) == 1 {
					next.ServeHTTP(w, r)
					return
				}
			}
			msg = "this needs an admin key (ADMIN_KEYS)"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="retryd"`)
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": &handlers.Error{Code: handlers.CodeUnauthorized, Message: msg}})
	})
}
