// Package config turns retryd's environment variables into one typed,
// validated Config. Programs read the environment once, here, and pass the
// result down; nothing else looks at os.Getenv.
package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retryd/retryd/internal/credentials"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/sign"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/internal/timerslack"
)

// Config is the effective configuration of an API or worker process.
type Config struct {
	RedisURL            string
	RedisSentinelAddrs  []string
	RedisSentinelMaster string
	RedisClusterAddrs   []string
	// RedisUsername and RedisPassword authenticate to Cluster nodes and
	// to a Sentinel deployment's master and replicas (REDIS_USERNAME,
	// REDIS_PASSWORD); RedisSentinelPassword to the sentinels themselves.
	// A single node takes them in REDIS_URL.
	RedisUsername         string
	RedisPassword         string
	RedisSentinelPassword string
	// RedisTLS (REDIS_TLS) speaks TLS to Cluster and Sentinel nodes, with
	// the system roots or RedisTLSCAFile (REDIS_TLS_CA_FILE, PEM), which
	// also serves a rediss:// REDIS_URL.
	RedisTLS          bool
	RedisTLSCAFile    string
	Port              int
	WorkerConcurrency int
	// APIKeys (API_KEYS) are the keys and their tenants; AdminKeys
	// (ADMIN_KEYS) see and act on every tenant. While AdminKeys is empty,
	// the default tenant's keys are the admins.
	APIKeys             []APIKey
	AdminKeys           []string
	AllowPrivateTargets bool
	AllowedCIDRs        []netip.Prefix
	RedriveLimit        int
	Retention           time.Duration
	// PayloadRetention (PAYLOAD_RETENTION) erases a finished request's
	// body, headers and response bodies this long after it finished,
	// before its record expires; 0: they live as long as the record.
	PayloadRetention      time.Duration
	RateLimitRPS          int
	LogLevel              string
	MetricsAddr           string
	CallbackSigningSecret string
	// SigningSecrets are Standard Webhooks secrets (SIGNING_SECRETS,
	// "whsec_<base64>", newest first); every delivery and callback is
	// signed with each.
	SigningSecrets []string
	// SecretsKeys seal the tenants' credentials and signing secrets at
	// rest (SECRETS_KEYS: comma-separated base64 32-byte keys, the first
	// sealing, every one opening); nil without it, when nothing can be
	// stored or opened.
	SecretsKeys *credentials.Keyring
	// EgressProxy is the CONNECT proxy every delivery leaves through
	// (EGRESS_PROXY; nil: none) unless a proxy credential applies.
	EgressProxy *egress.Proxy
	// QStashCurrentSigningKey and QStashNextSigningKey sign deliveries of
	// requests made through /v2 (QSTASH_CURRENT_SIGNING_KEY,
	// QSTASH_NEXT_SIGNING_KEY), as QStash does.
	QStashCurrentSigningKey, QStashNextSigningKey string
	// RedisWaitReplicas makes the API confirm a submission only once this
	// many replicas hold it (REDIS_WAIT_REPLICAS, default 0; use 1 or more
	// with Sentinel so a failover cannot lose an accepted request); a
	// worker's sweeper hands a record it finds without a task to the
	// workers only once that many replicas hold it.
	RedisWaitReplicas int
	// ScheduleLimit caps how many schedules may exist (SCHEDULE_LIMIT,
	// default 1000).
	ScheduleLimit int
	// QueueLimit caps how many QStash queues one tenant may have
	// (QUEUE_LIMIT, default 1000; 0 turns the cap off).
	QueueLimit int
	// EndpointLimit caps how many endpoints one tenant may have opened by
	// hand (ENDPOINT_LIMIT, default 1000; 0 turns the cap off).
	EndpointLimit int
	// MaxUnfinishedPerKey caps the unfinished requests of one API key (of
	// one client address without keys) (MAX_UNFINISHED_PER_KEY, default
	// 100000; 0 turns the cap off).
	MaxUnfinishedPerKey int
	// Partitions spreads requests over this many hash tags and asynq
	// queues, for Redis Cluster (PARTITIONS, default 1: today's layout).
	Partitions int
	// SweepInterval is how often a worker's sweeper reconciles records
	// with asynq (SWEEP_INTERVAL, default 10s).
	SweepInterval time.Duration
	// FlowFairShare is the share of a worker's slots one destination may
	// hold (FLOW_FAIR_SHARE, default 0.5; 1 turns fairness off).
	FlowFairShare float64
	// FlowTenantShare is the share of a worker's slots one tenant may
	// hold, whatever its destinations, while requests of more than one
	// tenant are about (FLOW_TENANT_SHARE, default 0.5; 1 turns it off).
	FlowTenantShare float64
	// FlowAdaptive turns adaptive backpressure on (FLOW_ADAPTIVE, default
	// true).
	FlowAdaptive bool
	// FlowAdaptiveMinRate is the lowest rate (per second, per worker) an
	// adaptive cut goes down to (FLOW_ADAPTIVE_MIN_RATE, default 1).
	FlowAdaptiveMinRate float64
	// Breaker turns the endpoints' circuit breaker on (BREAKER, default
	// on; "off" turns it off). BreakerWindow (BREAKER_WINDOW, default 30s)
	// is how long an endpoint's attempts are counted; it opens when at
	// least BreakerMinAttempts of them (BREAKER_MIN_ATTEMPTS, default 20)
	// were made and at least BreakerFailureRatio (BREAKER_FAILURE_RATIO,
	// default 0.9) failed for the endpoint's reasons. BreakerProbeMax
	// (BREAKER_PROBE_MAX, default 5m) is the longest wait between probes;
	// BreakerFailAfter (BREAKER_FAIL_AFTER, default 0: never) ends the
	// waiters of an endpoint open that long as failed.
	Breaker             bool
	BreakerWindow       time.Duration
	BreakerMinAttempts  int
	BreakerFailureRatio float64
	BreakerProbeMax     time.Duration
	BreakerFailAfter    time.Duration
	// TimerSlack is how late Linux may fire the program's timers so that
	// nearby wake-ups merge (TIMER_SLACK, default 0: the system's 50µs,
	// and the program is not executed again): internal/timerslack.
	TimerSlack time.Duration
	// OperatorEventsURLs receive the operator's events (request.failed,
	// endpoint.opened, endpoint.closed): OPERATOR_EVENTS_URL,
	// comma-separated http(s) URLs; none by default.
	OperatorEventsURLs []string
}

// Names lists every environment variable Load reads. Tests use it to check
// that deployment files only set variables that exist.
var Names = []string{
	"REDIS_URL", "REDIS_SENTINEL_ADDRS", "REDIS_SENTINEL_MASTER", "REDIS_CLUSTER_ADDRS",
	"REDIS_USERNAME", "REDIS_PASSWORD", "REDIS_SENTINEL_PASSWORD", "REDIS_TLS", "REDIS_TLS_CA_FILE",
	"PORT", "WORKER_CONCURRENCY", "API_KEYS", "ADMIN_KEYS", "ALLOW_PRIVATE_TARGETS", "ALLOWED_CIDRS",
	"REDRIVE_LIMIT", "RETENTION", "PAYLOAD_RETENTION", "RATE_LIMIT_RPS", "LOG_LEVEL", "METRICS_ADDR",
	"CALLBACK_SIGNING_SECRET", "SWEEP_INTERVAL", "REDIS_WAIT_REPLICAS", "SCHEDULE_LIMIT", "QUEUE_LIMIT", "ENDPOINT_LIMIT", "MAX_UNFINISHED_PER_KEY", "PARTITIONS", "SIGNING_SECRETS",
	"SECRETS_KEYS", "EGRESS_PROXY", "QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY",
	"FLOW_FAIR_SHARE", "FLOW_TENANT_SHARE", "FLOW_ADAPTIVE", "FLOW_ADAPTIVE_MIN_RATE",
	"BREAKER", "BREAKER_WINDOW", "BREAKER_MIN_ATTEMPTS", "BREAKER_FAILURE_RATIO", "BREAKER_PROBE_MAX", "BREAKER_FAIL_AFTER",
	"TIMER_SLACK", "OPERATOR_EVENTS_URL",
}

// Defaults.
const (
	DefaultRedisURL          = "redis://127.0.0.1:6379/0"
	DefaultPort              = 3000
	DefaultWorkerConcurrency = 50
	DefaultRedriveLimit      = 3
	DefaultRetention         = 30 * 24 * time.Hour
	DefaultLogLevel          = "info"
	DefaultSweepInterval     = 10 * time.Second
	DefaultScheduleLimit     = 1000
	DefaultQueueLimit        = 1000
	DefaultEndpointLimit     = 1000
	DefaultMaxUnfinished     = 100_000
)

// RedisDefaulted reports whether c names no Redis of its own: the default
// REDIS_URL, whatever Redis listens on this machine's 6379.
func (c Config) RedisDefaulted() bool {
	return c.RedisURL == DefaultRedisURL && len(c.RedisSentinelAddrs) == 0 && len(c.RedisClusterAddrs) == 0
}

// Load reads the configuration through getenv (os.Getenv in programs, a map
// in tests) and validates it. The error lists every invalid variable.
func Load(getenv func(string) string) (Config, error) {
	c := Config{
		RedisURL:            DefaultRedisURL,
		Port:                DefaultPort,
		WorkerConcurrency:   DefaultWorkerConcurrency,
		RedriveLimit:        DefaultRedriveLimit,
		Retention:           DefaultRetention,
		LogLevel:            DefaultLogLevel,
		SweepInterval:       DefaultSweepInterval,
		ScheduleLimit:       DefaultScheduleLimit,
		QueueLimit:          DefaultQueueLimit,
		EndpointLimit:       DefaultEndpointLimit,
		MaxUnfinishedPerKey: DefaultMaxUnfinished,
		Partitions:          1,
		TimerSlack:          timerslack.Default,
		RedisSentinelMaster: strings.TrimSpace(getenv("REDIS_SENTINEL_MASTER")),
		MetricsAddr:         strings.TrimSpace(getenv("METRICS_ADDR")),
	}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}
	if v := strings.TrimSpace(getenv("REDIS_URL")); v != "" {
		if !strings.HasPrefix(v, "redis://") && !strings.HasPrefix(v, "rediss://") {
			bad("REDIS_URL", "must start with redis:// or rediss://, got %q", v)
		}
		c.RedisURL = v
	}
	c.RedisSentinelAddrs = list(getenv("REDIS_SENTINEL_ADDRS"))
	c.RedisClusterAddrs = list(getenv("REDIS_CLUSTER_ADDRS"))
	if len(c.RedisSentinelAddrs) > 0 && c.RedisSentinelMaster == "" {
		bad("REDIS_SENTINEL_MASTER", "must be set when REDIS_SENTINEL_ADDRS is set")
	}
	if len(c.RedisSentinelAddrs) > 0 && len(c.RedisClusterAddrs) > 0 {
		bad("REDIS_CLUSTER_ADDRS", "cannot be combined with REDIS_SENTINEL_ADDRS")
	}
	c.RedisUsername = strings.TrimSpace(getenv("REDIS_USERNAME"))
	c.RedisPassword = getenv("REDIS_PASSWORD")
	c.RedisSentinelPassword = getenv("REDIS_SENTINEL_PASSWORD")
	c.RedisTLSCAFile = strings.TrimSpace(getenv("REDIS_TLS_CA_FILE"))
	if v := strings.TrimSpace(getenv("REDIS_TLS")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("REDIS_TLS", "must be true or false, got %q", v)
		}
		c.RedisTLS = b
	}
	single := len(c.RedisSentinelAddrs) == 0 && len(c.RedisClusterAddrs) == 0
	for _, v := range []struct {
		name string
		set  bool
	}{{"REDIS_USERNAME", c.RedisUsername != ""}, {"REDIS_PASSWORD", c.RedisPassword != ""}, {"REDIS_TLS", c.RedisTLS}} {
		if single && v.set {
			bad(v.name, "applies to REDIS_CLUSTER_ADDRS and REDIS_SENTINEL_ADDRS; for a single node put the user and password in REDIS_URL (redis://user:password@host:6379/0) and use rediss:// for TLS")
		}
	}
	if c.RedisSentinelPassword != "" && len(c.RedisSentinelAddrs) == 0 {
		bad("REDIS_SENTINEL_PASSWORD", "applies to REDIS_SENTINEL_ADDRS only")
	}
	if c.RedisTLSCAFile != "" && single && !strings.HasPrefix(c.RedisURL, "rediss://") {
		bad("REDIS_TLS_CA_FILE", "needs TLS: a rediss:// REDIS_URL, or REDIS_TLS=true with REDIS_CLUSTER_ADDRS or REDIS_SENTINEL_ADDRS")
	}
	if c.RedisTLSCAFile != "" && !single && !c.RedisTLS {
		bad("REDIS_TLS_CA_FILE", "needs REDIS_TLS=true")
	}
	intVar := func(name string, dst *int, lo, hi int) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			bad(name, "must be an integer between %d and %d, got %q", lo, hi, v)
			return
		}
		*dst = n
	}
	intVar("PORT", &c.Port, 1, 65535)
	intVar("WORKER_CONCURRENCY", &c.WorkerConcurrency, 1, 10000)
	intVar("REDRIVE_LIMIT", &c.RedriveLimit, 0, 1000)
	intVar("RATE_LIMIT_RPS", &c.RateLimitRPS, 0, 1000000)
	intVar("REDIS_WAIT_REPLICAS", &c.RedisWaitReplicas, 0, 16)
	intVar("SCHEDULE_LIMIT", &c.ScheduleLimit, 0, 1_000_000)
	intVar("QUEUE_LIMIT", &c.QueueLimit, 0, 1_000_000)
	intVar("ENDPOINT_LIMIT", &c.EndpointLimit, 0, 1_000_000)
	intVar("MAX_UNFINISHED_PER_KEY", &c.MaxUnfinishedPerKey, 0, 1_000_000_000)
	intVar("PARTITIONS", &c.Partitions, 1, 32)
	if c.RedisWaitReplicas > 0 && len(c.RedisClusterAddrs) > 0 {
		bad("REDIS_WAIT_REPLICAS", "is not supported with REDIS_CLUSTER_ADDRS")
	}
	c.APIKeys = parseKeys(list(getenv("API_KEYS")), bad)
	c.AdminKeys = list(getenv("ADMIN_KEYS"))
	seen := map[string]bool{}
	for _, k := range c.APIKeys {
		if seen[k.Secret] {
			bad("API_KEYS", "lists one key twice (or under two tenants); each key belongs to one tenant")
		}
		seen[k.Secret] = true
	}
	for _, k := range c.AdminKeys {
		if seen[k] {
			bad("ADMIN_KEYS", "lists a key that API_KEYS (or ADMIN_KEYS) lists too; an admin key is listed once, in ADMIN_KEYS")
		}
		seen[k] = true
	}
	c.FlowFairShare, c.FlowTenantShare, c.FlowAdaptive, c.FlowAdaptiveMinRate = 0.5, 0.5, true, 1
	share := func(name string, dst *float64) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				bad(name, "must be a number above 0 and at most 1 (1 turns fairness off), got %q", v)
			}
			*dst = f
		}
	}
	share("FLOW_FAIR_SHARE", &c.FlowFairShare)
	share("FLOW_TENANT_SHARE", &c.FlowTenantShare)
	if v := strings.TrimSpace(getenv("FLOW_ADAPTIVE")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("FLOW_ADAPTIVE", "must be true or false, got %q", v)
		}
		c.FlowAdaptive = b
	}
	if v := strings.TrimSpace(getenv("FLOW_ADAPTIVE_MIN_RATE")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1e6) {
			bad("FLOW_ADAPTIVE_MIN_RATE", "must be a rate per second above 0, got %q", v)
		}
		c.FlowAdaptiveMinRate = f
	}
	c.Breaker, c.BreakerWindow, c.BreakerMinAttempts, c.BreakerFailureRatio, c.BreakerProbeMax = true, 30*time.Second, 20, 0.9, 5*time.Minute
	switch v := strings.ToLower(strings.TrimSpace(getenv("BREAKER"))); v {
	case "", "on":
	case "off":
		c.Breaker = false
	default:
		bad("BREAKER", "must be on or off, got %q", v)
	}
	dur := func(name string, least time.Duration, dst *time.Duration) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			d, err := ParseDuration(v)
			if err != nil || d < least {
				bad(name, "must be a duration of at least %s such as 30s or 5m, got %q", least, v)
				return
			}
			*dst = d
		}
	}
	dur("BREAKER_WINDOW", time.Second, &c.BreakerWindow)
	dur("BREAKER_PROBE_MAX", time.Second, &c.BreakerProbeMax)
	dur("BREAKER_FAIL_AFTER", time.Second, &c.BreakerFailAfter)
	if v := strings.TrimSpace(getenv("BREAKER_MIN_ATTEMPTS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad("BREAKER_MIN_ATTEMPTS", "must be a whole number of at least 1, got %q", v)
		}
		c.BreakerMinAttempts = n
	}
	if v := strings.TrimSpace(getenv("BREAKER_FAILURE_RATIO")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			bad("BREAKER_FAILURE_RATIO", "must be a number above 0 and at most 1, got %q", v)
		}
		c.BreakerFailureRatio = f
	}
	if v := strings.TrimSpace(getenv("ALLOW_PRIVATE_TARGETS")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("ALLOW_PRIVATE_TARGETS", "must be true or false, got %q", v)
		}
		c.AllowPrivateTargets = b
	}
	for _, s := range list(getenv("ALLOWED_CIDRS")) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			bad("ALLOWED_CIDRS", "%q is not a CIDR prefix like 10.0.0.0/8", s)
			continue
		}
		c.AllowedCIDRs = append(c.AllowedCIDRs, p.Masked())
	}
	if v := strings.TrimSpace(getenv("RETENTION")); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d < time.Minute || d > MaxRetention {
			bad("RETENTION", "must be a duration from 1m to 3650d such as 30d or 720h, got %q", v)
		} else {
			c.Retention = d
		}
	}
	if v := strings.TrimSpace(getenv("PAYLOAD_RETENTION")); v != "" {
		d, err := ParseDuration(v)
		switch {
		case err != nil || d < time.Minute || d > MaxRetention:
			bad("PAYLOAD_RETENTION", "must be a duration from 1m to 3650d such as 7d or 24h, got %q", v)
		case d > c.Retention:
			bad("PAYLOAD_RETENTION", "%s is longer than RETENTION (%s): a payload cannot outlive its record; shorten PAYLOAD_RETENTION "+
				"or lengthen RETENTION", v, FormatDuration(c.Retention))
		default:
			c.PayloadRetention = d
		}
	}
	if v := strings.ToLower(strings.TrimSpace(getenv("LOG_LEVEL"))); v != "" {
		switch v {
		case "debug", "info", "warn", "error":
			c.LogLevel = v
		default:
			bad("LOG_LEVEL", "must be one of debug, info, warn, error, got %q", v)
		}
	}
	if v := strings.TrimSpace(getenv("SWEEP_INTERVAL")); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d < 100*time.Millisecond {
			bad("SWEEP_INTERVAL", "must be a duration of at least 100ms such as 10s, got %q", v)
		} else {
			c.SweepInterval = d
		}
	}
	if v := strings.TrimSpace(getenv("TIMER_SLACK")); v != "" {
		d, err := time.ParseDuration(v)
		if v == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 || d > timerslack.Max {
			bad("TIMER_SLACK", "must be a duration from 0 to %v such as 1ms (0 keeps the system's), got %q", timerslack.Max, v)
		} else {
			c.TimerSlack = d
		}
	}
	c.OperatorEventsURLs = list(getenv("OPERATOR_EVENTS_URL"))
	for i, raw := range c.OperatorEventsURLs {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("OPERATOR_EVENTS_URL", "entry %d is not an http(s) URL such as https://ops.example.com/retryd-events", i+1)
		}
	}
	c.CallbackSigningSecret = getenv("CALLBACK_SIGNING_SECRET")
	c.SigningSecrets = list(getenv("SIGNING_SECRETS"))
	c.QStashCurrentSigningKey = strings.TrimSpace(getenv("QSTASH_CURRENT_SIGNING_KEY"))
	c.QStashNextSigningKey = strings.TrimSpace(getenv("QSTASH_NEXT_SIGNING_KEY"))
	if _, err := sign.ParseSecrets(c.SigningSecrets); err != nil {
		bad("SIGNING_SECRETS", "%v", err)
	}
	if ring, err := credentials.ParseKeys(getenv("SECRETS_KEYS")); err != nil {
		bad("SECRETS_KEYS", "%v", err)
	} else {
		c.SecretsKeys = ring
	}
	if v := strings.TrimSpace(getenv("EGRESS_PROXY")); v != "" {
		// The operator's own proxy: its address is not held to the
		// destination rules (a tenant's proxy is).
		p, err := egress.ParseProxy(v, true)
		if err != nil {
			bad("EGRESS_PROXY", "%v", err)
		}
		c.EgressProxy = p
	}
	return c, errors.Join(errs...)
}

// proxyShown is EGRESS_PROXY for the startup line: its address, never
// its password.
func proxyShown(p *egress.Proxy) string {
	if p == nil {
		return "unset"
	}
	u := *p.URL
	u.User = nil
	if p.Username != "" || p.Password != "" {
		return u.String() + " (with credentials ****)"
	}
	return u.String()
}

// MaxRetention bounds RETENTION, PAYLOAD_RETENTION and a tenant's
// retention: ten years.
const MaxRetention = 3650 * 24 * time.Hour

// ParseDuration accepts Go durations ("720h", "90m") and whole days ("30d").
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid day count %q", s)
		}
		if n > int(math.MaxInt64/int64(24*time.Hour)) {
			return 0, fmt.Errorf("day count %q is too long for a duration", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// FormatDuration writes d as ParseDuration reads it, in whole days when
// it is whole days ("30d"); "" for 0.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// APIKey is one API_KEYS entry: "tenant:key", or a bare key of the
// default tenant.
type APIKey struct{ Tenant, Secret string }

// parseKeys reads API_KEYS entries. An entry with a colon names its
// tenant before the first one; a bare key whose own text holds a colon is
// written "default:<key>".
func parseKeys(entries []string, bad func(name, format string, args ...any)) []APIKey {
	out := make([]APIKey, 0, len(entries))
	for i, e := range entries {
		k := APIKey{Tenant: tenant.Default, Secret: e}
		if name, secret, ok := strings.Cut(e, ":"); ok {
			if !tenant.Valid(name) {
				// The text is not shown: it may be part of a key.
				bad("API_KEYS", "entry %d: the text before its first colon is not a tenant name (1 to 64 of a-z, 0-9, _ and -); "+
					"a key that holds a colon is written default:<key>", i+1)
				continue
			}
			k = APIKey{Tenant: name, Secret: secret}
		}
		if k.Secret == "" {
			bad("API_KEYS", "entry %d (tenant %s) has no key after the colon", i+1, k.Tenant)
			continue
		}
		out = append(out, k)
	}
	return out
}

// Tenants are the tenants API_KEYS names, each once, in order.
func (c Config) Tenants() []string {
	var out []string
	for _, k := range c.APIKeys {
		if !slices.Contains(out, k.Tenant) {
			out = append(out, k.Tenant)
		}
	}
	return out
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// String renders the configuration for the start-up log line, with secrets
// (API keys, the signing secret, a password in the Redis URL) masked.
func (c Config) String() string {
	cidrs := make([]string, len(c.AllowedCIDRs))
	for i, p := range c.AllowedCIDRs {
		cidrs[i] = p.String()
	}
	keys := "unset"
	if len(c.APIKeys) > 0 {
		keys = fmt.Sprintf("%d key(s) of %d tenant(s) ****", len(c.APIKeys), len(c.Tenants()))
	}
	admins := "unset"
	if len(c.AdminKeys) > 0 {
		admins = fmt.Sprintf("%d key(s) ****", len(c.AdminKeys))
	}
	secret := "unset"
	if c.CallbackSigningSecret != "" {
		secret = "****"
	}
	signing := "unset"
	if len(c.SigningSecrets) > 0 {
		signing = fmt.Sprintf("%d secret(s) ****", len(c.SigningSecrets))
	}
	sealing := "unset"
	if c.SecretsKeys != nil {
		sealing = fmt.Sprintf("%d key(s) ****", c.SecretsKeys.Len())
	}
	masked := func(v string) string { return map[bool]string{true: "****", false: "unset"}[v != ""] }
	return fmt.Sprintf("REDIS_URL=%s REDIS_SENTINEL_ADDRS=%s REDIS_SENTINEL_MASTER=%s REDIS_CLUSTER_ADDRS=%s "+
		"REDIS_USERNAME=%s REDIS_PASSWORD=%s REDIS_SENTINEL_PASSWORD=%s REDIS_TLS=%t REDIS_TLS_CA_FILE=%s "+
		"PORT=%d WORKER_CONCURRENCY=%d API_KEYS=%s ADMIN_KEYS=%s ALLOW_PRIVATE_TARGETS=%t ALLOWED_CIDRS=%s "+
		"REDRIVE_LIMIT=%d RETENTION=%s PAYLOAD_RETENTION=%s RATE_LIMIT_RPS=%d LOG_LEVEL=%s METRICS_ADDR=%s CALLBACK_SIGNING_SECRET=%s SWEEP_INTERVAL=%s REDIS_WAIT_REPLICAS=%d "+
		"SCHEDULE_LIMIT=%d QUEUE_LIMIT=%d ENDPOINT_LIMIT=%d MAX_UNFINISHED_PER_KEY=%d PARTITIONS=%d SIGNING_SECRETS=%s SECRETS_KEYS=%s EGRESS_PROXY=%s QSTASH_SIGNING_KEYS=%s "+
		"FLOW_FAIR_SHARE=%g FLOW_TENANT_SHARE=%g FLOW_ADAPTIVE=%t FLOW_ADAPTIVE_MIN_RATE=%g TIMER_SLACK=%s OPERATOR_EVENTS_URL=%s",
		MaskURL(c.RedisURL), strings.Join(c.RedisSentinelAddrs, ","), c.RedisSentinelMaster,
		strings.Join(c.RedisClusterAddrs, ","), c.RedisUsername, masked(c.RedisPassword), masked(c.RedisSentinelPassword), c.RedisTLS, c.RedisTLSCAFile, c.Port, c.WorkerConcurrency, keys, admins, c.AllowPrivateTargets,
		strings.Join(cidrs, ","), c.RedriveLimit, c.Retention, orUnset(FormatDuration(c.PayloadRetention)), c.RateLimitRPS, c.LogLevel, c.MetricsAddr, secret, c.SweepInterval, c.RedisWaitReplicas,
		c.ScheduleLimit, c.QueueLimit, c.EndpointLimit, c.MaxUnfinishedPerKey, c.Partitions, signing, sealing, proxyShown(c.EgressProxy), masked(c.QStashCurrentSigningKey),
		c.FlowFairShare, c.FlowTenantShare, c.FlowAdaptive, c.FlowAdaptiveMinRate, c.TimerSlack,
		map[bool]string{true: fmt.Sprintf("%d URL(s) ****", len(c.OperatorEventsURLs)), false: "unset"}[len(c.OperatorEventsURLs) > 0])
}

// MaskURL hides the password of a redis:// URL.
func MaskURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return u
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":****@" + host
	}
	return u
}
