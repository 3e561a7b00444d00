package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Names through the running programs: the official QStash client
// (e2e/oracles/qstash-names.test.js) has names past their limits, or
// holding control characters, refused with a short 400, and a bare key
// cannot reach acme's flow-control key by spelling its internal name
// (acme, a control character, the key), through either API.
func TestNamesAreCheckedAndStayInTheirTenant(t *testing.T) {
	t.Parallel()
	const ka, bare, adm = "names-acme-key", "names-bare-key", "names-admin-key"
	s := startStack(t, 0, "API_KEYS=acme:"+ka+",beta:names-beta-key,"+bare, "ADMIN_KEYS="+adm)
	dest := newDestination(t)
	nodeTest(t, "qstash-names.test.js", "RETRYD_URL="+s.api, "KEY_ACME="+ka, "KEY_BARE="+bare, "DEST="+dest.script("/names", 200))

	as := func(key, method, path string) answer {
		t.Helper()
		return call(t, method, s.api+path, "", "Authorization", "Bearer "+key)
	}
	for _, path := range []string{"/flows/acme%1Facmeflow/pause", "/flows/acme%1Facmeflow/pin?parallelism=1",
		"/flows/acme%1Facmeflow/unpin?parallelism=true", "/flows/acme%1Facmeflow/resetRate",
		"/v2/flowControl/acme%1Facmeflow/pause", "/v2/flowControl/acme%1Facmeflow/pin?parallelism=1"} {
		for _, key := range []string{bare, adm} {
			if a := as(key, "POST", path); a.status != 400 {
				t.Errorf("POST %s: %d %s, want 400", path, a.status, a.raw)
			}
		}
	}
	if a := as(bare, "GET", "/flows/acme%1Facmeflow"); a.status != 400 {
		t.Errorf("GET of acme's key through its internal name: %d %s, want 400", a.status, a.raw)
	}
	own := as(ka, "GET", "/flows/acmeflow")
	if own.status != 200 || own.body["isPaused"] != false || own.body["isPinnedParallelism"] != false {
		t.Errorf("acme's key after the other tenants' calls: %d %s", own.status, own.raw)
	}
	// An admin reaches acme's key by naming the tenant.
	if a := as(adm, "POST", "/v2/flowControl/acmeflow/pause?tenant=acme"); a.status != 200 {
		t.Fatalf("admin pause of acme's key: %d %s", a.status, a.raw)
	}
	if a := as(ka, "GET", "/v2/flowControl/acmeflow"); a.body["isPaused"] != true {
		t.Errorf("the admin's pause did not reach acme's key: %s", a.raw)
	}
}

// One tenant fills every limit a list shows (1,000 messages with 20
// labels of 256 bytes and a 2 KB URL each, 100 requests with bodies of
// 250 KiB, then the largest label the API would take) and lists its
// requests and its logs: the logs stay a few megabytes, a page of
// requests stops short with a cursor, and the API's peak RSS stays under
// 100 MiB. With unbounded labels, 32
// messages of a 900 KB label made this answer 63 MB and the API 410 MB.
func TestNameLimitsBoundTheLargestList(t *testing.T) {
	t.Parallel()
	const key = "bound-acme-key"
	s := startStack(t, 0, "API_KEYS=acme:"+key)
	dest := newDestination(t)
	url := dest.script("/"+strings.Repeat("p", 1990), 200)
	auth := []string{"Authorization", "Bearer " + key}

	labels := make([]string, 20)
	for i := range labels {
		labels[i] = strings.Repeat(string(rune('a'+i)), 256)
	}
	item, _ := json.Marshal(map[string]any{"destination": url, "body": "x",
		"headers": map[string]string{"Upstash-Label": strings.Join(labels, ","), "Upstash-Delay": "1d"}})
	batch := "[" + strings.TrimSuffix(strings.Repeat(string(item)+",", 100), ",") + "]"
	for i := range 10 {
		if a := call(t, "POST", s.api+"/v2/batch", batch, auth...); a.status != 201 {
			t.Fatalf("batch %d: %d %s", i, a.status, a.raw[:min(len(a.raw), 300)])
		}
	}
	// The attack: labels far past the limit, refused now.
	huge := strings.Repeat("L", 900_000)
	for i := range 32 {
		a := call(t, "POST", s.api+"/v2/publish/"+url, "x", append(auth, "Upstash-Label", huge, "Upstash-Delay", "1d")...)
		if a.status != 400 {
			t.Errorf("publish %d with a 900 KB label: %d, want 400", i, a.status)
		}
		if a.status == 400 && len(a.raw) > 1024 {
			t.Errorf("the 400 to a 900 KB label is %d bytes: it echoes the label", len(a.raw))
		}
	}
	if a := call(t, "POST", s.api+"/v2/publish/"+url, "x", append(auth, "Upstash-Redact-Fields", huge)...); a.status != 400 || len(a.raw) > 1024 {
		t.Errorf("a 900 KB Upstash-Redact-Fields: %d, %d bytes; want a short 400", a.status, len(a.raw))
	}

	// Bodies are not names, but a list reads them: 100 of 256 KiB.
	big, _ := json.Marshal(map[string]any{"url": url, "body": strings.Repeat("b", 250<<10), "delayMs": 86_400_000})
	for i := range 100 {
		if a := call(t, "POST", s.api+"/requests", string(big), auth...); a.status != 202 {
			t.Fatalf("submit %d: %d %s", i, a.status, a.raw[:min(len(a.raw), 300)])
		}
	}
	pid := s.apiProc.cmd.Process.Pid
	page := call(t, "GET", s.api+"/requests?limit=500", "", auth...)
	data, _ := page.body["data"].([]any)
	if page.status != 200 || len(data) >= 100 || page.body["nextCursor"] == nil {
		t.Errorf("GET /requests?limit=500 over 25 MB of bodies: %d, %d requests, nextCursor %v; want a page cut short with a cursor",
			page.status, len(data), page.body["nextCursor"])
	}
	t.Logf("GET /requests?limit=500: %d requests, %.1f MB, then a cursor", len(data), float64(len(page.raw))/1e6)
	a := call(t, "GET", s.api+"/v2/events?count=1000", "", auth...)
	if a.status != 200 {
		t.Fatalf("events: %d %s", a.status, a.raw[:min(len(a.raw), 300)])
	}
	events, _ := a.body["events"].([]any)
	peak := peakRSSMiB(t, pid)
	t.Logf("GET /v2/events?count=1000: %d events, %.1f MB; API peak RSS %.0f MiB", len(events), float64(len(a.raw))/1e6, peak)
	if len(events) != 1000 {
		t.Errorf("%d events, want 1000", len(events))
	}
	if len(a.raw) > 16e6 {
		t.Errorf("one list answered %.1f MB", float64(len(a.raw))/1e6)
	}
	if peak > 100 {
		t.Errorf("the API's peak RSS is %.0f MiB, want under 100", peak)
	}
}

// peakRSSMiB is the highest resident set process pid has had (VmHWM).
func peakRSSMiB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
