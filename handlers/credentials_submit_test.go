package handlers_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// A request names a credential and a proxy its tenant has, of the right
// types: kept on the request and shown. Any other is refused at submit
// with 422 naming the member (or, on /v2, the header) and why, and no
// request is made, on every route that submits.
func TestCredentialNamedBySubmissionsMustExistAndFit(t *testing.T) {
	t.Parallel()
	ts, _ := credentialsServer(t)
	for name, body := range map[string]string{
		"partner": `{"type":"bearer","token":"t0ken"}`,
		"egress":  `{"type":"proxy","url":"http://127.0.0.1:3128"}`,
	} {
		if a := putCredential(t, ts, "acme-key", name, body); a.status != 201 {
			t.Fatalf("PUT %s: %d %s", name, a.status, a.raw)
		}
	}
	const url = "http://127.0.0.1:1/hook"
	for _, tc := range []struct {
		name, credential, proxy, field, why string
	}{
		{"a credential that does not exist", "nope", "", "credential", "does not exist"},
		{"a proxy that does not exist", "", "nope", "proxy", "does not exist"},
		{"a proxy named as the credential", "egress", "", "credential", "a proxy"},
		{"a bearer named as the proxy", "", "partner", "proxy", "not a proxy"},
	} {
		sub := map[string]any{"url": url, "delayMs": 3600000}
		var headers []string
		if tc.credential != "" {
			sub["credential"] = tc.credential
			headers = append(headers, "Retryd-Credential", tc.credential)
		}
		if tc.proxy != "" {
			sub["proxy"] = tc.proxy
			headers = append(headers, "Retryd-Proxy", tc.proxy)
		}
		a := post(t, ts, jsonBody(t, sub), bearer("acme-key")...)
		code, field := errorOf(t, a)
		if a.status != 422 || code != "invalid_credential" || field != tc.field || !strings.Contains(a.raw, tc.why) {
			t.Errorf("POST /requests with %s: %d %s, want 422 naming %s and saying %q", tc.name, a.status, a.raw, tc.field, tc.why)
		}
		schedule := jsonBody(t, map[string]any{"cron": "@every 1h", "request": map[string]any{"url": url, "credential": sub["credential"], "proxy": sub["proxy"]}})
		a = do(t, "POST", ts.URL+"/schedules", "application/json", schedule, bearer("acme-key")...)
		if _, field := errorOf(t, a); a.status != 422 || field != "request."+tc.field {
			t.Errorf("POST /schedules with %s: %d %s, want 422 naming request.%s", tc.name, a.status, a.raw, tc.field)
		}
		header := map[string]string{"credential": "Retryd-Credential", "proxy": "Retryd-Proxy"}[tc.field]
		for _, v2 := range []struct{ path, ctype, body string }{
			{"/v2/publish/" + url, "text/plain", "x"},
			{"/v2/enqueue/q1/" + url, "text/plain", "x"},
		} {
			a = do(t, "POST", ts.URL+v2.path, v2.ctype, v2.body, append(bearer("acme-key"), headers...)...)
			msg, _ := a.body["error"].(string)
			if a.status != 422 || !strings.HasPrefix(msg, header+" names") || !strings.Contains(msg, tc.why) {
				t.Errorf("POST %s with %s: %d %s, want 422 saying %s %q", v2.path, tc.name, a.status, a.raw, header, tc.why)
			}
		}
		batchHeaders := map[string]string{}
		for i := 0; i+1 < len(headers); i += 2 {
			batchHeaders[headers[i]] = headers[i+1]
		}
		batch := jsonBody(t, []any{map[string]any{"destination": url, "headers": batchHeaders}})
		a = do(t, "POST", ts.URL+"/v2/batch", "application/json", batch, bearer("acme-key")...)
		if msg, _ := a.body["error"].(string); a.status != 422 || !strings.Contains(msg, header+" names") {
			t.Errorf("POST /v2/batch with %s: %d %s, want 422 naming %s", tc.name, a.status, a.raw, header)
		}
	}
	if a := do(t, "GET", ts.URL+"/requests", "", "", bearer("acme-key")...); !strings.Contains(a.raw, `"data":[]`) {
		t.Errorf("after the refusals: %.300s, want no request", a.raw)
	}
	// Another tenant's credential of the same name is not this one's.
	a := post(t, ts, jsonBody(t, map[string]any{"url": url, "delayMs": 3600000, "credential": "partner"}), bearer("beta-key")...)
	if _, field := errorOf(t, a); a.status != 422 || field != "credential" {
		t.Errorf("beta naming acme's credential: %d %s, want 422", a.status, a.raw)
	}
	// A malformed name is the validator's 400, before any lookup.
	a = post(t, ts, jsonBody(t, map[string]any{"url": url, "credential": strings.Repeat("c", 129)}), bearer("acme-key")...)
	if _, field := errorOf(t, a); a.status != 400 || field != "credential" {
		t.Errorf("a credential name too long: %d %s, want 400 naming credential", a.status, a.raw)
	}
	a = do(t, "POST", ts.URL+"/v2/publish/"+url, "text/plain", "x", append(bearer("acme-key"), "Retryd-Proxy", strings.Repeat("p", 129))...)
	if msg, _ := a.body["error"].(string); a.status != 400 || !strings.HasPrefix(msg, "Retryd-Proxy") {
		t.Errorf("a Retryd-Proxy too long: %d %s, want 400 naming it", a.status, a.raw)
	}

	// Both fit: stored, shown, and carried by a publish.
	a = post(t, ts, jsonBody(t, map[string]any{"url": url, "delayMs": 3600000, "credential": "partner", "proxy": "egress"}), bearer("acme-key")...)
	if a.status != 202 {
		t.Fatalf("POST /requests naming both: %d %s", a.status, a.raw)
	}
	doc := do(t, "GET", ts.URL+"/requests/"+a.body["id"].(string), "", "", bearer("acme-key")...)
	if doc.body["credential"] != "partner" || doc.body["proxy"] != "egress" {
		t.Errorf("the request shows credential %v, proxy %v; want partner, egress", doc.body["credential"], doc.body["proxy"])
	}
	pub := do(t, "POST", ts.URL+"/v2/publish/"+url, "text/plain", "x", append(bearer("acme-key"), "Retryd-Credential", "partner", "Upstash-Delay", "1h")...)
	if pub.status != 201 {
		t.Fatalf("publish naming partner: %d %s", pub.status, pub.raw)
	}
	doc = do(t, "GET", ts.URL+"/requests/"+pub.body["messageId"].(string), "", "", bearer("acme-key")...)
	if doc.body["credential"] != "partner" {
		t.Errorf("the published message shows credential %v, want partner", doc.body["credential"])
	}
	if _, ok := doc.body["proxy"]; ok {
		t.Errorf("a message naming no proxy shows one: %s", doc.raw)
	}
	// Resent, it names the same.
	cancel := do(t, "DELETE", ts.URL+"/requests/"+a.body["id"].(string), "", "", bearer("acme-key")...)
	if cancel.status != 200 {
		t.Fatalf("cancel: %d %s", cancel.status, cancel.raw)
	}
	re := do(t, "POST", ts.URL+"/requests/"+a.body["id"].(string)+"/resend", "application/json", `{"actor":"erin"}`, bearer("acme-key")...)
	var res struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(re.raw), &res); err != nil || re.status/100 != 2 || res.ID == "" {
		t.Fatalf("resend: %d %s", re.status, re.raw)
	}
	doc = do(t, "GET", ts.URL+"/requests/"+res.ID, "", "", bearer("acme-key")...)
	if doc.body["credential"] != "partner" || doc.body["proxy"] != "egress" {
		t.Errorf("the resent request shows credential %v, proxy %v; want partner, egress", doc.body["credential"], doc.body["proxy"])
	}
}
