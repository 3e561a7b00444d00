// Package app wires retryd's programs: it turns a Config into Redis
// clients, the record store, the asynq client and server, and the gin
// engine, and runs them until their context ends. cmd/api and cmd/worker
// are thin mains over it, and end-to-end tests reuse it.
package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/config"
)

// Network timeouts for every Redis connection retryd opens.
const (
	redisDialTimeout = 3 * time.Second
	redisIOTimeout   = 3 * time.Second
	// redisCheckTimeout bounds the start's check of the credentials.
	redisCheckTimeout = 10 * time.Second
)

// redisProtocol is RESP2. retryd caches nothing client-side and its
// pub/sub works on RESP2, so RESP3's push notifications buy it nothing,
// while go-redis peeks at every RESP3 reply for one: about 7 % of each
// process's CPU.
const redisProtocol = 2

// redisConn returns retryd's own Redis client and asynq's connection
// option, both for the same deployment (single node, Sentinel or Cluster).
func redisConn(cfg config.Config) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	tlsConf, err := redisTLS(cfg)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case len(cfg.RedisClusterAddrs) > 0:
		opt := asynq.RedisClusterClientOpt{
			Addrs: cfg.RedisClusterAddrs, Username: cfg.RedisUsername, Password: cfg.RedisPassword, TLSConfig: tlsConf,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cfg.RedisClusterAddrs, Username: cfg.RedisUsername, Password: cfg.RedisPassword, TLSConfig: tlsConf,
			Protocol:    redisProtocol,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}), opt, nil
	case len(cfg.RedisSentinelAddrs) > 0:
		opt := asynq.RedisFailoverClientOpt{
			MasterName: cfg.RedisSentinelMaster, SentinelAddrs: cfg.RedisSentinelAddrs, SentinelPassword: cfg.RedisSentinelPassword,
			Username: cfg.RedisUsername, Password: cfg.RedisPassword, TLSConfig: tlsConf,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.RedisSentinelMaster, SentinelAddrs: cfg.RedisSentinelAddrs, SentinelPassword: cfg.RedisSentinelPassword,
			Username: cfg.RedisUsername, Password: cfg.RedisPassword, TLSConfig: tlsConf,
			Protocol:    redisProtocol,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}), opt, nil
	default:
		o, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
		o.Protocol = redisProtocol
		if o.TLSConfig != nil && tlsConf != nil {
			o.TLSConfig.RootCAs = tlsConf.RootCAs // a private CA for rediss://
		}
		opt := asynq.RedisClientOpt{
			Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		}
		return redis.NewClient(o), opt, nil
	}
}

// redisTLS is the TLS configuration of REDIS_TLS and REDIS_TLS_CA_FILE
// (nil: no TLS, or a rediss:// URL with the system roots).
func redisTLS(cfg config.Config) (*tls.Config, error) {
	if !cfg.RedisTLS && cfg.RedisTLSCAFile == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.RedisTLSCAFile != "" {
		pem, err := os.ReadFile(cfg.RedisTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CA_FILE: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("REDIS_TLS_CA_FILE: %s holds no PEM certificate", cfg.RedisTLSCAFile)
		}
	}
	return conf, nil
}

// ErrRedisRefused is a start refused because Redis refused retryd's
// credentials or certificate: waiting would not help.
var ErrRedisRefused = errors.New("redis refused the connection")

// checkRedis pings Redis once at the start. Wrong credentials or an
// untrusted certificate fail the start with what to fix; Redis merely
// unreachable only warns, since it may be starting too and every call
// retries.
// warnDefaultRedis says which Redis a configuration that names none uses:
// whatever listens on this machine's 6379 holds retryd's records then.
func warnDefaultRedis(cfg config.Config, log *slog.Logger) {
	if cfg.RedisDefaulted() {
		log.Warn("REDIS_URL is not set: using the Redis at "+config.DefaultRedisURL+" (set REDIS_URL, or run with -dev for an embedded one)",
			"redisUrl", config.DefaultRedisURL)
	}
}

func checkRedis(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	err := rdb.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	if why := refusal(err); why != "" {
		return fmt.Errorf("%w: %s: %w", ErrRedisRefused, why, err)
	}
	log.Warn("redis does not answer yet; retryd starts and keeps trying", "err", err)
	return nil
}

// refusal says what to fix when err is Redis refusing retryd for good.
func refusal(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"), strings.Contains(msg, "invalid password"),
		strings.Contains(msg, "invalid username-password"):
		return "wrong or missing credentials (REDIS_USERNAME and REDIS_PASSWORD, or the user:password of REDIS_URL)"
	case strings.HasPrefix(msg, "NOPERM"):
		return "the Redis user lacks a permission retryd needs (its ACL must allow all commands and keys: +@all ~*)"
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &verify):
		return "Redis' TLS certificate is not trusted (REDIS_TLS_CA_FILE names the CA that signed it)"
	case errors.As(err, &header):
		// Seldom seen: a plain Redis mostly lets the handshake time out.
		return "Redis does not speak TLS on that port (unset REDIS_TLS, or use redis:// instead of rediss://)"
	}
	return ""
}
