package record

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// Queues' names are listed per tenant here (their settings and lines live
// with flow control): QStash's queue list.

// AddQueueName lists queue name of tenant t.
func (s *Store) AddQueueName(ctx context.Context, t, name string) error {
	if err := s.register(ctx, t); err != nil {
		return err
	}
	return wrap(s.rdb.ZAdd(ctx, s.first().of(t).queues(), redis.Z{Member: name}).Err())
}

// RemoveQueueName unlists queue name of tenant t.
func (s *Store) RemoveQueueName(ctx context.Context, t, name string) error {
	return wrap(s.rdb.ZRem(ctx, s.first().of(t).queues(), name).Err())
}

// QueueNames are the queues of scope's tenants, by tenant.
func (s *Store) QueueNames(ctx context.Context, scope tenant.Scope) (map[string][]string, error) {
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, t := range tenants {
		names, err := s.rdb.ZRange(ctx, s.first().of(t).queues(), 0, -1).Result()
		if err != nil {
			return nil, wrap(err)
		}
		if len(names) > 0 {
			out[t] = names
		}
	}
	return out, nil
}
