package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/openapi"
	"github.com/retryd/retryd/internal/redistest"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

const key = "test-key"

func newEngine(t *testing.T) *gin.Engine {
	t.Helper()
	srv := redistest.Start(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": key,
			"SECRETS_KEYS": "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	e, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeEngine)
	return e
}

var ginParam = regexp.MustCompile(`:([a-zA-Z]+)`)

// Every route the engine serves is documented, and every documented
// operation is served. The dashboard's own pages below /monitoring/ are
// asynqmon's and documented as one entry.
func TestOpenAPIDocumentsExactlyTheRoutes(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	served := map[string]bool{}
	for _, r := range newEngine(t).Routes() {
		// The dashboard is asynqmon's; /v2 is QStash's dialect, documented
		// by QStash (the README lists what retryd serves of it).
		if strings.HasPrefix(r.Path, app.DashboardPath) || strings.HasPrefix(r.Path, "/v2/") {
			continue
		}
		p := ginParam.ReplaceAllString(r.Path, "{$1}")
		served[r.Method+" "+p] = true
		if item := doc.Paths.Find(p); item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("%s %s is served but not documented", r.Method, p)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if path == app.DashboardPath+"/" {
				continue
			}
			if !served[method+" "+path] {
				t.Errorf("%s %s is documented but not served", method, path)
			}
		}
	}
}

// Real requests and their real answers validate against the document.
func TestOpenAPIMatchesRealExchanges(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newEngine(t))
	defer ts.Close()
	doc.Servers = openapi3.Servers{{URL: ts.URL}}
	router, err = gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}

	exchange := func(method, path, body string, wantStatus int, headers ...string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: not in the document: %v", method, path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		// Validate a copy of the request (validation reads the body).
		check, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		check.Header = req.Header
		in.Request = check
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && wantStatus < 400 {
			t.Errorf("%s %s: request does not match the document: %v", method, path, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantStatus {
			t.Errorf("%s %s: status %d, want %d (%s)", method, path, resp.StatusCode, wantStatus, got)
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
			Header: resp.Header, Body: io.NopCloser(bytes.NewReader(got)), Options: opts}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s %s → %d: answer does not match the document: %v\n%s", method, path, resp.StatusCode, err, got)
		}
		return got
	}
	idOf := func(b []byte) string {
		return regexp.MustCompile(`"id":"([0-9a-z]+)"`).FindStringSubmatch(string(b))[1]
	}

	body := `{"url":"https://example.com/hook","method":"POST","headers":{"Authorization":"Bearer x"},"body":"{}","maxRetries":2,"backoffMs":500,"delayMs":600000,"callbackUrl":"https://example.com/cb"}`
	id := idOf(exchange("POST", "/requests", body, 202, "Idempotency-Key", "k1"))
	exchange("POST", "/requests", body, 200, "Idempotency-Key", "k1")
	exchange("POST", "/requests", `{"url":"https://example.com/other"}`, 409, "Idempotency-Key", "k1")
	exchange("POST", "/request", `{"url":"https://example.com/old","method":"GET","body":"","maxRetries":3,"backoffMs":500}`, 202)
	exchange("POST", "/requests", `{"url":"ftp://x"}`, 400)
	exchange("POST", "/requests", `{"url":"https://example.com","mehtod":"POST"}`, 400)
	exchange("POST", "/requests", `{"url":"https://example.com"}`, 422, "Retryd-Request-Id", "01m8mg842n8nbsaee7cq")
	exchange("POST", "/requests", `{"url":"https://example.com"}`, 403, "Origin", "https://evil.example")
	exchange("POST", "/dlq/redrive", `{"actor":"a","limit":10}`, 403, "Sec-Fetch-Site", "cross-site")
	exchange("GET", "/requests/"+id, "", 200)
	exchange("GET", "/requests/01m8mg842n8nbsaee7cq", "", 404)
	exchange("GET", "/requests?status=pending&limit=1", "", 200)
	exchange("GET", "/requests?status=nope", "", 400)
	exchange("GET", "/dlq?failureClass=server_error&limit=10", "", 200)
	exchange("POST", "/dlq/"+id+"/redrive", `{"actor":"a","reason":"r"}`, 409)
	exchange("POST", "/dlq/redrive", `{"actor":"a","failureClass":"server_error","limit":10}`, 200)
	exchange("DELETE", "/requests/"+id, "", 200)
	exchange("DELETE", "/requests/"+id, "", 409)
	resent := idOf(exchange("POST", "/requests/"+id+"/resend", `{"actor":"a","reason":"r"}`, 202, "Idempotency-Key", "rs1"))
	exchange("POST", "/requests/"+id+"/resend", `{"actor":"a","reason":"r"}`, 200, "Idempotency-Key", "rs1")
	exchange("POST", "/requests/"+resent+"/resend", "", 409)
	exchange("POST", "/requests/"+id+"/resend", `{"actor":"`+strings.Repeat("a", 201)+`"}`, 400)
	exchange("POST", "/requests/01m8mg842n8nbsaee7cq/resend", "", 404)
	exchange("GET", "/requests/"+resent, "", 200)
	exchange("DELETE", "/requests/"+resent+"/payload", "", 409)
	exchange("DELETE", "/requests/"+id+"/payload", `{"actor":"dpo"}`, 200)
	exchange("DELETE", "/requests/"+id+"/payload", `{"nope":1}`, 400)
	exchange("POST", "/requests/"+id+"/resend", "", 409)
	exchange("GET", "/requests/"+id, "", 200)
	sch := idOf(exchange("POST", "/schedules", `{"cron":"*/5 * * * *","timezone":"Europe/Paris","request":{"url":"https://example.com/tick","headers":{"X-Api-Key":"k"}}}`, 201))
	exchange("POST", "/schedules", `{"cron":"not cron","request":{"url":"https://example.com"}}`, 400)
	exchange("GET", "/schedules?limit=5", "", 200)
	exchange("GET", "/schedules/"+sch, "", 200)
	exchange("POST", "/schedules/"+sch+"/pause", "", 200)
	exchange("POST", "/schedules/"+sch+"/resume", "", 200)
	exchange("DELETE", "/schedules/"+sch, "", 200)
	exchange("GET", "/schedules/"+sch, "", 404)
	exchange("GET", "/tenants", "", 200)
	exchange("GET", "/tenants/default/retention", "", 200)
	exchange("PUT", "/tenants/default/retention", `{"retention":"7d","payloadRetention":"1d"}`, 200)
	exchange("PUT", "/tenants/default/retention", `{"retention":"7d","payloadRetention":"8d"}`, 400)
	exchange("PUT", "/tenants/default/retention", `{"payloadRetention":null}`, 200)
	exchange("PUT", "/tenants/nosuch/retention", `{"retention":"7d"}`, 404)
	exchange("DELETE", "/tenants/default/retention", "", 200)
	exchange("PUT", "/credentials/partner", `{"type":"bearer","token":"t0ken"}`, 201)
	exchange("PUT", "/credentials/partner", `{"type":"oauth2_client_credentials","tokenUrl":"https://auth.example.com/token","clientId":"c","clientSecret":"s","scopes":["a"]}`, 200)
	exchange("PUT", "/credentials/egress", `{"type":"proxy","url":"http://proxy.example.com:3128","username":"u","password":"p"}`, 201)
	exchange("PUT", "/credentials/bad", `{"type":"kerberos"}`, 400)
	exchange("PUT", "/credentials/bad", `{"type":"oauth2_client_credentials","tokenUrl":"http://169.254.169.254/t","clientId":"c","clientSecret":"s"}`, 422)
	exchange("GET", "/credentials", "", 200)
	exchange("GET", "/credentials/partner", "", 200)
	exchange("GET", "/credentials/nope", "", 404)
	exchange("POST", "/credentials/rekey", "", 200)
	exchange("POST", "/requests", `{"url":"https://example.com/c","delayMs":600000,"credential":"partner","proxy":"egress"}`, 202)
	exchange("POST", "/requests", `{"url":"https://example.com/c","credential":"nope"}`, 422)
	exchange("PUT", "/endpoints/https:example.com:443/settings", `{"credential":"partner","proxy":"egress"}`, 200)
	exchange("PUT", "/endpoints/https:example.com:443/settings", `{"credential":"egress"}`, 422)
	exchange("PUT", "/endpoints/https:example.com:443/settings", `{"other":"x"}`, 400)
	exchange("GET", "/endpoints/https:example.com:443/settings", "", 200)
	exchange("GET", "/endpoints/settings", "", 200)
	exchange("DELETE", "/endpoints/https:example.com:443/settings", "", 200)
	secretID := regexp.MustCompile(`"id":"(ss_[0-9a-f]+)"`).FindStringSubmatch(string(exchange("POST", "/signing-secrets", "", 201)))[1]
	exchange("POST", "/signing-secrets", `{"type":"ed25519"}`, 201)
	exchange("POST", "/signing-secrets", `{"type":"rsa"}`, 400)
	exchange("GET", "/signing-secrets", "", 200)
	exchange("DELETE", "/signing-secrets/"+secretID, "", 200)
	exchange("DELETE", "/signing-secrets/"+secretID, "", 404)
	exchange("DELETE", "/credentials/partner", "", 200)
	exchange("DELETE", "/credentials/partner", "", 404)
	exchange("GET", "/healthz", "", 200)
	exchange("GET", "/readyz", "", 200)
	exchange("GET", "/metrics", "", 200)
	exchange("GET", "/openapi.json", "", 200)
}
