package record

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Settings records entry under this process's id in SettingsKey and
// returns every process's entry (this one's too), in one round trip.
// Entries lapse as a whole ttl after the last process renewed; a process
// that stopped renewing is dropped by ForgetSettings.
func (s *Store) Settings(ctx context.Context, id, entry string, ttl time.Duration) (map[string]string, error) {
	var all *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, SettingsKey, id, entry)
		p.PExpire(ctx, SettingsKey, ttl)
		all = p.HGetAll(ctx, SettingsKey)
		return nil
	})
	if err != nil {
		return nil, wrap(err)
	}
	return all.Val(), nil
}

// ForgetSettings removes the entries of processes ids.
func (s *Store) ForgetSettings(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return wrap(s.rdb.HDel(ctx, SettingsKey, ids...).Err())
}
