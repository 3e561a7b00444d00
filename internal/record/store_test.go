package record

import (
	"context"
	"testing"
	"time"

	retryids "github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
)

func newRequest(id string, now time.Time) *Request {
	return &Request{ID: id, URL: "https://e.com", Host: "e.com", Method: "GET", Headers: map[string]string{},
		MaxRetries: 1, BackoffMs: 100, MaxBackoffMs: 1000, TimeoutMs: 1000, Status: Pending, CreatedAt: now, NextAttemptAt: now}
}

func TestFinishCountsClusterStats(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	now := time.Now()
	id := "01m8mhyychtfy2pdj6g7"
	if _, err := s.Create(ctx, newRequest(id, now), "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Begin(ctx, id, now)
	if err != nil || b.State != Started {
		t.Fatalf("begin: %+v %v", b, err)
	}
	dur := int64(7)
	res, err := s.Finish(ctx, id, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, DurationMs: &dur, Outcome: "success"},
		Status: Completed, Lateness: 3 * time.Millisecond}, now)
	if err != nil || res != Recorded {
		t.Fatalf("finish: %v %v", res, err)
	}
	// The first finish of a quiet second adds its counts at once.
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st["att|success|"] != 1 || st["dur_sum_ms"] != 7 || st["late_sum_ms"] != 3 || st["dur|1"] != 1 || st["late|2"] != 1 {
		t.Errorf("stats %v", st)
	}
	// A finish within a second of the last addition waits for the next
	// one (the last addition is moved ahead, so that a slow machine cannot
	// make the second pass).
	s.counts.mu.Lock()
	s.counts.added = time.Now().Add(time.Hour)
	s.counts.mu.Unlock()
	id2 := "01m8mhyychtfy2pdj6g8"
	if _, err := s.Create(ctx, newRequest(id2, now), "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err = s.Begin(ctx, id2, now); err != nil || b.State != Started {
		t.Fatalf("begin: %+v %v", b, err)
	}
	if _, err := s.Finish(ctx, id2, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, DurationMs: &dur, Outcome: "success"},
		Status: Completed}, now); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx); err != nil || st["att|success|"] != 1 {
		t.Errorf("stats within the second: %v %v, want 1 success still", st, err)
	}
	if err := s.FlushCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx); err != nil || st["att|success|"] != 2 || st["dur_sum_ms"] != 14 {
		t.Errorf("stats once added: %v %v, want 2 successes, 14 ms", st, err)
	}
}

func TestTrimIndexesDropsExpiredRecordsOnly(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := NewStore(rdb, time.Hour)
	ctx := context.Background()
	now := time.Now()
	var ids []string
	for i := 0; i < 4; i++ {
		id := "01m8mhyychtfy2pdj6g" + string(rune('a'+i))
		ids = append(ids, id)
		if _, err := s.Create(ctx, newRequest(id, now), "", nil, CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A record made within the retention cannot have expired by it: not
	// a candidate (were it gone, a list would drop its entries).
	young := retryids.New(now)
	if _, err := s.Create(ctx, newRequest(young, now), "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two records expired after their retention; their index entries stay.
	rdb.Del(ctx, k0.req(ids[0]), k0.req(ids[2]), k0.req(young))
	n, err := s.TrimIndexes(ctx, now, 100)
	if err != nil || n != 2 {
		t.Fatalf("TrimIndexes removed %d, %v; want 2", n, err)
	}
	left, _ := rdb.ZRange(ctx, d0.all(), 0, -1).Result()
	if len(left) != 3 || left[0] != ids[1] || left[1] != ids[3] || left[2] != young {
		t.Errorf("all-index after trim: %v", left)
	}
}

// With one partition the script that stores a request rings the workers'
// doorbell (in the record's slot) when asked to; with several it cannot,
// and says so, so the enqueue rings instead.
func TestCreateRingsTheDoorbellWithOnePartition(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	now := time.Now()
	one := NewStore(rdb, time.Hour)
	if !one.RingsOnCreate() {
		t.Fatal("one partition: RingsOnCreate false")
	}
	if _, err := one.Create(ctx, newRequest("01m8mhyychtfy2pdj6g7", now), "", nil, CreateOptions{Ring: true}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.LLen(ctx, BellKey("retryd")).Val(); n != 1 {
		t.Errorf("doorbell holds %d tokens after a ringing create, want 1", n)
	}
	parts, err := partition.New(4)
	if err != nil {
		t.Fatal(err)
	}
	if NewPartitioned(rdb, time.Hour, parts).RingsOnCreate() {
		t.Error("four partitions: RingsOnCreate true")
	}
}
