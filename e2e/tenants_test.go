package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two tenants and an admin through every route of retryd's own API, the
// official QStash client (e2e/oracles/qstash-tenants.test.js) and
// retryctl: a tenant's key sees and acts on its own tenant only, another
// tenant's id is 404, "all" calls stay in the tenant, Idempotency-Keys are
// the tenant's own, and only the admin reaches the dashboard, /metrics and
// the signing keys.
func TestTenantsAreIsolatedOnEveryRoute(t *testing.T) {
	t.Parallel()
	const ka, kb, adm = "key-of-team-a", "key-of-team-b", "admin-key"
	const current, next = "sig_current_tenants_1", "sig_next_tenants_2"
	s := startStack(t, 1, "API_KEYS=team-a:"+ka+",team-b:"+kb, "ADMIN_KEYS="+adm,
		"QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next)
	as := func(key, method, path, body string, headers ...string) answer {
		t.Helper()
		return call(t, method, s.api+path, body, append([]string{"Authorization", "Bearer " + key}, headers...)...)
	}
	want := func(a answer, status int, what string) {
		t.Helper()
		if a.status != status {
			t.Errorf("%s: %d %s, want %d", what, a.status, a.raw, status)
		}
	}

	resultFile := filepath.Join(t.TempDir(), "result.json")
	nodeTest(t, "qstash-tenants.test.js", "RETRYD_URL="+s.api, "KEY_A="+ka, "KEY_B="+kb, "KEY_ADMIN="+adm,
		"QSTASH_CURRENT_SIGNING_KEY="+current, "QSTASH_NEXT_SIGNING_KEY="+next, "RESULT_FILE="+resultFile)
	raw, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	var qs struct{ A, B, KeptPending, CancelledByB, FailedA, DeletedB string }
	if err := json.Unmarshal(raw, &qs); err != nil {
		t.Fatalf("suite result %s: %v", raw, err)
	}
	// What the QStash calls did, seen through retryd's own API.
	if d := as(ka, "GET", "/requests/"+qs.KeptPending, ""); d.body["status"] != "pending" || d.body["tenant"] != "team-a" {
		t.Errorf("team-b's cancel all reached team-a's message: %s", d.raw)
	}
	if d := as(kb, "GET", "/requests/"+qs.CancelledByB, ""); d.body["status"] != "canceled" {
		t.Errorf("team-b's own cancel all: %s", d.raw)
	}
	want(as(kb, "GET", "/requests/"+qs.DeletedB, ""), 404, "team-b's message deleted from its DLQ")
	if d := as(ka, "GET", "/requests/"+qs.FailedA, ""); d.body["status"] != "failed" || d.body["redriveCount"] != 0.0 {
		t.Errorf("team-b's DLQ calls reached team-a's failed message: %s", d.raw)
	}

	dest := newDestination(t)
	later := fmt.Sprintf(`{"url":%q,"delayMs":600000}`, dest.script("/later", 200))
	submit := func(key string, headers ...string) answer {
		t.Helper()
		return as(key, "POST", "/requests", later, headers...)
	}
	ra, rb := submit(ka, "Idempotency-Key", "order-1"), submit(kb, "Idempotency-Key", "order-1")
	if ra.status != 202 || rb.status != 202 || ra.body["id"] == rb.body["id"] {
		t.Fatalf("one Idempotency-Key in two tenants: %d %s / %d %s, want two new requests", ra.status, ra.raw, rb.status, rb.raw)
	}
	if again := submit(kb, "Idempotency-Key", "order-1"); again.status != 200 || again.body["id"] != rb.body["id"] {
		t.Errorf("team-b's own replay: %d %s", again.status, again.raw)
	}
	idA, idB := ra.body["id"].(string), rb.body["id"].(string)

	t.Run("requests", func(t *testing.T) {
		if d := as(ka, "GET", "/requests/"+idA, ""); d.status != 200 || d.body["tenant"] != "team-a" {
			t.Errorf("team-a's own request: %d %s", d.status, d.raw)
		}
		want(as(kb, "GET", "/requests/"+idA, ""), 404, "team-b reads team-a's request")
		want(as(kb, "DELETE", "/requests/"+idA, ""), 404, "team-b cancels team-a's request")
		if d := as(adm, "GET", "/requests/"+idA, ""); d.status != 200 || d.body["tenant"] != "team-a" {
			t.Errorf("the admin reads team-a's request: %d %s", d.status, d.raw)
		}
		listed := func(key, query string) []string {
			t.Helper()
			a := as(key, "GET", "/requests?limit=500"+query, "")
			if a.status != 200 {
				t.Fatalf("list %s: %d %s", query, a.status, a.raw)
			}
			var out []string
			for _, d := range a.body["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string)+"@"+d.(map[string]any)["tenant"].(string))
			}
			return out
		}
		for _, id := range listed(kb, "") {
			if !strings.HasSuffix(id, "@team-b") {
				t.Errorf("team-b lists %s", id)
			}
		}
		all := strings.Join(listed(adm, ""), " ")
		if !strings.Contains(all, idA+"@team-a") || !strings.Contains(all, idB+"@team-b") {
			t.Errorf("the admin's list lacks a tenant: %s", all)
		}
		for _, id := range listed(adm, "&tenant=team-a") {
			if !strings.HasSuffix(id, "@team-a") {
				t.Errorf("the admin's tenant=team-a list shows %s", id)
			}
		}
		want(as(kb, "GET", "/requests?tenant=team-a", ""), 403, "team-b names team-a")
		want(as(adm, "GET", "/requests?tenant=Not+A+Tenant", ""), 400, "a bad tenant name")
		want(as(kb, "DELETE", "/requests/"+idB, ""), 200, "team-b cancels its own")
		if d := as(ka, "GET", "/requests/"+idA, ""); d.body["status"] != "pending" {
			t.Errorf("team-a's request after team-b's calls: %s", d.raw)
		}
	})

	t.Run("dlq", func(t *testing.T) {
		ids := func(key string) string {
			a := as(key, "GET", "/dlq?limit=500", "")
			if a.status != 200 {
				t.Fatalf("dlq: %d %s", a.status, a.raw)
			}
			var out []string
			for _, d := range a.body["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string))
			}
			return strings.Join(out, " ")
		}
		if got := ids(ka); got != qs.FailedA {
			t.Errorf("team-a's DLQ: %q, want %s", got, qs.FailedA)
		}
		if got := ids(kb); got != "" {
			t.Errorf("team-b's DLQ: %q, want it empty", got)
		}
		want(as(kb, "POST", "/dlq/"+qs.FailedA+"/redrive", `{"actor":"b"}`), 404, "team-b redrives team-a's request")
		bulk := as(kb, "POST", "/dlq/redrive", `{"actor":"b"}`)
		if bulk.status != 200 || len(bulk.body["redriven"].([]any)) != 0 {
			t.Errorf("team-b's bulk redrive of everything: %d %s, want nothing redriven", bulk.status, bulk.raw)
		}
		bulk = as(kb, "POST", "/dlq/redrive", fmt.Sprintf(`{"ids":[%q]}`, qs.FailedA))
		if bulk.status != 200 || len(bulk.body["redriven"].([]any)) != 0 {
			t.Errorf("team-b's bulk redrive naming team-a's id: %d %s", bulk.status, bulk.raw)
		}
		want(as(kb, "POST", "/dlq/redrive", `{"tenant":"team-a"}`), 403, "team-b's bulk redrive naming team-a")
		if got := ids(adm); !strings.Contains(got, qs.FailedA) {
			t.Errorf("the admin's DLQ: %q", got)
		}
	})

	t.Run("schedules", func(t *testing.T) {
		body := fmt.Sprintf(`{"cron":"0 0 * * *","request":{"url":%q}}`, dest.script("/tick", 200))
		sc := as(ka, "POST", "/schedules", body)
		if sc.status != 201 || sc.body["tenant"] != "team-a" {
			t.Fatalf("team-a's schedule: %d %s", sc.status, sc.raw)
		}
		id := sc.body["id"].(string)
		for _, c := range []struct{ method, path string }{{"GET", ""}, {"POST", "/pause"}, {"POST", "/resume"}, {"DELETE", ""}} {
			want(as(kb, c.method, "/schedules/"+id+c.path, ""), 404, "team-b "+c.method+" team-a's schedule"+c.path)
		}
		if l := as(kb, "GET", "/schedules", ""); l.status != 200 || strings.Contains(l.raw, id) {
			t.Errorf("team-b's schedules: %d %s", l.status, l.raw)
		}
		if l := as(adm, "GET", "/schedules?tenant=team-a", ""); !strings.Contains(l.raw, id) {
			t.Errorf("the admin's schedules of team-a: %s", l.raw)
		}
		want(as(ka, "DELETE", "/schedules/"+id, ""), 200, "team-a deletes its own")
	})

	t.Run("flows", func(t *testing.T) {
		for _, key := range []string{ka, kb} {
			fc := fmt.Sprintf(`{"url":%q,"flowControl":{"key":"shared","parallelism":1}}`, dest.script("/flow", 200))
			want(as(key, "POST", "/requests", fc), 202, "a flow-controlled request")
		}
		waitFor(t, 15*time.Second, "both flow-controlled requests delivered", func() bool { return len(dest.calls("/flow")) == 2 })
		// One key name, two tenants: two keys, each shown to its tenant.
		waitFor(t, 15*time.Second, "the admin's flows to show key shared of both tenants", func() bool {
			raw := as(adm, "GET", "/flows", "").raw
			return strings.Contains(raw, `"key":"shared","tenant":"team-a"`) && strings.Contains(raw, `"key":"shared","tenant":"team-b"`)
		})
		f := as(kb, "GET", "/flows", "")
		if f.status != 200 || strings.Contains(f.raw, "team-a") || !strings.Contains(f.raw, `"key":"shared","tenant":"team-b"`) {
			t.Errorf("team-b's flows: %d %s", f.status, f.raw)
		}
		want(as(kb, "GET", "/flows?tenant=team-a", ""), 403, "team-b's flows of team-a")
		// An operator's pause is the tenant's key's only.
		if p := as(ka, "POST", "/flows/shared/pause", ""); p.status != 200 || p.body["isPaused"] != true || p.body["tenant"] != "team-a" {
			t.Errorf("team-a pauses its key: %d %s", p.status, p.raw)
		}
		if g := as(kb, "GET", "/flows/shared", ""); g.body["isPaused"] != false {
			t.Errorf("team-a's pause reached team-b's key of the same name: %s", g.raw)
		}
		if p := as(ka, "POST", "/flows/shared/pin?parallelism=0", ""); p.status != 400 {
			t.Errorf("a pin of 0: %d %s", p.status, p.raw)
		}
		want(as(ka, "POST", "/flows/shared/explode", ""), 404, "an unknown action")
		want(as(ka, "POST", "/flows/shared/resume", ""), 200, "team-a resumes its key")
	})

	t.Run("admin only", func(t *testing.T) {
		for _, path := range []string{"/metrics", "/monitoring/", "/v2/keys"} {
			want(as(ka, "GET", path, ""), 403, "team-a's "+path)
			want(as(adm, "GET", path, ""), 200, "the admin's "+path)
		}
		req, _ := http.NewRequest("GET", s.api+"/monitoring/", nil)
		req.SetBasicAuth("", ka)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
			t.Errorf("team-a's key as the dashboard's password: %v %v", resp.StatusCode, err)
		} else {
			resp.Body.Close()
		}
		m := as(adm, "GET", "/metrics", "")
		if !strings.Contains(m.raw, `retryd_requests{status="failed",tenant="team-a"} 1`) {
			t.Errorf("metrics lack team-a's failed request by tenant")
		}
		if k := as(adm, "GET", "/v2/keys", ""); k.body["current"] != current {
			t.Errorf("the admin's /v2/keys: %s", k.raw)
		}
	})

	t.Run("retryctl", func(t *testing.T) {
		out, _, code := s.retryctl(t, []string{"RETRYD_API_KEY=" + kb}, "list", "--limit", "500")
		if code != 0 || strings.Contains(out, idA) || !strings.Contains(out, idB) {
			t.Errorf("retryctl list as team-b (%d):\n%s", code, out)
		}
		if _, errOut, code := s.retryctl(t, []string{"RETRYD_API_KEY=" + kb}, "get", idA); code == 0 {
			t.Errorf("retryctl get of team-a's request as team-b succeeded: %s", errOut)
		}
		out, _, code = s.retryctl(t, []string{"RETRYD_API_KEY=" + adm}, "list", "--tenant", "team-a", "--limit", "500")
		if code != 0 || !strings.Contains(out, idA) || strings.Contains(out, idB) {
			t.Errorf("retryctl list --tenant team-a as the admin (%d):\n%s", code, out)
		}
	})
}
