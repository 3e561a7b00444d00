package app_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/testca"
)

// Distinctive secrets, scanned for in Redis.
const (
	clientSecret = "client-secret-4f1d9a"
	basicPass    = "basic-password-77c2e0"
	bearerTok    = "static-bearer-9ab3c1"
	headerKey    = "header-api-key-5e8d21"
	proxyPass    = "proxy-password-31bb07"
)

// tokenServer is an OAuth2 token endpoint (RFC 6749 §4.4, client
// credentials): client auth by HTTP Basic or in the body, a JSON token with
// expires_in; it remembers each token's expiry.
type tokenServer struct {
	URL       string
	requests  atomic.Int64
	expiresIn atomic.Int64 // seconds
	failWith  atomic.Int64 // a status to answer instead, with an OAuth2 error

	mu     sync.Mutex
	expiry map[string]time.Time
}

func startTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{expiry: map[string]time.Time{}}
	ts.expiresIn.Store(3600)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"unsupported_grant_type"}`)
			return
		}
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if code := ts.failWith.Load(); code != 0 {
			w.WriteHeader(int(code))
			_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"client is disabled"}`)
			return
		}
		if id != "client-1" || secret != clientSecret {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"wrong client"}`)
			return
		}
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		tok, in := "tok-"+hex.EncodeToString(b), ts.expiresIn.Load()
		ts.mu.Lock()
		ts.expiry[tok] = time.Now().Add(time.Duration(in) * time.Second)
		ts.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": in, "scope": r.PostForm.Get("scope")})
	}))
	t.Cleanup(srv.Close)
	ts.URL = srv.URL + "/oauth/token"
	return ts
}

// valid reports whether tok was issued and has not expired, with a
// second's tolerance (as a real API allows clock skew): a call slowed by
// busy cores is not the token's fault, and a token never renewed still
// fails.
func (ts *tokenServer) valid(tok string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, ok := ts.expiry[tok]
	return ok && time.Now().Before(exp.Add(time.Second))
}

// tokens are the access tokens issued.
func (ts *tokenServer) tokens() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for tok := range ts.expiry {
		out = append(out, tok)
	}
	return out
}

// guardedDest is a destination that wants credentials: /oauth a valid
// token of ts, /basic, /bearer and /headers their static secrets; /open
// anything. It counts what it refused.
type guardedDest struct {
	URL     string
	refused atomic.Int64

	mu   sync.Mutex
	seen []http.Header
}

func startGuardedDest(t *testing.T, ts *tokenServer) *guardedDest {
	d := &guardedDest{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.seen = append(d.seen, r.Header.Clone())
		d.mu.Unlock()
		auth := r.Header.Get("Authorization")
		user, pass, _ := r.BasicAuth()
		ok := true
		switch r.URL.Path {
		case "/oauth":
			ok = len(auth) > 7 && auth[:7] == "Bearer " && ts.valid(auth[7:])
		case "/basic":
			ok = user == "retryd" && pass == basicPass
		case "/bearer":
			ok = auth == "Bearer "+bearerTok
		case "/headers":
			ok = r.Header.Get("X-Api-Key") == headerKey
		}
		if !ok {
			d.refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

// headersOf are the headers of the calls carrying request id.
func (d *guardedDest) headersOf(id string) []http.Header {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []http.Header
	for _, h := range d.seen {
		if h.Get("Retryd-Request-Id") == id {
			out = append(out, h)
		}
	}
	return out
}

// mtlsDest is a TLS destination that requires a client certificate of
// its own CA. serverCA is what a client must trust; client is a
// certificate and key it accepts.
type mtlsDest struct {
	URL      string
	serverCA []byte
	client   testca.Issued
}

func startMTLSDest(t *testing.T) *mtlsDest {
	server, err := testca.Issue("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	client, err := testca.Issue("retryd-client")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(server.Cert, server.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(client.CA)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "hello "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &mtlsDest{URL: srv.URL, serverCA: server.CA, client: client}
}

// connectProxy is a real CONNECT proxy (goproxy) asking for Basic auth;
// it records the target of every CONNECT.
type connectProxy struct {
	URL string
	mu  sync.Mutex
	got []string
}

func startConnectProxy(t *testing.T, user, pass string) *connectProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{URL: "http://" + ln.Addr().String()}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.ConnectDial = nil
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		p.mu.Lock()
		p.got = append(p.got, host)
		p.mu.Unlock()
		u, pw, ok := (&http.Request{Header: http.Header{"Authorization": ctx.Req.Header.Values("Proxy-Authorization")}}).BasicAuth()
		if !ok || u != user || pw != pass {
			ctx.Resp = &http.Response{StatusCode: http.StatusProxyAuthRequired, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody, Request: ctx.Req}
			return goproxy.RejectConnect, host
		}
		return goproxy.OkConnect, host
	})
	srv := &http.Server{Handler: gp, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func (p *connectProxy) connects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

// credStack is an API and two workers on one Redis, with SECRETS_KEYS.
type credStack struct {
	*healthStack
	redis *redistest.Server
}

func startCredStack(t *testing.T, env map[string]string) *credStack {
	t.Helper()
	srv := redistest.Start(t)
	base := map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "k1,ta:ka,tb:kb",
		"ADMIN_KEYS": "adm", "SWEEP_INTERVAL": "1h", "WORKER_CONCURRENCY": "4",
		"SECRETS_KEYS": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.Load(func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, lg)
	api := httptest.NewServer(engine)
	t.Cleanup(func() { api.Close(); closeEngine() })
	s := &credStack{healthStack: &healthStack{api: api.URL, rdb: srv.Client()}, redis: srv}
	for range 2 {
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.RunWorker(ctx, cfg, app.WorkerOptions{}, lg) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
		})
	}
	return s
}

// allValues is every key, member and value in Redis, for a scan.
func allValues(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		out = append(out, k)
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			out = append(out, rdb.Get(ctx, k).Val())
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				out = append(out, f, v)
			}
		case "set":
			out = append(out, rdb.SMembers(ctx, k).Val()...)
		case "list":
			out = append(out, rdb.LRange(ctx, k, 0, -1).Val()...)
		case "zset":
			out = append(out, rdb.ZRange(ctx, k, 0, -1).Val()...)
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					out = append(out, f, v.(string))
				}
			}
		default:
			t.Errorf("key %s of type %s not scanned", k, typ)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
