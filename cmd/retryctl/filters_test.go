package main

import (
	"strings"
	"testing"
)

// list takes the API's filters as flags; resend and expunge act on what
// they select, with a dry run that names what the real call then does.
func TestFiltersOfListResendAndExpunge(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	done := api(t, base, "POST", "/requests", `{"url":"http://127.0.0.1:9/orders","method":"POST","delayMs":3600000}`)["id"].(string)
	api(t, base, "DELETE", "/requests/"+done, "")
	other := api(t, base, "POST", "/requests", `{"url":"http://localhost:9/other","method":"PUT","delayMs":3600000}`)["id"].(string)

	out, errOut, code := ctl(t, base, "list", "--host", "127.0.0.1")
	if code != 0 || !strings.Contains(out, done) || strings.Contains(out, other) {
		t.Errorf("list --host 127.0.0.1 (%d): %s %s", code, out, errOut)
	}
	out, errOut, code = ctl(t, base, "list", "--created-from", "1h", "--method", "put")
	if code != 0 || !strings.Contains(out, other) || strings.Contains(out, done) {
		t.Errorf("list --created-from 1h --method put (%d): %s %s", code, out, errOut)
	}
	out, errOut, code = ctl(t, base, "list", "--status", "canceled", "--finished-from", "2h", "--url-contains", "ORDERS", "--host", "127.0.0.1")
	if code != 0 || !strings.Contains(out, done) {
		t.Errorf("list by finish and url (%d): %s %s", code, out, errOut)
	}
	if _, errOut, code = ctl(t, base, "list", "--url-contains", "orders"); code != 1 || !strings.Contains(errOut, "add host or label") {
		t.Errorf("list --url-contains alone (%d): %s; want the API's 400 naming host", code, errOut)
	}
	if _, errOut, code = ctl(t, base, "list", "--created-from", "yesterday"); code == 0 || !strings.Contains(errOut, "duration ago") {
		t.Errorf("list --created-from yesterday (%d): %s", code, errOut)
	}

	out, errOut, code = ctl(t, base, "resend", "--host", "127.0.0.1", "--dry-run")
	if code != 0 || !strings.Contains(out, done+" would be resent") || !strings.Contains(out, "dry run: 1 would be resent, 0 skipped") {
		t.Errorf("resend --dry-run (%d): %s %s", code, out, errOut)
	}
	out, errOut, code = ctl(t, base, "resend", "--host", "127.0.0.1", "--reason", "lost", "--actor", "erin")
	if code != 0 || !strings.Contains(out, done+" as ") || !strings.Contains(out, "1 resent, 0 skipped") {
		t.Errorf("resend by filter (%d): %s %s", code, out, errOut)
	}
	out, errOut, code = ctl(t, base, "expunge", "--host", "127.0.0.1", "--dry-run")
	// The resend made a pending request to the same host: skipped.
	if code != 0 || !strings.Contains(out, done+" would be expunged") || !strings.Contains(out, "dry run: 1 would be expunged, 1 skipped") {
		t.Errorf("expunge --dry-run (%d): %s %s", code, out, errOut)
	}
	for _, args := range [][]string{{"resend", done, "--host", "a.com"}, {"expunge"}, {"expunge", done, "--dry-run"}} {
		if _, errOut, code := ctl(t, base, args...); code == 0 || errOut == "" {
			t.Errorf("%v: exit %d, %q; want refused", args, code, errOut)
		}
	}
}
