package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
)

// The keys of tenantEngine: two named tenants, a bare (default) key and
// an admin.
const (
	acmeKey    = "acme-key"
	bareKey    = "bare-key"
	adminKey   = "admin-key"
	tenantKeys = "acme:" + acmeKey + ",beta:beta-key," + bareKey
)

func tenantEngine(t *testing.T) *gin.Engine {
	t.Helper()
	srv := redistest.Start(t)
	env := map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": tenantKeys, "ADMIN_KEYS": adminKey}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	e, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeEngine)
	return e
}

type call struct {
	method, path, body string
	header             http.Header
}

func (c call) do(t *testing.T, e http.Handler, key string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	req.Header.Set("Authorization", "Bearer "+key)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	return w
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// Every name a client gives, in a path, a query, a header or a body, is
// refused (400) when it holds a control character or is longer than its
// kind allows; the answer names the field and does not echo the value.
func TestNamesAreRefusedAtEveryEntry(t *testing.T) {
	t.Parallel()
	e := tenantEngine(t)
	sep := "%1F" // the separator of tenant and name, as a path spells it
	long := func(n int) string { return strings.Repeat("n", n) }
	huge := strings.Repeat("x", 900_000)
	dest := "http://127.0.0.1:9/x"
	for _, tc := range []struct {
		name  string
		call  call
		field string // in the message (both dialects) and, for retryd's API, the field
	}{
		// retryd's own API.
		{"flow key GET", call{method: "GET", path: "/flows/acme" + sep + "acmeflow"}, "key"},
		{"flow key pause", call{method: "POST", path: "/flows/acme" + sep + "acmeflow/pause"}, "key"},
		{"flow key pin", call{method: "POST", path: "/flows/acme" + sep + "acmeflow/pin?parallelism=1"}, "key"},
		{"flow key unpin", call{method: "POST", path: "/flows/acme" + sep + "acmeflow/unpin?parallelism=true"}, "key"},
		{"flow key resetRate", call{method: "POST", path: "/flows/acme" + sep + "acmeflow/resetRate"}, "key"},
		{"flow key resume", call{method: "POST", path: "/flows/a%00b/resume"}, "key"},
		{"flow key too long", call{method: "GET", path: "/flows/" + long(256)}, "key"},
		{"topic control", call{method: "GET", path: "/topics/a" + sep + "b"}, "name"},
		{"topic too long", call{method: "DELETE", path: "/topics/" + long(129)}, "name"},
		{"topic endpoints", call{method: "POST", path: "/topics/a%0Ab/endpoints", body: `{"endpoints":[{"url":"` + dest + `"}]}`}, "name"},
		{"endpoint name", call{method: "POST", path: "/topics/t/endpoints", body: `{"endpoints":[{"name":"a\u001fb","url":"` + dest + `"}]}`}, "endpoints[0].name"},
		{"topic publish", call{method: "POST", path: "/topics/a" + sep + "b/requests", body: `{}`}, "name"},
		{"schedule id", call{method: "GET", path: "/schedules/a" + sep + "b"}, "id"},
		{"submit flow key", call{method: "POST", path: "/requests", body: `{"url":"` + dest + `","flowControl":{"key":"acme\u001facmeflow","parallelism":1}}`}, "flowControl.key"},
		{"submit idempotency key", call{method: "POST", path: "/requests", body: `{"url":"` + dest + `"}`, header: hdr("Idempotency-Key", long(256))}, "Idempotency-Key"},
		{"dlq host filter", call{method: "GET", path: "/dlq?host=a" + sep}, "host"},
		{"unknown member", call{method: "POST", path: "/requests", body: `{"url":"` + dest + `","` + long(5000) + `":1}`}, "nnnn"},
		// QStash's dialect.
		{"v2 flow key GET", call{method: "GET", path: "/v2/flowControl/acme" + sep + "acmeflow"}, "key"},
		{"v2 flow key pause", call{method: "POST", path: "/v2/flowControl/acme" + sep + "acmeflow/pause"}, "key"},
		{"v2 flow key pin", call{method: "POST", path: "/v2/flowControl/acme" + sep + "acmeflow/pin?parallelism=1"}, "key"},
		{"v2 flow key resetRate", call{method: "POST", path: "/v2/flowControl/acme" + sep + "acmeflow/resetRate"}, "key"},
		{"v2 queue GET", call{method: "GET", path: "/v2/queues/q" + sep}, "name"},
		{"v2 queue DELETE", call{method: "DELETE", path: "/v2/queues/" + long(129)}, "name"},
		{"v2 queue pause", call{method: "POST", path: "/v2/queues/q" + sep + "/pause"}, "name"},
		{"v2 enqueue", call{method: "POST", path: "/v2/enqueue/q" + sep + "/" + dest}, "queue"},
		{"v2 queue upsert", call{method: "POST", path: "/v2/queues", body: `{"queueName":"q\u0000"}`}, "queueName"},
		{"v2 url group", call{method: "GET", path: "/v2/topics/g" + sep}, "name"},
		{"v2 url group delete", call{method: "DELETE", path: "/v2/topics/" + long(129)}, "name"},
		{"v2 schedule id", call{method: "GET", path: "/v2/schedules/s" + sep}, "scheduleId"},
		{"v2 schedule id pause", call{method: "PATCH", path: "/v2/schedules/" + long(129) + "/pause"}, "scheduleId"},
		{"label too long", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Label", long(257))}, "Upstash-Label"},
		{"label 900 KB", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Label", huge)}, "Upstash-Label"},
		{"label control", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Label", "a\x1fb")}, "Upstash-Label"},
		{"second label too long", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Label", "ok", "Upstash-Label", long(257))}, "Upstash-Label"},
		{"dedup id too long", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Deduplication-Id", long(257))}, "Upstash-Deduplication-Id"},
		{"dedup id control", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Deduplication-Id", "d\x01")}, "Upstash-Deduplication-Id"},
		{"flow key header", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Flow-Control-Key", "acme\x1facmeflow", "Upstash-Flow-Control-Value", "parallelism=1")}, "Upstash-Flow-Control-Key"},
		{"queue header", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Queue-Name", long(129))}, "Upstash-Queue-Name"},
		{"schedule id header", call{method: "POST", path: "/v2/schedules/" + dest, header: hdr("Upstash-Cron", "* * * * *", "Upstash-Schedule-Id", "s\x1f")}, "Upstash-Schedule-Id"},
		{"schedule label", call{method: "POST", path: "/v2/schedules/" + dest, header: hdr("Upstash-Cron", "* * * * *", "Upstash-Label", long(300))}, "Upstash-Label"},
		{"redact fields 900 KB", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Redact-Fields", huge)}, "Upstash-Redact-Fields"},
		{"redact header name", call{method: "POST", path: "/v2/publish/" + dest, header: hdr("Upstash-Redact-Fields", "header["+long(300)+"]")}, "Upstash-Redact-Fields"},
		{"batch label", call{method: "POST", path: "/v2/batch", body: `[{"destination":"` + dest + `","headers":{"Upstash-Label":"` + long(257) + `"}}]`}, "Upstash-Label"},
		{"batch queue", call{method: "POST", path: "/v2/batch", body: `[{"destination":"` + dest + `","queue":"q\u001f"}]`}, "Upstash-Queue-Name"},
		{"events label filter", call{method: "GET", path: "/v2/events?label=" + long(257)}, "label"},
		{"events label control", call{method: "GET", path: "/v2/events?label=a" + sep}, "label"},
		{"dlq flow key filter", call{method: "GET", path: "/v2/dlq?flowControlKey=acme" + sep + "acmeflow"}, "flowControlKey"},
		{"cancel queue filter", call{method: "DELETE", path: "/v2/messages?queueName=q" + sep}, "queueName"},
		{"events url filter", call{method: "GET", path: "/v2/events?url=" + long(2049)}, "url"},
		{"unknown parameter", call{method: "GET", path: "/v2/events?" + long(5000) + "=1"}, "nnnn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, key := range []string{bareKey, acmeKey} {
				w := tc.call.do(t, e, key)
				if w.Code != http.StatusBadRequest {
					t.Fatalf("%s %s: %d %s, want 400", tc.call.method, tc.call.path[:min(len(tc.call.path), 80)], w.Code, w.Body.String()[:min(w.Body.Len(), 300)])
				}
				if w.Body.Len() > 1024 {
					t.Fatalf("the 400 is %d bytes: it echoes the value", w.Body.Len())
				}
				if !strings.Contains(w.Body.String(), tc.field) {
					t.Errorf("the 400 does not name %s: %s", tc.field, w.Body.String())
				}
			}
		})
	}
}

// Names at their limits are accepted: the limits are where the documents
// say, not lower.
func TestNamesAtTheirLimitsAreAccepted(t *testing.T) {
	t.Parallel()
	e := tenantEngine(t)
	dest := "http://127.0.0.1:9/x"
	labels := hdr("Upstash-Deduplication-Id", strings.Repeat("d", 256), "Upstash-Flow-Control-Key", strings.Repeat("k", 255),
		"Upstash-Flow-Control-Value", "parallelism=1", "Upstash-Queue-Name", strings.Repeat("q", 128))
	for i := range 20 {
		labels.Add("Upstash-Label", strings.Repeat(string(rune('a'+i)), 256))
	}
	for _, c := range []call{
		{method: "POST", path: "/v2/publish/" + dest, header: labels},
		{method: "POST", path: "/requests", body: `{"url":"` + dest + `","flowControl":{"key":"` + strings.Repeat("k", 255) + `","parallelism":1}}`,
			header: hdr("Idempotency-Key", strings.Repeat("i", 255))},
		{method: "GET", path: "/v2/events?label=" + strings.Repeat("a", 256)},
		{method: "GET", path: "/flows/" + strings.Repeat("k", 255)},
	} {
		if w := c.do(t, e, acmeKey); w.Code >= 300 {
			t.Errorf("%s %s: %d %s", c.method, c.path[:min(len(c.path), 60)], w.Code, w.Body.String())
		}
	}
}

// A bare (default) key cannot reach another tenant's flow-control key by
// spelling its internal name; an admin still acts on a tenant's key by
// naming the tenant.
func TestNoTenantReachesAnothersFlowKey(t *testing.T) {
	t.Parallel()
	e := tenantEngine(t)
	paused := func(path, key string) bool {
		t.Helper()
		w := call{method: "GET", path: path}.do(t, e, key)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
		}
		var d struct {
			IsPaused bool   `json:"isPaused"`
			Tenant   string `json:"tenant"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		return d.IsPaused
	}
	for _, attack := range []string{"/flows/acme%1Facmeflow/pause", "/v2/flowControl/acme%1Facmeflow/pause",
		"/flows/acme%1Facmeflow/pin?parallelism=1", "/v2/flowControl/acme%1Facmeflow/pin?parallelism=1"} {
		for _, key := range []string{bareKey, adminKey, "beta-key"} {
			if w := (call{method: "POST", path: attack}).do(t, e, key); w.Code != http.StatusBadRequest {
				t.Errorf("POST %s with %s: %d, want 400", attack, key, w.Code)
			}
		}
	}
	if paused("/flows/acmeflow", acmeKey) {
		t.Fatal("acme's key acmeflow was paused by another tenant's call")
	}
	// An admin names the tenant to act on its keys.
	if w := (call{method: "POST", path: "/flows/acmeflow/pause?tenant=acme"}).do(t, e, adminKey); w.Code != http.StatusOK {
		t.Fatalf("admin pause of acme's key: %d %s", w.Code, w.Body.String())
	}
	if !paused("/flows/acmeflow", acmeKey) || !paused("/v2/flowControl/acmeflow?tenant=acme", adminKey) {
		t.Error("the admin's pause of acme's key did not reach it")
	}
	if paused("/flows/acmeflow", bareKey) {
		t.Error("the default tenant's own acmeflow is paused too")
	}
}
