package record

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/retryd/retryd/internal/tenant"
)

// The stats hash of each partition (keys.stats) holds counters; their sum
// over partitions is read by the API's /metrics, so every API replica
// reports what all workers did. A finished attempt's counters are counted
// in the worker's memory and added to the first partition's hash at most
// once a second: at once by the finish that comes a second or more after
// the last addition (so a quiet stack's metrics move with each attempt),
// and every second by RunCounts for what busier seconds left. Five
// increments an attempt would be a tenth of its Redis commands. A worker
// killed loses at most its last second of counts; one stopped adds them as
// it stops.
//
// Fields: "att|<outcome>|<failureClass>", "dur|<bucket>", "dur_sum_ms",
// "late|<bucket>", "late_sum_ms", "rdr|<source>", "sweep|<kind>",
// "cb|<status>". Buckets index DurationBuckets / LatenessBuckets; the last
// index is +Inf.

// Histogram bucket upper bounds, in seconds.
var (
	DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	LatenessBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

func bucket(bounds []float64, seconds float64) int {
	for i, b := range bounds {
		if seconds <= b {
			return i
		}
	}
	return len(bounds)
}

// Stats returns the cluster-wide counters.
func (s *Store) Stats(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, k := range s.each() {
		h, err := s.rdb.HGetAll(ctx, k.stats()).Result()
		if err != nil {
			return nil, wrap(err)
		}
		for f, v := range h {
			n, _ := strconv.ParseInt(v, 10, 64)
			out[f] += n
		}
	}
	return out, nil
}

// counts are the counters counted in memory since they were last added to
// Redis.
type counts struct {
	mu sync.Mutex
	m  map[string]int64
	// added is when counts were last taken to be added.
	added time.Time
}

// add counts n more of field.
func (c *counts) add(field string, n int64) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]int64{}
	}
	c.m[field] += n
	c.mu.Unlock()
}

// take returns the counts and starts again from none.
func (c *counts) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.m
	c.m, c.added = nil, time.Now()
	return m
}

// due says whether the last addition was a second or more ago.
func (c *counts) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.added) >= time.Second
}

// countAttempt counts a finished attempt: its outcome and class, its
// duration and its lateness (negative: unknown, not observed).
func (s *Store) countAttempt(outcome, class string, dur, late time.Duration) {
	s.counts.add(fmt.Sprintf("att|%s|%s", outcome, class), 1)
	s.counts.add(fmt.Sprintf("dur|%d", bucket(DurationBuckets, dur.Seconds())), 1)
	s.counts.add("dur_sum_ms", dur.Milliseconds())
	if late >= 0 {
		s.counts.add(fmt.Sprintf("late|%d", bucket(LatenessBuckets, late.Seconds())), 1)
		s.counts.add("late_sum_ms", late.Milliseconds())
	}
}

// FlushCounts adds the counts counted in memory to the stats hash, in one
// round trip; what it could not add is kept for the next.
func (s *Store) FlushCounts(ctx context.Context) error {
	m := s.counts.take()
	if len(m) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for f, n := range m {
		if n != 0 {
			pipe.HIncrBy(ctx, s.first().stats(), f, n)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// An increment may have landed before the failure: counted
		// twice rather than lost, the rarer harm for a metric.
		for f, n := range m {
			s.counts.add(f, n)
		}
		return wrap(err)
	}
	return nil
}

// RunCounts adds the counts to Redis every interval until ctx ends, then
// once more (each within a second).
func (s *Store) RunCounts(ctx context.Context, every time.Duration, onErr func(error)) {
	flush := func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := s.FlushCounts(fctx); err != nil && onErr != nil {
			onErr(err)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case <-t.C:
			flush()
		}
	}
}

// Count adds n to a cluster-wide counter (kind "sweep" or "cb" with a
// name); for events that are not recorded by a script already.
func (s *Store) Count(ctx context.Context, kind, name string, n int64) error {
	return wrap(s.rdb.HIncrBy(ctx, s.first().stats(), fmt.Sprintf("%s|%s", kind, name), n).Err())
}

// StatusCount is the number of tenant t's requests indexed under status
// (its DLQ size for Failed).
func (s *Store) StatusCount(ctx context.Context, t string, status Status) (int64, error) {
	var total int64
	for _, k := range s.each() {
		n, err := s.rdb.ZCard(ctx, k.of(t).index(status)).Result()
		if err != nil {
			return 0, wrap(err)
		}
		total += n
	}
	return total, nil
}

// CountByStatus is the number of scope's requests in each status: what
// GET /requests lists, status by status.
func (s *Store) CountByStatus(ctx context.Context, scope tenant.Scope) (map[Status]int64, error) {
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := make(map[Status]int64, len(Statuses))
	for _, st := range Statuses {
		out[st] = 0
		for _, t := range tenants {
			n, err := s.StatusCount(ctx, t, st)
			if err != nil {
				return nil, err
			}
			out[st] += n
		}
	}
	return out, nil
}
