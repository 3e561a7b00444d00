package flowdb

// The lines' registry (keys.Lines): the lines that may hold waiters,
// of every kind, so that a worker that never saw one looks after it too.

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

// LineIO lists and unlists lines in the registry.
type LineIO struct{ rdb redis.UniversalClient }

// List lists line name of kind (a keys.Line* kind), with value.
func (l LineIO) List(ctx context.Context, kind, name, value string) error {
	return l.rdb.HSet(ctx, keys.Lines, keys.LineField(kind, name), value).Err()
}

// Unlist drops line name of kind from the registry.
func (l LineIO) Unlist(ctx context.Context, kind, name string) error {
	return l.rdb.HDel(ctx, keys.Lines, keys.LineField(kind, name)).Err()
}

// Read reads the registry (field: keys.LineField, value) and up to two
// tenants about (keys.Tenants), in one round trip.
func (l LineIO) Read(ctx context.Context) (lines map[string]string, tenants []string, err error) {
	pipe := l.rdb.Pipeline()
	linesCmd := pipe.HGetAll(ctx, keys.Lines)
	tenantsCmd := pipe.SRandMemberN(ctx, keys.Tenants, 2)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, err
	}
	return linesCmd.Val(), tenantsCmd.Val(), nil
}
