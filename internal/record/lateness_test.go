package record

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// An attempt's lateness is counted from the start it was owed (Due); an
// attempt an event released from a wait (no Due) is counted as an attempt
// with no lateness observed.
func TestFinishObservesLatenessOnlyFromAKnownDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStoreOn(t)
	now := time.Now()
	dur := int64(2)
	for i, due := range []time.Time{{}, now.Add(-40 * time.Millisecond)} {
		id := []string{"01m8mhyychtfy2pdj6g1", "01m8mhyychtfy2pdj6g2"}[i]
		if _, err := s.Create(ctx, newRequest(id, now), "", nil, CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := s.Begin(ctx, id, now)
		if err != nil || b.State != Started {
			t.Fatalf("begin: %+v %v", b, err)
		}
		if _, err := s.Finish(ctx, id, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, DurationMs: &dur, Outcome: "success"},
			Status: Completed, Due: due}, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FlushCounts(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var late int64
	for i := range len(LatenessBuckets) + 1 {
		late += st["late|"+strconv.Itoa(i)]
	}
	if st["att|success|"] != 2 || late != 1 || st["late|5"] != 1 || st["late_sum_ms"] != 40 {
		t.Errorf("stats %v; want 2 attempts, one lateness of 40 ms (bucket 5, ≤ 50 ms)", st)
	}
}
