package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Program is a retryd program: the API or the worker.
type Program string

// The programs, and Both for a setting each of them reads.
const (
	API    Program = "api"
	Worker Program = "worker"
	Both   Program = "both"
)

// Uses reports whether a setting read by p is read by program q.
func (p Program) Uses(q Program) bool { return p == Both || p == q }

// Programs says, for every variable in Names, which program reads it.
// docs/operating.md shows the same (a test compares them).
var Programs = map[string]Program{
	"REDIS_URL": Both, "REDIS_SENTINEL_ADDRS": Both, "REDIS_SENTINEL_MASTER": Both, "REDIS_CLUSTER_ADDRS": Both,
	"REDIS_USERNAME": Both, "REDIS_PASSWORD": Both, "REDIS_SENTINEL_PASSWORD": Both, "REDIS_TLS": Both, "REDIS_TLS_CA_FILE": Both,
	"PORT": API, "WORKER_CONCURRENCY": Worker, "API_KEYS": Both, "ADMIN_KEYS": Both,
	"ALLOW_PRIVATE_TARGETS": Both, "ALLOWED_CIDRS": Both,
	"REDRIVE_LIMIT": Both, "RETENTION": Both, "PAYLOAD_RETENTION": Both, "RATE_LIMIT_RPS": API, "LOG_LEVEL": Both, "METRICS_ADDR": Worker,
	"CALLBACK_SIGNING_SECRET": Worker, "SWEEP_INTERVAL": Worker, "REDIS_WAIT_REPLICAS": Both,
	"SCHEDULE_LIMIT": API, "QUEUE_LIMIT": API, "ENDPOINT_LIMIT": API, "MAX_UNFINISHED_PER_KEY": API, "PARTITIONS": Both, "SIGNING_SECRETS": Worker,
	"SECRETS_KEYS": Both, "EGRESS_PROXY": Worker, "QSTASH_CURRENT_SIGNING_KEY": Both, "QSTASH_NEXT_SIGNING_KEY": Both,
	"FLOW_FAIR_SHARE": Worker, "FLOW_TENANT_SHARE": Worker, "FLOW_ADAPTIVE": Worker, "FLOW_ADAPTIVE_MIN_RATE": Worker,
	"BREAKER": Worker, "BREAKER_WINDOW": Worker, "BREAKER_MIN_ATTEMPTS": Worker, "BREAKER_FAILURE_RATIO": Worker,
	"BREAKER_PROBE_MAX": Worker, "BREAKER_FAIL_AFTER": Worker,
	"TIMER_SLACK": Both, "OPERATOR_EVENTS_URL": Worker,
}

// DestinationRules are the settings that decide which destinations a
// process accepts (the API at submit) and dials (the worker).
var DestinationRules = []string{"ALLOW_PRIVATE_TARGETS", "ALLOWED_CIDRS"}

// Fate are the settings that decide what becomes of a request, as program
// p reads them: destination rules, the limits it enforces, the ids of the
// secrets it signs with and of the key that seals credentials (never the
// secrets). Every process records them,
// so that processes on one Redis can tell where they disagree: two
// processes that read one of them must have the same value.
func (c Config) Fate(p Program) map[string]string {
	cidrs := make([]string, len(c.AllowedCIDRs))
	for i, pr := range c.AllowedCIDRs {
		cidrs[i] = pr.String()
	}
	all := map[string]string{
		"ALLOW_PRIVATE_TARGETS":      strconv.FormatBool(c.AllowPrivateTargets),
		"ALLOWED_CIDRS":              orUnset(strings.Join(cidrs, ",")),
		"REDRIVE_LIMIT":              strconv.Itoa(c.RedriveLimit),
		"RETENTION":                  c.Retention.String(),
		"PAYLOAD_RETENTION":          orUnset(FormatDuration(c.PayloadRetention)),
		"PARTITIONS":                 strconv.Itoa(c.Partitions),
		"RATE_LIMIT_RPS":             strconv.Itoa(c.RateLimitRPS),
		"REDIS_WAIT_REPLICAS":        strconv.Itoa(c.RedisWaitReplicas),
		"SCHEDULE_LIMIT":             strconv.Itoa(c.ScheduleLimit),
		"QUEUE_LIMIT":                strconv.Itoa(c.QueueLimit),
		"ENDPOINT_LIMIT":             strconv.Itoa(c.EndpointLimit),
		"MAX_UNFINISHED_PER_KEY":     strconv.Itoa(c.MaxUnfinishedPerKey),
		"CALLBACK_SIGNING_SECRET":    SecretID(c.CallbackSigningSecret),
		"SIGNING_SECRETS":            SecretIDs(c.SigningSecrets),
		"SECRETS_KEYS":               orUnset(c.SecretsKeys.SealID()),
		"QSTASH_CURRENT_SIGNING_KEY": SecretID(c.QStashCurrentSigningKey),
		"QSTASH_NEXT_SIGNING_KEY":    SecretID(c.QStashNextSigningKey),
		"FLOW_FAIR_SHARE":            strconv.FormatFloat(c.FlowFairShare, 'g', -1, 64),
		"FLOW_TENANT_SHARE":          strconv.FormatFloat(c.FlowTenantShare, 'g', -1, 64),
		"FLOW_ADAPTIVE":              strconv.FormatBool(c.FlowAdaptive),
		"FLOW_ADAPTIVE_MIN_RATE":     strconv.FormatFloat(c.FlowAdaptiveMinRate, 'g', -1, 64),
	}
	out := make(map[string]string, len(all))
	for name, v := range all {
		if Programs[name].Uses(p) {
			out[name] = v
		}
	}
	return out
}

// SecretID names a secret without revealing it: the first 12 hex digits
// of its SHA-256, or "unset".
func SecretID(secret string) string {
	if secret == "" {
		return "unset"
	}
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// SecretIDs are the ids of secrets, in order, comma-separated.
func SecretIDs(secrets []string) string {
	ids := make([]string, len(secrets))
	for i, s := range secrets {
		ids[i] = SecretID(s)
	}
	return orUnset(strings.Join(ids, ","))
}

func orUnset(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}
