package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
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

// An operator opens the dashboard (behind the API key), goes to the
// archived tasks of retryd's queue, sees the failed request, and runs it
// again: the request completes and shows a "dashboard" redrive.
func TestDashboardRunInABrowser(t *testing.T) {
	const key = "dash-key"
	s := startStack(t, 1, "API_KEYS="+key)
	dest := newDestination(t)
	path := "/browser"
	url := dest.script(path, 500)
	a := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q,"maxRetries":0}`, url), "Authorization", "Bearer "+key)
	if a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	get := func() map[string]any {
		return call(t, "GET", s.api+"/requests/"+id, "", "Authorization", "Bearer "+key).body
	}
	waitFor(t, 10*time.Second, "request failed", func() bool { return get()["status"] == "failed" })
	dest.script(path, 200)

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
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	rowXPath := fmt.Sprintf(`//tr[contains(., %q)]`, id[:10])
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The dashboard sits behind the API key like every other route.
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + key}}); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.api+"/monitoring/queues/retryd?status=archived"),
		chromedp.WaitVisible(rowXPath),
	)
	if err != nil {
		t.Fatalf("open the archived tasks page: %v", err)
	}
	screenshot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 gives a PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "archived-tasks.png")
	if dir := os.Getenv("E2E_ARTIFACT_DIR"); dir != "" {
		shot = filepath.Join(dir, "archived-tasks.png")
	}
	if err := os.WriteFile(shot, screenshot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the archived tasks page: %s", shot)

	// The row's actions appear when the pointer is over its action cell.
	box, err := chromedp.Run(ctx,
		chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
			const row = document.evaluate(%q, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
			const r = row.lastElementChild.getBoundingClientRect();
			return [r.x + r.width / 2, r.y + r.height / 2];
		})()`, rowXPath)))
	if err != nil || len(box) != 2 {
		t.Fatalf("locate the action cell: %v %v", err, box)
	}
	run := rowXPath + `//button[@title="Run" or @aria-label="Run"]`
	err = chromedp.Do(ctx,
		chromedp.MouseEvent(chromedp.MouseMoved, box[0], box[1]),
		chromedp.WaitVisible(run),
		chromedp.Click(run),
	)
	if err != nil {
		t.Fatalf("click Run: %v", err)
	}

	var doc map[string]any
	waitFor(t, 15*time.Second, "completed with a dashboard redrive", func() bool {
		doc = get()
		r, _ := doc["redrives"].([]any)
		return doc["status"] == "completed" && len(r) == 1 && r[0].(map[string]any)["outcome"] == "completed"
	})
	if r := doc["redrives"].([]any)[0].(map[string]any); r["actor"] != "dashboard" {
		t.Errorf("redrive actor %v, want dashboard", r["actor"])
	}
	if n := len(dest.calls(path)); n != 2 {
		t.Errorf("destination got %d calls, want 2 (the failure, then the run from the dashboard)", n)
	}
}
