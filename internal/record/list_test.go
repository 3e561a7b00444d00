package record

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// A list of every request (no status, no filter) reads the union of the
// status indexes: each request shows once, newest first, whatever its
// status (a redriven one included), and the cursor goes on across pages;
// on a Redis Cluster each partition's indexes are read in a transaction
// of their own slot.
func TestListOfEveryRequestShowsEachOnceNewestFirst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		store func(t *testing.T) (*Store, partition.Set)
	}{
		{"one partition", func(t *testing.T) (*Store, partition.Set) {
			parts, _ := partition.New(1)
			return NewPartitioned(redistest.Start(t).Client(), time.Hour, parts), parts
		}},
		{"three partitions", func(t *testing.T) (*Store, partition.Set) {
			parts, _ := partition.New(3)
			return NewPartitioned(redistest.Start(t).Client(), time.Hour, parts), parts
		}},
		{"a cluster of four partitions", func(t *testing.T) (*Store, partition.Set) { return clusterStore(t, 3, 4) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, parts := c.store(t)
			x := &findFixture{t: t, s: s, parts: parts, ctx: context.Background(), base: time.Now().Add(-30 * time.Minute).Truncate(time.Millisecond)}
			want := map[string]Status{}
			var ids []string
			for i := range 18 {
				now := x.at(i)
				r := newRequest(parts.NewIDIn(now, i%parts.Len()), now)
				if _, err := s.Create(x.ctx, r, "", nil, CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				st := Statuses[i%len(Statuses)]
				switch st {
				case Retrying:
					x.try(r, now.Add(time.Second), retry503)
				case Completed:
					x.try(r, now.Add(time.Second), ok200)
				case Failed:
					x.try(r, now.Add(time.Second), fail503)
					if i%2 == 1 {
						// Back to pending, the way no forward move goes.
						if _, err := s.Redrive(x.ctx, r.ID, RedriveInput{Scope: tenant.All, Now: now.Add(2 * time.Second), Limit: 3, Actor: "ops"}); err != nil {
							t.Fatal(err)
						}
						st = Pending
					}
				case Canceled:
					if _, err := s.Cancel(x.ctx, tenant.All, r.ID, "test", now); err != nil {
						t.Fatal(err)
					}
				}
				want[r.ID] = st
				ids = append(ids, r.ID)
			}
			var listed []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("more than 10 pages")
				}
				page, err := s.List(x.ctx, tenant.All, "", cursor, 4)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Requests) > 4 {
					t.Fatalf("a page of %d, limit 4", len(page.Requests))
				}
				for _, r := range page.Requests {
					listed = append(listed, r.ID)
					if r.Status != want[r.ID] {
						t.Errorf("%s listed %s, want %s", r.ID, r.Status, want[r.ID])
					}
				}
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if got := newestFirst(ids...); !slices.Equal(listed, got) {
				t.Errorf("List gave\n%v\nwant each once, newest first:\n%v", listed, got)
			}
			if found := x.find(tenant.All, Filter{}, 4); !slices.Equal(found, listed) {
				t.Errorf("Find with no filter gave\n%v\nList\n%v", found, listed)
			}
		})
	}
}
