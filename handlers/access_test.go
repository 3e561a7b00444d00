package handlers_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/dashboard"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/tasks"
)

// newServer returns an API instance over the Redis at srv with access rules.
func newServer(t *testing.T, srv *redistest.Server, access app.Access) *httptest.Server {
	t.Helper()
	rdb := srv.Client()
	api := &handlers.API{
		Store:        record.NewStore(rdb, time.Hour),
		Queue:        &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)},
		Destinations: &egress.Guard{AllowPrivate: true},
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:          time.Now,
	}
	if access.RateLimitRPS > 0 {
		access.Limiter = redis_rate.NewLimiter(rdb)
	}
	engine := app.NewEngine(api, access, api.Log)
	ts := httptest.NewServer(engine)
	t.Cleanup(ts.Close)
	return ts
}

// Every route the engine serves, but the root and the two probes, needs a key; the list
// comes from the engine itself, so a route added later is covered too.
func TestEveryRouteButProbesNeedsAKey(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	rdb := srv.Client()
	api := &handlers.API{Store: record.NewStore(rdb, time.Hour), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	ui := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	engine := app.NewEngine(api, app.Access{Keys: handlers.BareKeys("key-one", "key-two")}, api.Log,
		&handlers.DLQ{Store: api.Store.(*record.Store), API: api}, &dashboard.Dashboard{UI: ui, Root: app.DashboardPath, Log: api.Log})
	ts := httptest.NewServer(engine)
	defer ts.Close()

	routes := engine.Routes()
	if len(routes) < 12 {
		t.Fatalf("engine lists only %d routes", len(routes))
	}
	for _, r := range routes {
		path := strings.NewReplacer(":id", "01m8mg842n8nbsaee7cq", "*any", "x").Replace(r.Path)
		open := path == "/healthz" || path == "/readyz" || path == "/"
		for _, cred := range []struct {
			name   string
			header string
			want   int
		}{
			{"no key", "", 401},
			{"wrong key", "Bearer nope", 401},
			{"prefix of a key", "Bearer key-on", 401},
			{"key plus suffix", "Bearer key-one1", 401},
			{"wrong scheme", "Token key-one", 401},
		} {
			req, _ := http.NewRequest(r.Method, ts.URL+path, strings.NewReader(`{}`))
			if cred.header != "" {
				req.Header.Set("Authorization", cred.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if open {
				if resp.StatusCode == 401 {
					t.Errorf("%s %s with %s: 401, but probes need no key", r.Method, path, cred.name)
				}
				continue
			}
			hasBody := r.Method != http.MethodHead
			if resp.StatusCode != cred.want || (hasBody && !strings.Contains(string(body), `"code":"unauthorized"`)) {
				t.Errorf("%s %s with %s: %d %s, want 401 unauthorized", r.Method, path, cred.name, resp.StatusCode, body)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", r.Method, path)
			}
		}
	}
}

func TestAnyConfiguredKeyWorksAsBearerOrBasicPassword(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := newServer(t, srv, app.Access{Keys: handlers.BareKeys("key-one", "key-two")})
	for _, set := range []func(*http.Request){
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer key-one") },
		func(r *http.Request) { r.Header.Set("Authorization", "bearer key-two") },
		func(r *http.Request) { r.SetBasicAuth("anyone", "key-two") },
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/requests", nil)
		set(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%v: %d, want 200", req.Header.Get("Authorization"), resp.StatusCode)
		}
	}
}

// Two API instances share one Redis: together they allow the limit, not
// twice the limit.
func TestRateLimitHoldsAcrossInstances(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	// The limit counts per tenant: k1 and k1b share team-a's, k2 is
	// team-b's.
	access := app.Access{Keys: []handlers.Key{{Secret: "k1", Tenant: "team-a"}, {Secret: "k1b", Tenant: "team-a"}, {Secret: "k2", Tenant: "team-b"}},
		RateLimitRPS: 5}
	a, b := newServer(t, srv, access), newServer(t, srv, access)
	get := func(base, key string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/requests?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	ok, limited := 0, 0
	start := time.Now()
	for i := 0; i < 20; i++ {
		base := a.URL
		if i%2 == 1 {
			base = b.URL
		}
		key := "k1"
		if i%4 >= 2 {
			key = "k1b" // the same tenant: the same limit
		}
		resp := get(base, key)
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
			limited++
			if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Errorf("429 with Retry-After %q", ra)
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	// 20 calls within well under a second: the burst of 5 plus what refills
	// meanwhile may pass.
	allowed := 5 + int(time.Since(start).Seconds()*5) + 1
	if ok > allowed || limited == 0 {
		t.Errorf("%d allowed, %d limited over two instances and two keys of one tenant; want at most %d allowed", ok, limited, allowed)
	}
	if resp := get(a.URL, "k2"); resp.StatusCode != 200 {
		t.Errorf("another tenant's key is limited too: %d", resp.StatusCode)
	}
}

func TestRateLimitPerClientIPWithoutKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, redistest.Options{})
	ts := newServer(t, srv, app.Access{RateLimitRPS: 2})
	limited := false
	for i := 0; i < 10 && !limited; i++ {
		req, _ := http.NewRequest("GET", ts.URL+"/requests", nil)
		// A forged X-Forwarded-For must not give a fresh budget.
		req.Header.Set("X-Forwarded-For", "203.0.113."+string(rune('0'+i)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		limited = resp.StatusCode == 429
	}
	if !limited {
		t.Error("10 calls from one IP at 2 rps were never limited")
	}
}
