package record

import (
	"context"
	"testing"

	"github.com/retryd/retryd/internal/tenant"
)

// The DLQ's list leaves the failed status index to the scripts that
// change a status: an entry it reads while its request is not failed (a
// redrive moved it out, a new failure back in, after the list's read of
// the index) stays, or the request would be in no status index at all.
// The failed-by-host index, which a redrive does not empty, drops such an
// entry when read.
func TestTheDLQListKeepsTheFailedIndexToTheScripts(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	seed(t, rdb, state{k0.req(tid): reqHash(Pending, "host", "e.com"), d0.index(Failed): zset{tid}, d0.failedHost("e.com"): zset{tid}})
	for _, f := range []DLQFilter{{}, {Host: "e.com"}} {
		page, err := s.ListFailed(ctx, tenant.All, f, "", 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Requests) != 0 {
			t.Errorf("DLQ %+v lists %d requests; a pending one is not failed", f, len(page.Requests))
		}
	}
	if rdb.ZScore(ctx, d0.index(Failed), tid).Err() != nil {
		t.Error("the DLQ's list dropped the failed status index's entry of a request that has a record")
	}
	if rdb.ZScore(ctx, d0.failedHost("e.com"), tid).Err() == nil {
		t.Error("the failed-by-host entry of a request not failed is still there after a read")
	}
}
