package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	retryids "github.com/retryd/retryd/internal/ids"
	rediskeys "github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
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
		Status: Completed, Due: now.Add(-3 * time.Millisecond)}, now)
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

// TrimIndexes applies the retention from the finished index: a request
// finished over a retention (and the trim's slack) ago is deleted, every
// key and index entry of it; one whose record is already gone (a TTL an
// earlier version set) loses its entries; one finished within the
// retention, one redriven since (running again) and the unfinished ones
// ahead of them in the list keep everything.
func TestTrimIndexesEndsRequestsPastTheirRetention(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	now := time.Now()
	long := now.Add(-2 * time.Hour) // the store's retention is an hour
	var waiting []string
	for i := 0; i < 3; i++ {
		r := newRequest(retryids.New(long.Add(-time.Hour)), long.Add(-time.Hour))
		if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, r.ID)
	}
	gone := []string{finished(t, s, "", Completed, long), finished(t, s, "", Failed, long)}
	past := []string{finished(t, s, "", Completed, long.Add(time.Millisecond)), finished(t, s, "", Failed, long.Add(time.Millisecond))}
	redriven := finished(t, s, "", Failed, long)
	if _, err := s.Redrive(ctx, redriven, RedriveInput{Scope: tenant.All, Now: now.Add(-time.Minute), Limit: 3, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	young := finished(t, s, "", Completed, now.Add(-30*time.Minute))
	for _, id := range gone {
		expire(rdb, id)
	}
	// A request redriven and finished again: an entry of its first finish
	// left behind is stale, and goes alone.
	again := finished(t, s, "", Completed, now)
	rdb.ZAdd(ctx, d0.finished(), redis.Z{Score: float64(long.UnixMilli()), Member: finishedMember(again, "e.com", "server_error", "503", nil)})

	// Each completed request: its status, host and finished entries; a
	// failed one, its failed-by-host entry too. A batch of 2: the trim
	// goes on over several.
	want := 3 + 4 + 3 + 4 + 1
	if n := trimAll(t, s, now, 2); n != want {
		t.Fatalf("TrimIndexes removed %d entries, want %d", n, want)
	}
	entries := func(id string) (in []string) {
		for _, key := range []string{d0.legacyAll(), d0.index(Pending), d0.index(Completed), d0.index(Failed), d0.host("e.com"), d0.failedHost("e.com")} {
			if rdb.ZScore(ctx, key, id).Err() == nil {
				in = append(in, key[len(d0):])
			}
		}
		members, _ := rdb.ZRange(ctx, d0.finished(), 0, -1).Result()
		for _, m := range members {
			if parseFinishedMember(m).id == id {
				in = append(in, "idx:finished")
			}
		}
		return in
	}
	keysOf := func(id string) []string {
		return []string{k0.req(id), k0.attempts(id), k0.redrives(id), k0.spec(id), k0.result(id)}
	}
	for _, id := range append(append([]string{}, gone...), past...) {
		if got := entries(id); len(got) != 0 {
			t.Errorf("%s, past its retention, still in %v", id, got)
		}
		if n := rdb.Exists(ctx, keysOf(id)...).Val(); n != 0 {
			t.Errorf("%s, past its retention: %d of its keys are left", id, n)
		}
	}
	for _, id := range []string{young, again} {
		if got, want := entries(id), []string{"idx:completed", "idx:host:e.com", "idx:finished"}; !slices.Equal(got, want) {
			t.Errorf("%s: in %v, want %v", id, got, want)
		}
	}
	for _, id := range []string{young, again, redriven} {
		if r, err := s.Get(ctx, id); err != nil {
			t.Errorf("%s, within its retention or running again, is gone: %v", id, err)
		} else if !r.HasResult {
			t.Errorf("%s lost its result", id)
		}
	}
	// Its failed-by-host entry is dropped when the DLQ reads it.
	if got, want := entries(redriven), []string{"idx:pending", "idx:host:e.com", "idx:failed-host:e.com"}; !slices.Equal(got, want) {
		t.Errorf("redriven %s: in %v, want %v", redriven, got, want)
	}
	if n := rdb.Exists(ctx, k0.redrives(redriven)).Val(); n != 1 {
		t.Errorf("redriven %s lost its redrives", redriven)
	}
	for _, id := range waiting {
		if got, want := entries(id), []string{"idx:pending", "idx:host:e.com"}; !slices.Equal(got, want) {
			t.Errorf("unfinished %s: in %v, want %v", id, got, want)
		}
	}
	// Redriven, it finishes again: it goes a retention after that.
	b, err := s.Begin(ctx, redriven, now)
	if err != nil || b.State != Started {
		t.Fatalf("begin: %+v %v", b, err)
	}
	if _, err := s.Finish(ctx, redriven, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, StatusCode: 200, Outcome: "success"},
		Status: Completed, Host: "e.com"}, now); err != nil {
		t.Fatal(err)
	}
	if trimAll(t, s, now.Add(30*time.Minute), 500); !present(t, s, redriven) {
		t.Errorf("redriven %s, finished again, went within its retention", redriven)
	}
	if trimAll(t, s, now.Add(time.Hour+2*time.Minute), 500); present(t, s, redriven) {
		t.Errorf("redriven %s, finished again, outlived its retention", redriven)
	}
}

// present says whether request id's record is there.
func present(t *testing.T, s *Store, id string) bool {
	t.Helper()
	_, err := s.Get(context.Background(), id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// A tenant's retention shortened since its requests finished applies to
// them too: the trim reads the retention as it is now. A cursor an earlier
// version left on the finished index skips nothing.
func TestAShortenedRetentionEndsRequestsAlreadyFinished(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	now := time.Now()
	var older, newer []string
	for i := range 3 {
		older = append(older, finished(t, s, "acme", Completed, now.Add(-30*time.Minute+time.Duration(i)*time.Millisecond)))
		newer = append(newer, finished(t, s, "acme", Completed, now.Add(-5*time.Minute+time.Duration(i)*time.Millisecond)))
	}
	tk := k0.of("acme")
	rdb.HSet(ctx, TrimCursorKey, tk.finished(), strconv.FormatInt(now.UnixMilli(), 10)+" 0 "+
		strconv.FormatInt(now.Add(-time.Minute).UnixMilli(), 10)+" ~")
	if n := trimAll(t, s, now, 2); n != 0 {
		t.Fatalf("within the hour of retention the trim removed %d entries", n)
	}
	if err := s.SetTenantRetention(ctx, "acme", Retention{Records: 10 * time.Minute}, now); err != nil {
		t.Fatal(err)
	}
	if n := trimAll(t, s, now, 2); n != 3*len(older) {
		t.Errorf("the trim removed %d entries, want the 3 of each of the %d requests finished over 11 minutes ago", n, len(older))
	}
	for _, id := range older {
		if present(t, s, id) {
			t.Errorf("%s, finished 30 minutes ago, outlived the retention of 10", id)
		}
	}
	for _, id := range newer {
		if !present(t, s, id) {
			t.Errorf("%s, finished 5 minutes ago, went within the retention of 10", id)
		}
	}
	if rdb.HExists(ctx, TrimCursorKey, tk.finished()).Val() {
		t.Error("the finished walk's cursor of an earlier version is still there")
	}
}

// expire deletes request id's keys, as its retention's end does.
func expire(rdb *redis.Client, id string) {
	rdb.Del(context.Background(), k0.req(id), k0.spec(id), k0.attempts(id), k0.result(id))
}

// trimAll trims as the sweeper does: batch after batch of n while one
// comes back full; it returns how many entries went.
func trimAll(t *testing.T, s *Store, at time.Time, n int) (total int) {
	t.Helper()
	for range 100 {
		removed, more, err := s.TrimIndexes(context.Background(), at, n)
		if err != nil {
			t.Fatal(err)
		}
		total += removed
		if !more {
			return total
		}
	}
	t.Fatal("TrimIndexes says there is more after 100 batches")
	return 0
}

// Requests that finished in the same millisecond all go, however a batch
// divides them, whether their records are still there or already gone.
func TestTrimGoesThroughRequestsOfOneMillisecond(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	at := time.Now().Add(-2 * time.Hour) // the store's retention is an hour
	var same []string
	for range 3 {
		same = append(same, finished(t, s, "", Completed, at))
	}
	slices.Sort(same) // as the finished index orders one score's entries
	for _, id := range same[1:] {
		expire(rdb, id)
	}
	if n := trimAll(t, s, time.Now(), 2); n != 3*len(same) {
		t.Errorf("the trim removed %d entries, want the 3 of each of %d requests", n, len(same))
	}
	for _, id := range same {
		if rdb.ZScore(ctx, d0.index(Completed), id).Err() == nil || present(t, s, id) {
			t.Errorf("%s is still there", id)
		}
	}
}

// A request finished by an earlier version has no finished entry, and an
// entry in that version's all-requests index: once its record has
// expired, the walk through that index and the status indexes drops its
// entries there.
func TestTrimDropsEntriesOfRequestsWithNoFinishedEntry(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	id := finished(t, s, "", Failed, time.Now().Add(-2*time.Hour))
	rdb.Del(ctx, d0.finished())
	rdb.ZAdd(ctx, d0.legacyAll(), redis.Z{Member: id})
	expire(rdb, id)
	if n := trimAll(t, s, time.Now(), 500); n != 2 {
		t.Errorf("the trim removed %d entries, want its all-requests and failed entries", n)
	}
	for _, key := range []string{d0.legacyAll(), d0.index(Failed)} {
		if rdb.ZScore(ctx, key, id).Err() == nil {
			t.Errorf("%s still holds %s", key, id)
		}
	}
}

// A deployment upgraded from a version that entered every request in an
// all-requests index keeps that index, which nothing writes or lists any
// more: the trim that ends its requests drains it, while the walk through
// it waits for its next start.
func TestTrimDrainsTheAllIndexOfEarlierVersions(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t) // retention: an hour
	ctx := context.Background()
	now := time.Now()
	var old []string
	for range 5 {
		old = append(old, finished(t, s, "", Completed, now.Add(-30*time.Minute)))
	}
	waiting := newRequest(retryids.New(now.Add(-time.Hour)), now.Add(-time.Hour))
	if _, err := s.Create(ctx, waiting, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(old, waiting.ID) {
		rdb.ZAdd(ctx, d0.legacyAll(), redis.Z{Member: id})
	}
	if n := trimAll(t, s, now, 2); n != 0 {
		t.Fatalf("within the retention the trim removed %d entries", n)
	}
	// Each request's legacy, status, host and finished entries.
	if n := trimAll(t, s, now.Add(40*time.Minute), 2); n != 4*len(old) {
		t.Errorf("the trim removed %d entries, want the 4 of each of %d requests", n, len(old))
	}
	if got := rdb.ZRange(ctx, d0.legacyAll(), 0, -1).Val(); !slices.Equal(got, []string{waiting.ID}) {
		t.Errorf("the legacy all-requests index holds %v, want only the unfinished %s", got, waiting.ID)
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
	if n := rdb.LLen(ctx, rediskeys.Bell("retryd")).Val(); n != 1 {
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

// Create writes a request's task with it when given one (HSET, then LPUSH
// of the id, after the ring's check), and only when it stores the request:
// not for a replay, not for a full owner, never while submissions wait
// for replicas (the task must wait for the WAIT).
func TestCreateWritesTheTaskWithTheRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	now := time.Now()
	s := NewStore(rdb, time.Hour)
	task := func(id string) *Task {
		return &Task{Key: "{retryd}:test-task:" + id, List: "{retryd}:test-pending", Fields: []any{"msg", "m-" + id, "state", "pending"}}
	}
	id := "01m8mhyychtfy2pdj6g7"
	if !s.EnqueuesOnCreate() {
		t.Fatal("no replicas: EnqueuesOnCreate false")
	}
	if _, err := s.Create(ctx, newRequest(id, now), "k1", []byte("b"), CreateOptions{Task: task(id), Ring: true}); err != nil {
		t.Fatal(err)
	}
	if h := rdb.HGetAll(ctx, task(id).Key).Val(); h["msg"] != "m-"+id || h["state"] != "pending" || len(h) != 2 {
		t.Errorf("task hash %v", h)
	}
	if got := rdb.LRange(ctx, task(id).List, 0, -1).Val(); len(got) != 1 || got[0] != id {
		t.Errorf("pending list %v, want [%s]", got, id)
	}
	if r, err := s.Get(ctx, id); err != nil || r.Status != Pending {
		t.Fatalf("record %+v, %v", r, err)
	}

	// A replay of the key stores nothing, its task neither.
	id2 := "01m8mhyychtfy2pdj6g8"
	if rep, err := s.Create(ctx, newRequest(id2, now), "k1", []byte("b"), CreateOptions{Task: task(id2)}); err != nil || rep == nil {
		t.Fatalf("replay: %+v, %v", rep, err)
	}
	// A full owner stores nothing either.
	owner := Owner{ID: "o", Limit: 1}
	id3, id4 := "01m8mhyychtfy2pdj6g9", "01m8mhyychtfy2pdj6ga"
	if _, err := s.Create(ctx, newRequest(id3, now), "", nil, CreateOptions{Owner: owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, newRequest(id4, now), "", nil, CreateOptions{Owner: owner, Task: task(id4)}); !errors.Is(err, ErrOwnerLimit) {
		t.Fatalf("full owner: %v, want ErrOwnerLimit", err)
	}
	for _, id := range []string{id2, id4} {
		if n := rdb.Exists(ctx, task(id).Key).Val(); n != 0 {
			t.Errorf("task of %s written", id)
		}
	}
	if n := rdb.LLen(ctx, task(id).List).Val(); n != 1 {
		t.Errorf("pending list holds %d ids, want 1", n)
	}

	s.RequireReplicas(1, time.Millisecond)
	if s.EnqueuesOnCreate() {
		t.Fatal("with replicas: EnqueuesOnCreate true")
	}
	id5 := "01m8mhyychtfy2pdj6gb"
	if _, err := s.Create(ctx, newRequest(id5, now), "", nil, CreateOptions{Task: task(id5)}); err == nil {
		t.Fatal("a task given to a store that waits for replicas: no error")
	}
	if n := rdb.Exists(ctx, task(id5).Key, s.k(id5).req(id5)).Val(); n != 0 {
		t.Errorf("refused create wrote %d keys", n)
	}
}

// On a Redis Cluster with several partitions, the creates, begins and
// finishes of concurrent requests of every partition are batched without
// a batch (nor a transaction) spanning two slots.
func TestConcurrentRequestsOfEveryPartitionOnRedisCluster(t *testing.T) {
	t.Parallel()
	s, parts := clusterStore(t, 3, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRequest(parts.NewIDIn(now, i%parts.Len()), now)
			if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
				errs <- fmt.Errorf("create %s: %w", r.ID, err)
				return
			}
			b, err := s.Begin(ctx, r.ID, now)
			if err != nil || b.State != Started {
				errs <- fmt.Errorf("begin %s: %+v, %w", r.ID, b, err)
				return
			}
			dur := int64(1)
			res, err := s.Finish(ctx, r.ID, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, DurationMs: &dur, Outcome: "success"},
				Status: Completed}, now)
			if err != nil || res != Recorded {
				errs <- fmt.Errorf("finish %s: %v, %w", r.ID, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// clusterStore is a store of parts partitions on a Redis Cluster of n
// masters.
func clusterStore(t *testing.T, n, parts int) (*Store, partition.Set) {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t, n)})
	t.Cleanup(func() { _ = rdb.Close() })
	set, err := partition.New(parts)
	if err != nil {
		t.Fatal(err)
	}
	return NewPartitioned(rdb, time.Hour, set), set
}
