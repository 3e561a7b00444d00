package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// chromiumPath finds Debian's Chromium; it is never downloaded.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("chromium is not installed: install it with `apt-get install -y chromium` (make test does this when run as root)")
	return ""
}

// browser starts headless Chromium sending the API key with every request.
func browser(t *testing.T, key string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The dashboard sits behind the API key like every other route.
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + key}}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// screenshot saves the page as name.png under E2E_ARTIFACT_DIR (docs/ keeps
// the committed ones), or a temp dir.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 gives a PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("E2E_ARTIFACT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// clickRowAction hovers a row's action cell (its buttons appear then) and
// clicks the button named action.
func clickRowAction(t *testing.T, ctx context.Context, rowXPath, action string) {
	t.Helper()
	box, err := chromedp.Run(ctx,
		chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
			const row = document.evaluate(%q, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
			const r = row.lastElementChild.getBoundingClientRect();
			return [r.x + r.width / 2, r.y + r.height / 2];
		})()`, rowXPath)))
	if err != nil || len(box) != 2 {
		t.Fatalf("locate the action cell: %v %v", err, box)
	}
	button := rowXPath + fmt.Sprintf(`//button[@title=%q or @aria-label=%q]`, action, action)
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(chromedp.MouseMoved, box[0], box[1]),
		chromedp.WaitVisible(button),
		chromedp.Click(button),
	); err != nil {
		t.Fatalf("click %s: %v", action, err)
	}
}

// An operator works retryd from the dashboard in a real browser:
//   - a failed request's row shows its method, host and path, its attempt
//     numbers and the last answer;
//   - Run redrives it through retryd (actor "dashboard"), and Run past
//     REDRIVE_LIMIT shows retryd's refusal on the page;
//   - Delete on a delayed request cancels it for good (the sweeper does not
//     bring it back).
func TestDashboardInABrowser(t *testing.T) {
	const key = "dash-key"
	s := startStack(t, 1, "API_KEYS="+key, "REDRIVE_LIMIT=1", "SWEEP_INTERVAL=1s")
	authed := func(method, url, body string) answer {
		return call(t, method, url, body, "Authorization", "Bearer "+key)
	}
	dest := newDestination(t)
	url := dest.script("/browser/orders", 500)
	a := authed("POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"method":"POST","maxRetries":0}`, url+"?token=s3cret"))
	if a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	get := func() map[string]any { return authed("GET", s.api+"/requests/"+id, "").body }
	waitFor(t, 10*time.Second, "request failed", func() bool { return get()["status"] == "failed" })

	ctx := browser(t, key)
	host := strings.TrimPrefix(dest.URL, "http://")
	rowXPath := fmt.Sprintf(`//tr[contains(., %q) and contains(., %q) and contains(., %q)]`, id[:10], "failed · 1 attempt · run 1: 1 of 1 allowed · POST "+host+"/browser/orders", "last 500")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=archived"),
		chromedp.WaitVisible(rowXPath),
	); err != nil {
		t.Fatalf("the archived tasks page shows no row with the request's method, host and path: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil || strings.Contains(text, "s3cret") {
		t.Errorf("the page shows the URL's secret (or cannot be read: %v)", err)
	}
	screenshot(t, ctx, "dashboard-archived-request")

	// Run: a redrive through retryd; the destination still fails.
	clickRowAction(t, ctx, rowXPath, "Run")
	var doc map[string]any
	waitFor(t, 15*time.Second, "the redrive to fail again", func() bool {
		doc = get()
		r, _ := doc["redrives"].([]any)
		return doc["status"] == "failed" && len(r) == 1 && r[0].(map[string]any)["outcome"] == "failed"
	})
	if r := doc["redrives"].([]any)[0].(map[string]any); r["actor"] != "dashboard" {
		t.Errorf("redrive actor %v, want dashboard", r["actor"])
	}
	// Run again, past REDRIVE_LIMIT=1: the page shows retryd's refusal.
	rowXPath = fmt.Sprintf(`//tr[contains(., %q) and contains(., "2 attempts · run 2: 1 of 1 allowed")]`, id[:10])
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=archived"),
		chromedp.WaitVisible(rowXPath),
	); err != nil {
		t.Fatalf("the failed request after its redrive: %v", err)
	}
	clickRowAction(t, ctx, rowXPath, "Run")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#retryd-error`)); err != nil {
		t.Fatalf("no error shown for a Run past the redrive limit: %v", err)
	}
	alert, err := chromedp.Run(ctx, chromedp.Text(`#retryd-error`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(alert, "limit") {
		t.Errorf("the error shown: %q, want the redrive limit named", alert)
	}
	screenshot(t, ctx, "dashboard-run-past-redrive-limit")
	if n := len(dest.calls("/browser/orders")); n != 2 {
		t.Errorf("destination got %d calls, want 2 (the failure and the one redrive)", n)
	}

	// Delete on a delayed request: canceled through retryd, for good.
	later := authed("POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"delayMs":600000}`, dest.script("/browser/later", 200))).body["id"].(string)
	rowXPath = fmt.Sprintf(`//tr[contains(., %q)]`, later[:10])
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=scheduled"),
		chromedp.WaitVisible(rowXPath),
	); err != nil {
		t.Fatalf("the scheduled tasks page: %v", err)
	}
	screenshot(t, ctx, "dashboard-delayed-request")
	clickRowAction(t, ctx, rowXPath, "Delete")
	waitFor(t, 10*time.Second, "the delayed request canceled", func() bool {
		return authed("GET", s.api+"/requests/"+later, "").body["status"] == "canceled"
	})
	// Actions that would move retryd's tasks behind its back are refused
	// with a message (the page shows it like any refusal).
	for _, path := range []string{"/archived_tasks:run_all", "/scheduled_tasks:delete_all", "/retry_tasks:archive_all"} {
		method := "POST"
		if strings.HasSuffix(path, "delete_all") {
			method = "DELETE"
		}
		if r := authed(method, s.api+"/monitoring/api/queues/retryd"+path, ""); r.status != 409 || !strings.Contains(r.raw, "retryctl") {
			t.Errorf("%s %s: %d %s", method, path, r.status, r.raw)
		}
	}
	// The sweeper (every second here) does not bring it back.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if st := authed("GET", s.api+"/requests/"+later, "").body["status"]; st != "canceled" {
			t.Fatalf("the deleted request came back as %v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// An endpoint an operator opened holds its requests: the headline of
	// every page names it, and the request's row says why it waits.
	if r := authed("POST", s.api+"/endpoints/http:"+host+"/open", ""); r.status != 200 {
		t.Fatalf("open the endpoint: %d %s", r.status, r.raw)
	}
	held := authed("POST", s.api+"/requests", fmt.Sprintf(`{"url":%q}`, dest.script("/browser/held", 200))).body["id"].(string)
	waitFor(t, 10*time.Second, "the request waits for its endpoint", func() bool {
		return authed("GET", s.api+"/requests/"+held, "").body["waitingFor"] == "endpoint_open"
	})
	rowXPath = fmt.Sprintf(`//tr[contains(., %q) and contains(., "waiting for endpoint_open")]`, held[:10])
	banner := fmt.Sprintf(`//*[@id="retryd-requests" and contains(., 'endpoint "http://%s" open, 1 waiting')]`, host)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=scheduled"),
		chromedp.WaitVisible(rowXPath),
		chromedp.WaitVisible(banner),
	); err != nil {
		t.Fatalf("the page names neither the open endpoint nor why its request waits: %v", err)
	}
	screenshot(t, ctx, "dashboard-open-endpoint")
}

// An operator resends and expunges a finished request from the dashboard,
// and finds retryd's schedules where asynqmon's Schedulers page was:
//   - asynqmon's Schedulers address leads to retryd's schedules page,
//     listing the schedule made through the API;
//   - a finished request's page has Resend and Expunge: Resend makes a
//     new request through POST /requests/{id}/resend (actor dashboard,
//     the reason typed, linked both ways, delivered); Expunge, once
//     confirmed, erases the payload through DELETE /requests/{id}/payload,
//     and the page says so and offers no resend any more;
//   - a payload its tenant's payload retention erased reads "expired".
func TestDashboardResendsAndExpungesInABrowser(t *testing.T) {
	const key = "dash-key"
	r := redistest.StartServer(t, redistest.Options{})
	ctx0, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A one-second payload retention for tenant gdpr (the API refuses
	// less than a minute).
	if err := r.Client().HSet(ctx0, record.RetentionKey, "gdpr", "0 1000").Err(); err != nil {
		t.Fatal(err)
	}
	s := startStackOn(t, r, 1, "API_KEYS="+key+",gdpr:gdpr-key", "SWEEP_INTERVAL=1s")
	authed := func(method, url, body string) answer {
		return call(t, method, url, body, "Authorization", "Bearer "+key, "Content-Type", "application/json")
	}
	dest := newDestination(t)
	sch := authed("POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"0 3 * * *","request":{"url":%q}}`, dest.script("/browser/nightly", 200)))
	if sch.status != 201 {
		t.Fatalf("schedule: %d %s", sch.status, sch.raw)
	}
	a := authed("POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"method":"POST","headers":{"X-Card":"4242"},"body":"card 4242"}`,
		dest.script("/browser/receipt", 200)))
	if a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	get := func(id string) answer { return authed("GET", s.api+"/requests/"+id, "") }
	waitFor(t, 10*time.Second, "request completed", func() bool { return get(id).body["status"] == "completed" })

	ctx := browser(t, key)
	// asynqmon's Schedulers page is retryd's schedules.
	schRow := fmt.Sprintf(`//table[@id="schedules"]//tr[contains(., %q) and contains(., "0 3 * * *") and contains(., "/browser/nightly")]`, sch.body["id"])
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/schedulers"),
		chromedp.WaitVisible(schRow),
	); err != nil {
		t.Fatalf("the Schedulers page does not list retryd's schedule: %v", err)
	}
	screenshot(t, ctx, "dashboard-schedules")

	// Resend, with a reason.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/retryd/requests/"+id),
		chromedp.WaitVisible(`#resend:not([disabled])`),
		chromedp.SendKeys(`#reason`, "partner lost it"),
		chromedp.Click(`#resend`),
		chromedp.WaitVisible(`#message a`),
	); err != nil {
		t.Fatalf("resend from the dashboard: %v", err)
	}
	newID, err := chromedp.Run(ctx, chromedp.Text(`#message a`))
	if err != nil {
		t.Fatal(err)
	}
	orig := get(id)
	if rs, _ := orig.body["resends"].([]any); len(rs) != 1 || rs[0] != newID {
		t.Fatalf("the page says resent as %q; the original lists %v", newID, orig.body["resends"])
	}
	n := get(newID)
	if rf, _ := n.body["resentFrom"].(map[string]any); rf["id"] != id || rf["actor"] != "dashboard" || rf["reason"] != "partner lost it" {
		t.Errorf("the resend's resentFrom: %s", n.raw)
	}
	waitFor(t, 10*time.Second, "the resend delivered", func() bool { return len(dest.calls("/browser/receipt")) == 2 })
	if err := chromedp.Do(ctx, chromedp.WaitVisible(fmt.Sprintf(`//td[@id="resends"]/a[text()=%q]`, newID))); err != nil {
		t.Errorf("the page does not list the resend: %v", err)
	}
	screenshot(t, ctx, "dashboard-request-resent")

	// Expunge: a click, then the confirmation.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#expunge`)),
		chromedp.WaitVisible(chromedp.CSS(`#expunge-confirm`)),
		chromedp.Click(chromedp.CSS(`#expunge-confirm`)),
	); err != nil {
		t.Fatalf("expunge from the dashboard: %v", err)
	}
	pageSays(t, ctx, "payload", "expunged by dashboard")
	if doc := get(id); doc.body["expunged"] != true || doc.body["expungedBy"] != "dashboard" || strings.Contains(doc.raw, "4242") {
		t.Errorf("after the dashboard's expunge: %s", doc.raw)
	}
	screenshot(t, ctx, "dashboard-request-expunged")

	// A payload erased by its retention reads as expired, not as empty.
	g := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"body":"card 4242"}`, dest.script("/browser/gdpr", 200)),
		"Authorization", "Bearer gdpr-key", "Content-Type", "application/json")
	if g.status != 202 {
		t.Fatalf("submit as gdpr: %d %s", g.status, g.raw)
	}
	gid := g.body["id"].(string)
	waitFor(t, 20*time.Second, "the gdpr payload expired", func() bool { return get(gid).body["expungedBy"] == "retention" })
	if err := chromedp.Do(ctx, chromedp.Navigate(s.api+"/monitoring/retryd/requests/"+gid)); err != nil {
		t.Fatal(err)
	}
	pageSays(t, ctx, "payload", "expired: erased by its payload retention")
}

// pageSays waits until the element of id holds want, and that the page
// offers no resend then; else it fails with what the page says.
func pageSays(t *testing.T, ctx context.Context, id, want string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		got, _ = chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`[document.getElementById(%q).textContent,
			document.getElementById("message").textContent, String(document.getElementById("resend").disabled)]`, id)))
		if len(got) == 3 && strings.Contains(got[0], want) && got[2] == "true" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("#%s: the page says %q, want %q and no resend", id, got, want)
}
