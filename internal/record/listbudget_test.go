package record

import (
	"context"
	"strings"
	"testing"
	"time"

	retryids "github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// A page of large requests stops at ListBudget, with a cursor from which
// the next pages give every other request, each once, newest first: 500
// bodies of 256 KiB would otherwise be 128 MB in one call.
func TestListPagesStopAtTheBudget(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	body := strings.Repeat("b", 256<<10)
	start := time.Now().Add(-time.Minute)
	const n, failed = 80, 40 // 20 MiB in all, 10 MiB failed
	var want []string        // newest first
	for i := range n {
		now := start.Add(time.Duration(i) * time.Millisecond)
		r := newRequest(retryids.New(now), now)
		r.Body = body
		if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i < failed {
			bg, _ := s.Begin(ctx, r.ID, now)
			if _, err := s.Finish(ctx, r.ID, Outcome{Attempt: Attempt{N: bg.N, StartedAt: now, Outcome: "permanent"}, Status: Failed,
				Host: r.Host, Tenant: r.Tenant}, now); err != nil {
				t.Fatal(err)
			}
		}
		want = append([]string{r.ID}, want...)
	}
	walk := func(name string, list func(cursor string) (*Page, error), want []string) {
		t.Helper()
		var got []string
		cursor, pages := "", 0
		for {
			page, err := list(cursor)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			size := 0
			for _, r := range page.Requests {
				size += len(r.Body)
				got = append(got, r.ID)
			}
			if size > ListBudget+listChunk*len(body) {
				t.Errorf("%s: a page holds %d MiB of bodies", name, size>>20)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if pages < 2 {
			t.Errorf("%s: %d MiB in one page", name, len(want)*len(body)>>20)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: the pages gave %d requests, want the %d, each once, newest first", name, len(got), len(want))
		}
	}
	walk("List", func(cursor string) (*Page, error) { return s.List(ctx, tenant.All, "", cursor, 500) }, want)
	walk("Find", func(cursor string) (*Page, error) { return s.Find(ctx, tenant.All, Filter{}, cursor, 500, nil) }, want)
	walk("Find by host", func(cursor string) (*Page, error) {
		return s.Find(ctx, tenant.All, Filter{Host: "e.com"}, cursor, 500, nil)
	}, want)
	walk("Find failed", func(cursor string) (*Page, error) {
		return s.Find(ctx, tenant.All, Filter{Statuses: StatusesOf(Failed)}, cursor, 500, nil)
	}, want[n-failed:])
	walk("ListFailed", func(cursor string) (*Page, error) {
		return s.ListFailed(ctx, tenant.All, DLQFilter{}, cursor, 500, nil)
	}, want[n-failed:])
}
