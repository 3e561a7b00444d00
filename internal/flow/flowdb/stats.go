package flowdb

// What each worker publishes of its keys and endpoints (a hash per
// worker, living a few seconds), and the list of the live workers.

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

// StatsIO writes and reads what the workers publish.
type StatsIO struct{ rdb redis.UniversalClient }

// PublishKeys replaces worker's published keys with fields (key, JSON,
// ...), living stale, and marks the worker live at now, forgetting the
// workers not live since stale ago: one transaction.
func (s StatsIO) PublishKeys(ctx context.Context, worker string, fields []any, now time.Time, stale time.Duration) error {
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, keys.FlowWorker(worker))
	if len(fields) > 0 {
		pipe.HSet(ctx, keys.FlowWorker(worker), fields...)
	}
	pipe.PExpire(ctx, keys.FlowWorker(worker), stale)
	pipe.ZAdd(ctx, keys.FlowWorkers, redis.Z{Score: float64(now.UnixMilli()), Member: worker})
	pipe.ZRemRangeByScore(ctx, keys.FlowWorkers, "-inf", strconv.FormatInt(now.Add(-stale).UnixMilli(), 10))
	_, err := pipe.Exec(ctx)
	return err
}

// PublishEndpoints replaces worker's published endpoints with fields
// (name, JSON, ...), living stale: one transaction.
func (s StatsIO) PublishEndpoints(ctx context.Context, worker string, fields []any, stale time.Duration) error {
	key := keys.FlowWorkerEndpoints(worker)
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, key)
	if len(fields) > 0 {
		pipe.HSet(ctx, key, fields...)
		pipe.PExpire(ctx, key, stale)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// LiveWorkers are the workers that published since since.
func (s StatsIO) LiveWorkers(ctx context.Context, since time.Time) ([]string, error) {
	return s.rdb.ZRangeByScore(ctx, keys.FlowWorkers, &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
}

// WorkerKeys are the keys worker published (key: JSON).
func (s StatsIO) WorkerKeys(ctx context.Context, worker string) (map[string]string, error) {
	return s.rdb.HGetAll(ctx, keys.FlowWorker(worker)).Result()
}

// WorkerEndpoints are the endpoints worker published (name: JSON).
func (s StatsIO) WorkerEndpoints(ctx context.Context, worker string) (map[string]string, error) {
	return s.rdb.HGetAll(ctx, keys.FlowWorkerEndpoints(worker)).Result()
}
