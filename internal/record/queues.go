package record

import (
	"context"
	"errors"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// Queues' names are listed per tenant here (their settings and lines live
// with flow control): QStash's queue list, and what the per-tenant queue
// limit counts.

// ErrQueueLimit: the tenant has its limit of queues; nothing was listed.
var ErrQueueLimit = errors.New("queue limit reached")

// addQueueNameScript: scripts/add_queue_name.lua.
var addQueueNameScript = script("add_queue_name")

// AddQueueName lists queue name of tenant t, unless t has limit queues
// already (ErrQueueLimit; limit 0: no limit). A name listed already is
// fine at any count.
func (s *Store) AddQueueName(ctx context.Context, t, name string, limit int) error {
	if err := s.register(ctx, t); err != nil {
		return err
	}
	res, err := addQueueNameScript.Run(ctx, s.rdb, []string{s.first().of(t).queues()}, name, limit).Result()
	if err != nil {
		return wrap(err)
	}
	switch res {
	case int64(1):
		return nil
	case int64(0):
		return ErrQueueLimit
	}
	return errReply("add_queue_name", res)
}

// RemoveQueueName unlists queue name of tenant t.
func (s *Store) RemoveQueueName(ctx context.Context, t, name string) error {
	return wrap(s.rdb.ZRem(ctx, s.first().of(t).queues(), name).Err())
}

// QueueRef names one queue of one tenant.
type QueueRef struct {
	Tenant, Name string
}

// QueuePage lists up to n queues of scope's tenants, in order of tenant
// then name, from just after after (the zero QueueRef: from the start);
// more says others follow. One page costs one read per tenant it spans,
// whatever the number of queues.
func (s *Store) QueuePage(ctx context.Context, scope tenant.Scope, after QueueRef, n int) (page []QueueRef, more bool, err error) {
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil {
		return nil, false, err
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		if t < after.Tenant {
			continue
		}
		from := "-"
		if t == after.Tenant && after.Name != "" {
			from = "(" + after.Name
		}
		names, err := s.rdb.ZRangeByLex(ctx, s.first().of(t).queues(), &redis.ZRangeBy{Min: from, Max: "+", Count: int64(n + 1 - len(page))}).Result()
		if err != nil {
			return nil, false, wrap(err)
		}
		for _, name := range names {
			page = append(page, QueueRef{Tenant: t, Name: name})
		}
		if len(page) > n {
			return page[:n], true, nil
		}
	}
	return page, false, nil
}
