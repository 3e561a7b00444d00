// Package app wires retryd's programs: it turns a Config into Redis
// clients, the record store, the asynq client and server, and the gin
// engine, and runs them until their context ends. cmd/api and cmd/worker
// are thin mains over it, and end-to-end tests reuse it.
package app

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/config"
)

// Network timeouts for every Redis connection retryd opens.
const (
	redisDialTimeout = 3 * time.Second
	redisIOTimeout   = 3 * time.Second
)

// redisConn returns retryd's own Redis client and asynq's connection
// option, both for the same deployment (single node, Sentinel or Cluster).
func redisConn(cfg config.Config) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	switch {
	case len(cfg.RedisClusterAddrs) > 0:
		opt := asynq.RedisClusterClientOpt{
			Addrs: cfg.RedisClusterAddrs, DialTimeout: redisDialTimeout,
			ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cfg.RedisClusterAddrs, DialTimeout: redisDialTimeout,
			ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}), opt, nil
	case len(cfg.RedisSentinelAddrs) > 0:
		opt := asynq.RedisFailoverClientOpt{
			MasterName: cfg.RedisSentinelMaster, SentinelAddrs: cfg.RedisSentinelAddrs,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.RedisSentinelMaster, SentinelAddrs: cfg.RedisSentinelAddrs,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}), opt, nil
	default:
		o, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
		var tlsConf *tls.Config
		if o.TLSConfig != nil {
			tlsConf = o.TLSConfig
		}
		opt := asynq.RedisClientOpt{
			Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: tlsConf,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}
		return redis.NewClient(o), opt, nil
	}
}
