package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The API, retryctl and the dashboard tell the same truth about the same
// requests, on the real programs and in a real browser:
//   - one redriven request shows one set of attempt numbers everywhere
//     (its attempts over its life, its run, the run's budget);
//   - a request held by a paused key says so (waitingFor paused, no time:
//     a resume starts it), and no surface gives it asynq's safety-net time;
//   - a delayed request's next attempt is retryd's due time to the
//     millisecond, and its timeout is its timeoutMs;
//   - the dashboard's first numbers are the requests by status the API
//     lists, and asynq's counters say they count attempts;
//   - retryctl flows shows a destination that failed every attempt as 100 %
//     failed, with the overload share (429, 503, timeouts) named as such.
func TestSurfacesTellTheSameTruth(t *testing.T) {
	const key = "truth-key"
	s := startStack(t, 1, "API_KEYS="+key)
	auth := []string{"RETRYD_API_KEY=" + key}
	authed := func(method, url, body string) answer {
		return call(t, method, url, body, "Authorization", "Bearer "+key)
	}
	submit := func(body string) string {
		t.Helper()
		a := authed("POST", s.api+"/requests", body)
		if a.status != 202 {
			t.Fatalf("submit %s: %d %s", body, a.status, a.raw)
		}
		return a.body["id"].(string)
	}
	get := func(id string) map[string]any { return authed("GET", s.api+"/requests/"+id, "").body }
	waitStatus := func(id, status string) {
		t.Helper()
		waitFor(t, 20*time.Second, id+" "+status, func() bool { return get(id)["status"] == status })
	}
	ok, failing := newDestination(t), newDestination(t)

	for i := 0; i < 3; i++ {
		waitStatus(submit(fmt.Sprintf(`{"url":%q}`, ok.script(fmt.Sprintf("/ok/%d", i), 200))), "completed")
	}
	// A request that fails its two attempts, is redriven and fails its two
	// again: 4 attempts in its life, run 2 spent its budget of 2.
	redriven := submit(fmt.Sprintf(`{"url":%q,"maxRetries":1,"backoffMs":100}`, failing.script("/down", 500)))
	waitStatus(redriven, "failed")
	if a := authed("POST", s.api+"/dlq/"+redriven+"/redrive", `{"actor":"ops","reason":"try again"}`); a.status != 202 {
		t.Fatalf("redrive: %d %s", a.status, a.raw)
	}
	waitFor(t, 20*time.Second, "the redriven request to fail again", func() bool {
		d := get(redriven)
		return d["status"] == "failed" && d["attemptCount"] == 4.0
	})
	if a := authed("POST", s.api+"/flows/held/pause", ""); a.status != 200 {
		t.Fatalf("pause: %d %s", a.status, a.raw)
	}
	paused := submit(fmt.Sprintf(`{"url":%q,"flowControl":{"key":"held","parallelism":5}}`, ok.script("/held", 200)))
	delayed := submit(fmt.Sprintf(`{"url":%q,"delayMs":600000,"timeoutMs":30000}`, ok.script("/later", 200)))
	waitFor(t, 10*time.Second, "the paused key to hold its request", func() bool { return get(paused)["waitingFor"] == "paused" })

	// The API.
	doc := get(redriven)
	if doc["attemptCount"] != 4.0 || doc["runAttempts"] != 2.0 || doc["maxRetries"] != 1.0 || doc["redriveCount"] != 1.0 {
		t.Errorf("redriven: attemptCount %v runAttempts %v maxRetries %v redriveCount %v, want 4 2 1 1",
			doc["attemptCount"], doc["runAttempts"], doc["maxRetries"], doc["redriveCount"])
	}
	const counts = "4 attempts · run 2: 2 of 2 allowed"
	if doc := get(paused); doc["waitingFor"] != "paused" || doc["nextRetryAt"] != nil {
		t.Errorf("paused: waitingFor %v nextRetryAt %v, want paused and null (a resume starts it)", doc["waitingFor"], doc["nextRetryAt"])
	}
	for _, id := range []string{paused, delayed} {
		before := time.Now().Truncate(time.Millisecond)
		next, _ := get(id)["nextRetryAt"].(string)
		if at, err := time.Parse(time.RFC3339Nano, next); next != "" && (err != nil || at.Before(before)) {
			t.Errorf("%s: nextRetryAt %s is in the past (asked at %s)", id, next, before.Format(time.RFC3339Nano))
		}
	}
	delayedDoc := get(delayed)
	due, _ := delayedDoc["nextRetryAt"].(string)
	if due == "" || delayedDoc["waitingFor"] != nil {
		t.Fatalf("delayed: nextRetryAt %v waitingFor %v, want its due time and no wait", delayedDoc["nextRetryAt"], delayedDoc["waitingFor"])
	}

	// retryctl.
	out, _, code := s.retryctl(t, auth, "get", redriven)
	if code != 0 || !strings.Contains(out, counts) {
		t.Errorf("retryctl get: want %q in:\n%s", counts, out)
	}
	out, _, _ = s.retryctl(t, auth, "list", "--status", "failed")
	if !strings.Contains(out, counts) {
		t.Errorf("retryctl list: want %q in:\n%s", counts, out)
	}
	out, _, _ = s.retryctl(t, auth, "get", paused)
	if want := "for paused · starts when its flow-control key is resumed"; !strings.Contains(out, want) || strings.Contains(out, "next attempt") {
		t.Errorf("retryctl get of the paused request: want %q and no next attempt in:\n%s", want, out)
	}
	// retryctl list says why each waits and until when: the paused one
	// until a resume, the delayed one until its due time.
	out, _, _ = s.retryctl(t, auth, "list", "--status", "pending")
	dueAt, _ := time.Parse(time.RFC3339, due)
	for id, want := range map[string]string{paused: "pending paused on resume", delayed: "pending - " + dueAt.UTC().Format(time.RFC3339)} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, id) {
				line = strings.Join(strings.Fields(l), " ")
			}
		}
		if !strings.HasPrefix(line, id+" "+want+" ") {
			t.Errorf("retryctl list line of %s: %q, want it to start %q", id, line, id+" "+want)
		}
	}
	failingKey := strings.TrimPrefix(failing.URL, "http://")
	var flowLine string
	waitFor(t, 15*time.Second, "retryctl flows to show the failing destination", func() bool {
		out, _, _ = s.retryctl(t, auth, "flows")
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, failingKey+" ") {
				flowLine = l
				return true
			}
		}
		return false
	})
	header := strings.SplitN(out, "\n", 2)[0]
	if !strings.Contains(header, "OVERLOADED (429/503/TIMEOUT)") || strings.Contains(header, "FAILURES") {
		t.Errorf("retryctl flows header: %q, want the overload share named as such", header)
	}
	if f := strings.Fields(flowLine); len(f) < 3 || f[len(f)-2] != "100%" || f[len(f)-1] != "0%" || f[len(f)-3] != "4" {
		t.Errorf("retryctl flows for a destination that failed every attempt (4, all 500): %q, want 4 attempts, 100%% failed, 0%% overloaded", flowLine)
	}

	// The dashboard.
	want := map[string]int{}
	var line []string
	for _, st := range []string{"pending", "retrying", "completed", "failed", "canceled"} {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(authed("GET", s.api+"/requests?limit=500&status="+st, "").raw), &page); err != nil {
			t.Fatal(err)
		}
		want[st] = len(page.Data)
		line = append(line, fmt.Sprintf("%s %d", st, len(page.Data)))
	}
	if want["completed"] != 3 || want["failed"] != 1 || want["pending"] != 2 {
		t.Fatalf("the API lists %v, want 3 completed, 1 failed, 2 pending", want)
	}
	headline := "Requests: " + strings.Join(line, " · ")
	ctx := browser(t, key)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=scheduled"),
		chromedp.WaitVisible(fmt.Sprintf(`//div[@id="retryd-requests" and contains(., %q)]`, headline)),
	); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text("body"))
		t.Fatalf("the queue page does not open with %q: %v\n%s", headline, err, text)
	}
	// The headline comes first, before asynq's counters, which count
	// attempts and say so.
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const b = document.getElementById("retryd-requests");
		const all = document.querySelector("main").innerText;
		return all.indexOf(b.innerText) < all.indexOf("Attempts processed") ? "first" : all;
	})()`))
	if err != nil || first != "first" {
		t.Errorf("the requests by status are not the page's first numbers (%v):\n%s", err, first)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("main"))
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"Attempts processed", "Attempts failed", "Attempt error rate"} {
		if !strings.Contains(text, label) {
			t.Errorf("the queue page lacks %q:\n%s", label, text)
		}
	}
	// The overview lists the queue with asynq's counters: attempts too.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/"),
		chromedp.WaitVisible(fmt.Sprintf(`//div[@id="retryd-requests" and contains(., %q)]`, headline)),
		chromedp.Poll[chromedp.Void](`document.querySelector("main").innerText.includes("Attempts processed")`),
	); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text("body"))
		t.Fatalf("the overview does not show the requests first and asynq's counters as attempts: %v\n%s", err, text)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=scheduled"),
		chromedp.WaitVisible(`#retryd-requests`),
	); err != nil {
		t.Fatal(err)
	}
	// The paused request's row: why it waits, and no safety-net time.
	pausedRow := fmt.Sprintf(`//tr[contains(., %q)]`, paused[:10])
	if err := chromedp.Do(ctx, chromedp.WaitVisible(pausedRow)); err != nil {
		t.Fatalf("no row for the paused request: %v\n%s", err, text)
	}
	row, err := chromedp.Run(ctx, chromedp.Text(pausedRow))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, "waiting for paused") || !strings.Contains(row, "on an event") || strings.Contains(row, "in 4m") || strings.Contains(row, "NaN") {
		t.Errorf("the paused request's row: %q, want its reason and no time", row)
	}
	screenshot(t, ctx, "dashboard-waiting-requests")

	// The delayed request: retryd's due time to the millisecond, its
	// timeoutMs.
	detail := func(id string) string {
		t.Helper()
		step, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(step,
			chromedp.Navigate(s.api+"/monitoring/queues/retryd/tasks/"+id),
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const m = document.querySelector("main"); return !!m && m.innerText.includes(%q) && m.innerText.includes("Attempts this run:"); })()`, id)),
		); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Text("body"))
			t.Fatalf("the task page of %s: %v\n%s", id, err, text)
		}
		text, err := chromedp.Run(ctx, chromedp.Text("main"))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	text = detail(delayed)
	if !strings.Contains(text, "Next attempt: "+due) && !strings.Contains(text, "Next attempt:\n"+due) && !strings.Contains(text, due) {
		t.Errorf("the delayed request's page does not show its due time %s:\n%s", due, text)
	}
	if !strings.Contains(text, "30 seconds") {
		t.Errorf("the delayed request's page does not show its timeout as 30 seconds:\n%s", text)
	}
	screenshot(t, ctx, "dashboard-delayed-request-detail")
	// The redriven request: the same attempt numbers as the API and
	// retryctl; asynq's retry count is the run's attempts of its budget.
	text = detail(redriven)
	if !strings.Contains(text, counts) || !strings.Contains(text, "2/2") {
		t.Errorf("the redriven request's page: want %q and 2/2 attempts this run in:\n%s", counts, text)
	}
	screenshot(t, ctx, "dashboard-redriven-request")
}
