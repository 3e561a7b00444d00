package record

import (
	"context"
	"fmt"
	"strconv"

	"github.com/retryd/retryd/internal/tenant"
)

// The stats hash of each partition (keys.stats) holds counters, bumped by
// the scripts that record the counted events (no extra round trip); their
// sum over partitions is read by the API's /metrics, so every API replica
// reports what all workers did.
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
