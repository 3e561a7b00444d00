package record

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Records that bound what one client can make retryd do: failed
// authentications per client address, unfinished requests per owner (API
// key or client address), schedules, and Redis memory.

// authFailureScript: scripts/auth_failure.lua.
var authFailureScript = script("auth_failure")

// AuthFailure counts one failed authentication from ip in a fixed window
// shared by every API replica. It returns the failures counted in the
// current window and how long the window still runs.
func (s *Store) AuthFailure(ctx context.Context, ip string, window time.Duration) (n int64, left time.Duration, err error) {
	res, err := authFailureScript.Run(ctx, s.rdb, []string{s.first().authFailures(ip)}, window.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, 0, wrap(err)
	}
	if len(res) != 2 {
		return 0, 0, errReply("auth_failure", res)
	}
	return res[0], time.Duration(max(res[1], 0)) * time.Millisecond, nil
}

// ErrOwnerLimit is a submission refused because its owner has too many
// unfinished requests.
var ErrOwnerLimit = errors.New("too many unfinished requests")

// pruneBatch is how many of an owner's oldest entries one prune looks at.
const pruneBatch = 500

// pruneOwner removes the finished or vanished requests of an owner's set,
// oldest first, a batch at a time, and stops at the first batch that
// removed any (or at the end of the set). It reports how many it removed.
// The ids score their submission time; the set's one other member, which
// marks when its time to live was last refreshed (create.lua), scores
// below 0 and is never read here.
func (s *Store) pruneOwner(ctx context.Context, key string) (int, error) {
	for start := int64(0); ; start += pruneBatch {
		ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: key, Start: "0", Stop: "+inf", ByScore: true, Offset: start, Count: pruneBatch}).Result()
		if err != nil || len(ids) == 0 {
			return 0, wrap(err)
		}
		pipe := s.rdb.Pipeline()
		statuses := make([]*redis.StringCmd, len(ids))
		for i, id := range ids {
			statuses[i] = pipe.HGet(ctx, s.k(id).req(id), fStatus)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, wrap(err)
		}
		var done []any
		for i, cmd := range statuses {
			st, err := cmd.Result()
			if errors.Is(err, redis.Nil) || (err == nil && Status(st).Terminal()) {
				done = append(done, ids[i])
			}
		}
		if len(done) > 0 {
			return len(done), wrap(s.rdb.ZRem(ctx, key, done...).Err())
		}
	}
}

// CountSchedules returns how many schedules tenant t has.
func (s *Store) CountSchedules(ctx context.Context, t string) (int64, error) {
	var total int64
	for _, k := range s.each() {
		n, err := s.rdb.ZCard(ctx, k.of(t).schedules()).Result()
		if err != nil {
			return 0, wrap(err)
		}
		total += n
	}
	return total, nil
}

// Memory is Redis's memory use against its maxmemory (0: no limit). On a
// cluster it is the fullest master's.
type Memory struct{ Used, Max int64 }

// Full reports the share of maxmemory in use (0 without a limit).
func (m Memory) Full() float64 {
	if m.Max <= 0 {
		return 0
	}
	return float64(m.Used) / float64(m.Max)
}

// Memory asks Redis for its memory use.
func (s *Store) Memory(ctx context.Context) (Memory, error) {
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		var (
			mu    sync.Mutex
			worst Memory
		)
		// ForEachMaster asks the masters concurrently.
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			m, err := memoryOf(ctx, n)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if m.Full() > worst.Full() {
				worst = m
			}
			return nil
		})
		return worst, wrap(err)
	}
	m, err := memoryOf(ctx, s.rdb)
	return m, wrap(err)
}

func memoryOf(ctx context.Context, c redis.Cmdable) (Memory, error) {
	info, err := c.Info(ctx, "memory").Result()
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// A Redis that has no memory section (the embedded one of -dev)
		// has no maxmemory to respect either.
		return Memory{}, nil
	}
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(info, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_memory":
			m.Used, _ = strconv.ParseInt(val, 10, 64)
		case "maxmemory":
			m.Max, _ = strconv.ParseInt(val, 10, 64)
		}
	}
	return m, nil
}
