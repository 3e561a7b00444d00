package record

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Listeners registers own (this process's listen addresses, "ip:port")
// until now+ttl, drops the entries of processes that stopped renewing
// theirs, and returns every address still registered, own included. A
// process calls it again well within ttl to stay listed.
func (s *Store) Listeners(ctx context.Context, own []string, now time.Time, ttl time.Duration) ([]string, error) {
	until := float64(now.Add(ttl).UnixMilli())
	members := make([]redis.Z, len(own))
	for i, a := range own {
		members[i] = redis.Z{Score: until, Member: a}
	}
	var all *redis.StringSliceCmd
	// One key, one transaction: safe on a cluster, and no reader sees the
	// set between the removal and the addition.
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, ListenersKey, "-inf", "("+strconv.FormatInt(now.UnixMilli(), 10))
		if len(members) > 0 {
			p.ZAdd(ctx, ListenersKey, members...)
		}
		// Nothing else is kept in it: the set lives as long as someone
		// renews it.
		p.PExpire(ctx, ListenersKey, 2*ttl)
		all = p.ZRange(ctx, ListenersKey, 0, -1)
		return nil
	})
	if err != nil {
		return nil, wrap(err)
	}
	return all.Val(), nil
}

// ForgetListeners removes own from the listeners, when a process stops.
func (s *Store) ForgetListeners(ctx context.Context, own []string) error {
	if len(own) == 0 {
		return nil
	}
	args := make([]any, len(own))
	for i, a := range own {
		args[i] = a
	}
	return wrap(s.rdb.ZRem(ctx, ListenersKey, args...).Err())
}
