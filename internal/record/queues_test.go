package record

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// A tenant lists at most its limit of queues; a name it has already is
// fine at the limit; another tenant's count is its own.
func TestQueueNamesStopAtTheLimit(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	for _, c := range []struct {
		tenant, name string
		want         error
	}{
		{"acme", "q1", nil},
		{"acme", "q2", nil},
		{"acme", "q3", ErrQueueLimit},
		{"acme", "q1", nil}, // listed already
		{"beta", "q3", nil},
	} {
		if err := s.AddQueueName(ctx, c.tenant, c.name, 2); !errors.Is(err, c.want) {
			t.Errorf("%s/%s at a limit of 2: %v, want %v", c.tenant, c.name, err, c.want)
		}
	}
	if err := s.AddQueueName(ctx, "acme", "q3", 0); err != nil {
		t.Errorf("limit 0 is no limit: %v", err)
	}
	page, more, err := s.QueuePage(ctx, tenant.Only("acme"), QueueRef{}, 10)
	want := []QueueRef{{"acme", "q1"}, {"acme", "q2"}, {"acme", "q3"}}
	if err != nil || more || !cmp.Equal(want, page) {
		t.Errorf("acme's queues: %v more=%v %v (-want +got)\n%s", page, more, err, cmp.Diff(want, page))
	}
}

// Pages of queues follow each other, across tenants, without a gap or a
// repeat, and a tenant's pages hold its own queues only.
func TestQueuePagesCoverEveryQueueOnce(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	var want []QueueRef
	for _, tn := range []string{"acme", "beta", "default"} {
		for i := range 5 {
			name := fmt.Sprintf("q%02d", i)
			if err := s.AddQueueName(ctx, tn, name, 0); err != nil {
				t.Fatal(err)
			}
			want = append(want, QueueRef{tn, name})
		}
	}
	var got []QueueRef
	after := QueueRef{}
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("no end after %d pages: %v", pages, got)
		}
		page, more, err := s.QueuePage(ctx, tenant.All, after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 4 {
			t.Fatalf("a page of 4 holds %d", len(page))
		}
		got = append(got, page...)
		if !more {
			break
		}
		after = page[len(page)-1]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages of every tenant's queues (-want +got)\n%s", diff)
	}
	page, _, err := s.QueuePage(ctx, tenant.Only("beta"), QueueRef{}, 100)
	if err != nil || len(page) != 5 || page[0].Tenant != "beta" || page[4].Tenant != "beta" {
		t.Errorf("beta's page: %v %v", page, err)
	}
}
