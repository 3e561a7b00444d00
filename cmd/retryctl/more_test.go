package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// tenants retention shows what applies and where it comes from, sets it
// (an admin's key), refuses what the API refuses (a tenant that does not
// exist among it), and clears it.
func TestTenantsRetention(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "tenants", "retention", "default")
	if code != 0 || !strings.Contains(out, "retention") || !strings.Contains(out, "30d") || !strings.Contains(out, "(the default)") {
		t.Fatalf("tenants retention (%d):\n%s%s", code, out, errOut)
	}
	out, errOut, code = ctl(t, base, "tenants", "retention", "default", "--retention", "7d", "--payload-retention", "24h")
	if code != 0 || !strings.Contains(out, "7d") || !strings.Contains(out, "1d") || !strings.Contains(out, "(set for the tenant)") {
		t.Fatalf("set (%d):\n%s%s", code, out, errOut)
	}
	if doc := api(t, base, "GET", "/tenants/default/retention", ""); doc["retention"] != "7d" {
		t.Errorf("the API after the set: %v", doc)
	}
	out, _, _ = ctl(t, base, "--json", "tenants", "retention", "default")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["tenant"] != "default" {
		t.Errorf("--json: %v %s", err, out)
	}
	if _, errOut, code := ctl(t, base, "tenants", "retention", "default", "--retention", "soon"); code == 0 || !strings.Contains(errOut, "retention") {
		t.Errorf("a bad retention: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := ctl(t, base, "tenants", "retention", "default", "--clear", "--retention", "7d"); code == 0 || !strings.Contains(errOut, "--clear") {
		t.Errorf("--clear with --retention: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := ctl(t, base, "tenants", "retention", "nosuch", "--retention", "7d"); code == 0 || !strings.Contains(errOut, `no tenant "nosuch"`) {
		t.Errorf("a tenant that does not exist: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code = ctl(t, base, "tenants", "retention", "default", "--clear")
	if code != 0 || !strings.Contains(out, "30d") || strings.Contains(out, "(set for the tenant)") {
		t.Errorf("clear (%d):\n%s%s", code, out, errOut)
	}
}

// schedules get shows one schedule; a missing one is the API's 404.
func TestSchedulesGet(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	id := api(t, base, "POST", "/schedules", `{"cron":"0 3 * * *","request":{"url":"https://example.com/nightly","method":"POST"}}`)["id"].(string)
	api(t, base, "POST", "/schedules/"+id+"/pause", "")
	out, errOut, code := ctl(t, base, "schedules", "get", id)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "0 3 * * *") || !strings.Contains(out, "paused") ||
		!strings.Contains(out, "POST https://example.com/nightly") {
		t.Errorf("schedules get (%d):\n%s%s", code, out, errOut)
	}
	if _, errOut, code := ctl(t, base, "schedules", "get", "nosuch"); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("schedules get of a missing id: exit %d, stderr %q", code, errOut)
	}
}

// queues: set, list, get, pause, resume and delete, as the API answers.
func TestQueues(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "queues", "set", "billing", "--parallelism", "3")
	if code != 0 || !strings.Contains(out, "billing parallelism 3") {
		t.Fatalf("queues set (%d): %s%s", code, out, errOut)
	}
	out, _, code = ctl(t, base, "queues", "pause", "billing")
	if code != 0 || !strings.Contains(out, "paused yes") {
		t.Errorf("queues pause (%d): %s", code, out)
	}
	out, _, code = ctl(t, base, "queues")
	if code != 0 || !strings.Contains(out, "PARALLELISM") || !strings.Contains(out, "billing") || !strings.Contains(out, "yes") {
		t.Errorf("queues (%d):\n%s", code, out)
	}
	out, _, code = ctl(t, base, "queues", "resume", "billing")
	if code != 0 || !strings.Contains(out, "paused no") {
		t.Errorf("queues resume (%d): %s", code, out)
	}
	if _, errOut, code := ctl(t, base, "queues", "set", "billing"); code == 0 || !strings.Contains(errOut, "--parallelism") {
		t.Errorf("queues set without --parallelism: exit %d, stderr %q", code, errOut)
	}
	out, _, code = ctl(t, base, "queues", "delete", "billing")
	if code != 0 || !strings.Contains(out, "billing deleted") {
		t.Errorf("queues delete (%d): %s", code, out)
	}
	if _, errOut, code := ctl(t, base, "queues", "get", "billing"); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("queues get of a deleted queue: exit %d, stderr %q", code, errOut)
	}
}

// flows get shows one key's state: paused or not, and its pins.
func TestFlowsGet(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	api(t, base, "POST", "/flows/orders/pause", "")
	api(t, base, "POST", "/flows/orders/pin?parallelism=2", "")
	out, errOut, code := ctl(t, base, "flows", "get", "orders")
	if code != 0 || !strings.Contains(out, "paused       yes") || !strings.Contains(out, "2 (pinned)") {
		t.Errorf("flows get (%d):\n%s%s", code, out, errOut)
	}
	if _, errOut, code := ctl(t, base, "flows", "get", "a\x01b"); code == 0 || !strings.Contains(errOut, "key") {
		t.Errorf("flows get of a bad key: exit %d, stderr %q", code, errOut)
	}
}

// Without RETRYD_URL, retryctl calls the port the API was told (PORT),
// as after "PORT=3100 retryd -dev" in the same shell.
func TestBaseURLFollowsPort(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, DefaultURL},
		{map[string]string{"PORT": "3100"}, "http://127.0.0.1:3100"},
		{map[string]string{"PORT": "3100", "RETRYD_URL": "https://retryd.example.com"}, "https://retryd.example.com"},
	} {
		if got := baseURL(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("env %v: %s, want %s", c.env, got, c.want)
		}
	}
}

// tenants list names the tenants that exist, with their key counts.
func TestTenantsList(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "tenants", "list")
	if code != 0 || !strings.Contains(out, "TENANT") || !strings.Contains(out, "default") {
		t.Errorf("tenants list (%d):\n%s%s", code, out, errOut)
	}
}

// list takes several statuses and the waiting reason, and passes both to
// the API, whose refusal of a bad reason it shows.
func TestListTakesSeveralStatusesAndWaitingFor(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	id := api(t, base, "POST", "/requests", `{"url":"https://example.com/never","method":"POST"}`)["id"].(string)
	out, errOut, code := ctl(t, base, "list", "--status", "failed,pending")
	if code != 0 || !strings.Contains(out, id) {
		t.Errorf("list --status failed,pending (%d):\n%s%s, want %s listed", code, out, errOut, id)
	}
	if out, errOut, code := ctl(t, base, "list", "--status", "failed,completed"); code != 0 || strings.Contains(out, id) {
		t.Errorf("list --status failed,completed (%d):\n%s%s, want %s not listed", code, out, errOut, id)
	}
	if _, errOut, code := ctl(t, base, "list", "--waiting-for", "coffee"); code == 0 || !strings.Contains(errOut, "waitingFor") {
		t.Errorf("list --waiting-for coffee: exit %d, stderr %q, want the API's refusal", code, errOut)
	}
	if out, errOut, code := ctl(t, base, "list", "--waiting-for", "paused,rate"); code != 0 || strings.Contains(out, id) {
		t.Errorf("list --waiting-for paused,rate (%d):\n%s%s, want %s (waiting for nothing) not listed", code, out, errOut, id)
	}
}
