package config

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisURL != DefaultRedisURL || c.Port != 3000 || c.RedriveLimit != 3 || c.Retention != 30*24*time.Hour ||
		c.RateLimitRPS != 0 || c.AllowPrivateTargets || len(c.APIKeys) != 0 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestLoadReadsEveryVariable(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{
		"REDIS_URL": "rediss://:pw@redis:6380/2", "PORT": "8080", "WORKER_CONCURRENCY": "7",
		"API_KEYS": "a, b", "ALLOW_PRIVATE_TARGETS": "true", "ALLOWED_CIDRS": "10.1.0.0/16,fd00::/8",
		"REDRIVE_LIMIT": "5", "RETENTION": "7d", "RATE_LIMIT_RPS": "100", "LOG_LEVEL": "DEBUG",
		"METRICS_ADDR": ":9090", "CALLBACK_SIGNING_SECRET": "shh",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 8080 || c.WorkerConcurrency != 7 || len(c.APIKeys) != 2 || c.APIKeys[1] != (APIKey{Tenant: "default", Secret: "b"}) || !c.AllowPrivateTargets ||
		len(c.AllowedCIDRs) != 2 || c.RedriveLimit != 5 || c.Retention != 7*24*time.Hour || c.RateLimitRPS != 100 ||
		c.LogLevel != "debug" || c.MetricsAddr != ":9090" || c.CallbackSigningSecret != "shh" {
		t.Errorf("got %+v", c)
	}
	s := c.String()
	for _, secret := range []string{"pw", "shh", "a,", " b"} {
		if strings.Contains(s, secret) {
			t.Errorf("String() leaks %q: %s", secret, s)
		}
	}
}

func TestLoadRejectsWithExactMessages(t *testing.T) {
	t.Parallel()
	_, err := Load(env(map[string]string{
		"PORT": "x", "REDIS_URL": "http://x", "RETENTION": "soon", "ALLOWED_CIDRS": "10.0.0.1",
		"ALLOW_PRIVATE_TARGETS": "maybe", "LOG_LEVEL": "loud", "REDIS_SENTINEL_ADDRS": "a:1",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`PORT: must be an integer between 1 and 65535, got "x"`,
		`REDIS_URL: must start with redis:// or rediss://, got "http://x"`,
		`RETENTION: must be a duration from 1m to 3650d such as 30d or 720h, got "soon"`,
		`ALLOWED_CIDRS: "10.0.0.1" is not a CIDR prefix like 10.0.0.0/8`,
		`ALLOW_PRIVATE_TARGETS: must be true or false, got "maybe"`,
		`LOG_LEVEL: must be one of debug, info, warn, error, got "loud"`,
		`REDIS_SENTINEL_MASTER: must be set when REDIS_SENTINEL_ADDRS is set`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestFlowSettings(t *testing.T) {
	t.Parallel()
	c, err := Load(env(nil))
	if err != nil || c.FlowFairShare != 0.5 || !c.FlowAdaptive || c.FlowAdaptiveMinRate != 1 {
		t.Errorf("flow defaults: share %v adaptive %v min %v, %v", c.FlowFairShare, c.FlowAdaptive, c.FlowAdaptiveMinRate, err)
	}
	c, err = Load(env(map[string]string{"FLOW_FAIR_SHARE": "1", "FLOW_ADAPTIVE": "false", "FLOW_ADAPTIVE_MIN_RATE": "0.5"}))
	if err != nil || c.FlowFairShare != 1 || c.FlowAdaptive || c.FlowAdaptiveMinRate != 0.5 {
		t.Errorf("flow settings: %+v, %v", c, err)
	}
	for name, v := range map[string]string{"FLOW_FAIR_SHARE": "0", "FLOW_ADAPTIVE": "sometimes", "FLOW_ADAPTIVE_MIN_RATE": "-1"} {
		_, err := Load(env(map[string]string{name: v}))
		if err == nil || !strings.Contains(err.Error(), name+": ") || !strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Errorf("%s=%s: %v", name, v, err)
		}
	}
	for _, v := range []string{"1.5", "x", "-0.1"} {
		if _, err := Load(env(map[string]string{"FLOW_FAIR_SHARE": v})); err == nil {
			t.Errorf("FLOW_FAIR_SHARE=%s accepted", v)
		}
	}
}

// Credentials and TLS of Cluster and Sentinel: where each applies, and
// the password kept out of the start-up line.
func TestRedisCredentials(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"REDIS_CLUSTER_ADDRS": "a:1,b:2", "REDIS_USERNAME": "app", "REDIS_PASSWORD": "s3cret",
		"REDIS_TLS": "true", "REDIS_TLS_CA_FILE": "/ca.pem"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisUsername != "app" || c.RedisPassword != "s3cret" || !c.RedisTLS || c.RedisTLSCAFile != "/ca.pem" {
		t.Errorf("loaded %+v", c)
	}
	if s := c.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "REDIS_PASSWORD=****") {
		t.Errorf("start-up line shows the password: %s", s)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"REDIS_PASSWORD": "x"}, "REDIS_PASSWORD: applies to REDIS_CLUSTER_ADDRS and REDIS_SENTINEL_ADDRS; for a single node put the user and password in REDIS_URL"},
		{map[string]string{"REDIS_TLS": "true"}, "REDIS_TLS: applies to REDIS_CLUSTER_ADDRS and REDIS_SENTINEL_ADDRS"},
		{map[string]string{"REDIS_CLUSTER_ADDRS": "a:1", "REDIS_TLS": "yes please"}, `REDIS_TLS: must be true or false, got "yes please"`},
		{map[string]string{"REDIS_CLUSTER_ADDRS": "a:1", "REDIS_SENTINEL_PASSWORD": "x"}, "REDIS_SENTINEL_PASSWORD: applies to REDIS_SENTINEL_ADDRS only"},
		{map[string]string{"REDIS_CLUSTER_ADDRS": "a:1", "REDIS_TLS_CA_FILE": "/ca.pem"}, "REDIS_TLS_CA_FILE: needs REDIS_TLS=true"},
		{map[string]string{"REDIS_TLS_CA_FILE": "/ca.pem"}, "REDIS_TLS_CA_FILE: needs TLS: a rediss:// REDIS_URL"},
	} {
		_, err := Load(env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%v) = %v, want %q", tc.env, err, tc.want)
		}
	}
	if _, err := Load(env(map[string]string{"REDIS_URL": "rediss://u:p@h:6380/0", "REDIS_TLS_CA_FILE": "/ca.pem"})); err != nil {
		t.Errorf("a private CA for a rediss:// URL: %v", err)
	}
}

func TestAPIKeysNameTheirTenants(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"API_KEYS": "bare, team-a:ka1,team-a:ka2, team_b:kb, default:has:colon", "ADMIN_KEYS": "root"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []APIKey{{"default", "bare"}, {"team-a", "ka1"}, {"team-a", "ka2"}, {"team_b", "kb"}, {"default", "has:colon"}}
	if len(c.APIKeys) != len(want) {
		t.Fatalf("keys %+v", c.APIKeys)
	}
	for i := range want {
		if c.APIKeys[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i+1, c.APIKeys[i], want[i])
		}
	}
	if got := strings.Join(c.Tenants(), ","); got != "default,team-a,team_b" {
		t.Errorf("tenants %s", got)
	}
	if len(c.AdminKeys) != 1 || c.AdminKeys[0] != "root" {
		t.Errorf("admin keys %v", c.AdminKeys)
	}
	if s := c.String(); strings.Contains(s, "ka1") || strings.Contains(s, "root") || !strings.Contains(s, "5 key(s) of 3 tenant(s)") {
		t.Errorf("start-up line shows keys or miscounts: %s", s)
	}
}

func TestAPIKeysRejections(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ keys, admins, want string }{
		"bad tenant": {keys: "Team-A:sk_live", want: "API_KEYS: entry 1: the text before its first colon is not a tenant name"},
		"no key":     {keys: "ok,team-a:", want: "API_KEYS: entry 2 (tenant team-a) has no key after the colon"},
		"twice":      {keys: "team-a:k,team-b:k", want: "API_KEYS: lists one key twice (or under two tenants)"},
		"admin too":  {keys: "team-a:k", admins: "k", want: "ADMIN_KEYS: lists a key that API_KEYS (or ADMIN_KEYS) lists too"},
	}
	for name, c := range cases {
		_, err := Load(env(map[string]string{"API_KEYS": c.keys, "ADMIN_KEYS": c.admins}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "sk_live") {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
	}
}

func TestTimerSlack(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"": 0, "1ms": time.Millisecond, "0": 0, "250us": 250 * time.Microsecond, "20ms": 20 * time.Millisecond} {
		c, err := Load(env(map[string]string{"TIMER_SLACK": v}))
		if err != nil || c.TimerSlack != want {
			t.Errorf("TIMER_SLACK=%q: %v, %v; want %v", v, c.TimerSlack, err, want)
		}
	}
	for _, v := range []string{"1", "-1ms", "21ms", "soon"} {
		_, err := Load(env(map[string]string{"TIMER_SLACK": v}))
		want := `TIMER_SLACK: must be a duration from 0 to 20ms such as 1ms (0 keeps the system's), got ` + strconv.Quote(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("TIMER_SLACK=%q: %v, want %s", v, err, want)
		}
	}
}

func TestRedisDefaulted(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{"": true, "redis://127.0.0.1:6379/0": true, "redis://10.0.0.5:6379/0": false} {
		c, err := Load(env(map[string]string{"REDIS_URL": url}))
		if err != nil || c.RedisDefaulted() != want {
			t.Errorf("REDIS_URL=%q: defaulted %v (%v), want %v", url, c.RedisDefaulted(), err, want)
		}
	}
}

// RETENTION is at most ten years, as a tenant's is; a day count too long
// for a duration is refused, not wrapped around.
func TestRetentionIsBounded(t *testing.T) {
	t.Parallel()
	if c, err := Load(env(map[string]string{"RETENTION": "3650d"})); err != nil || c.Retention != MaxRetention {
		t.Errorf("3650d: %v, %v", c.Retention, err)
	}
	for _, v := range []string{"3651d", "87601h", "106752d", "200000d", "99999999999999999999d"} {
		_, err := Load(env(map[string]string{"RETENTION": v}))
		want := fmt.Sprintf("RETENTION: must be a duration from 1m to 3650d such as 30d or 720h, got %q", v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RETENTION=%s: %v, want %q", v, err, want)
		}
	}
	if _, err := ParseDuration("106752d"); err == nil {
		t.Error("ParseDuration(106752d) wrapped around instead of failing")
	}
}

// PAYLOAD_RETENTION erases payloads before their records end: unset it is
// off; it may not be longer than RETENTION, nor anything but a duration of
// at least a minute.
func TestPayloadRetention(t *testing.T) {
	t.Parallel()
	c, err := Load(env(nil))
	if err != nil || c.PayloadRetention != 0 || c.Fate(Worker)["PAYLOAD_RETENTION"] != "unset" {
		t.Errorf("default: %v (%s), %v", c.PayloadRetention, c.Fate(Worker)["PAYLOAD_RETENTION"], err)
	}
	c, err = Load(env(map[string]string{"RETENTION": "30d", "PAYLOAD_RETENTION": "7d"}))
	if err != nil || c.PayloadRetention != 7*24*time.Hour || c.Fate(API)["PAYLOAD_RETENTION"] != "7d" ||
		!strings.Contains(c.String(), "PAYLOAD_RETENTION=7d") {
		t.Errorf("7d: %v, %v, %s", c.PayloadRetention, err, c.String())
	}
	if c, err = Load(env(map[string]string{"RETENTION": "2h", "PAYLOAD_RETENTION": "2h"})); err != nil || c.PayloadRetention != 2*time.Hour {
		t.Errorf("equal to RETENTION: %v, %v", c.PayloadRetention, err)
	}
	for _, tc := range []struct{ env map[string]string }{
		{map[string]string{"PAYLOAD_RETENTION": "soon"}},
		{map[string]string{"PAYLOAD_RETENTION": "30s"}},
		{map[string]string{"PAYLOAD_RETENTION": "-1d"}},
		{map[string]string{"PAYLOAD_RETENTION": "3651d", "RETENTION": "3650d"}},
	} {
		_, err := Load(env(tc.env))
		want := fmt.Sprintf("PAYLOAD_RETENTION: must be a duration from 1m to 3650d such as 7d or 24h, got %q", tc.env["PAYLOAD_RETENTION"])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", tc.env, err, want)
		}
	}
	_, err = Load(env(map[string]string{"RETENTION": "7d", "PAYLOAD_RETENTION": "8d"}))
	want := "PAYLOAD_RETENTION: 8d is longer than RETENTION (7d): a payload cannot outlive its record; shorten PAYLOAD_RETENTION or lengthen RETENTION"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("longer than RETENTION: %v, want %q", err, want)
	}
	// The default RETENTION (30d) bounds it too.
	if _, err := Load(env(map[string]string{"PAYLOAD_RETENTION": "31d"})); err == nil || !strings.Contains(err.Error(), "longer than RETENTION (30d)") {
		t.Errorf("longer than the default RETENTION: %v", err)
	}
}

// ENDPOINT_LIMIT caps the endpoints one tenant opens by hand: 1000 by
// default, 0 turns it off, anything else is refused with its range.
func TestEndpointLimit(t *testing.T) {
	t.Parallel()
	if c, err := Load(env(nil)); err != nil || c.EndpointLimit != 1000 {
		t.Errorf("default: %d %v, want 1000", c.EndpointLimit, err)
	}
	if c, err := Load(env(map[string]string{"ENDPOINT_LIMIT": "0"})); err != nil || c.EndpointLimit != 0 {
		t.Errorf("ENDPOINT_LIMIT=0: %d %v, want 0 (no cap)", c.EndpointLimit, err)
	}
	for _, v := range []string{"-1", "x", "1e3", "1000001"} {
		_, err := Load(env(map[string]string{"ENDPOINT_LIMIT": v}))
		if want := `ENDPOINT_LIMIT: must be an integer between 0 and 1000000, got "` + v + `"`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ENDPOINT_LIMIT=%s: %v, want %q", v, err, want)
		}
	}
}

// SECRETS_KEYS seals credentials: unset, there is no keyring; a malformed
// value stops the program, naming the variable and why; the summary
// counts the keys and shows none.
func TestSecretsKeys(t *testing.T) {
	t.Parallel()
	c, err := Load(env(nil))
	if err != nil || c.SecretsKeys != nil || !strings.Contains(c.String(), "SECRETS_KEYS=unset") {
		t.Errorf("unset: keyring %v, %v, summary %q", c.SecretsKeys, err, c.String())
	}
	k1, k2 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	c, err = Load(env(map[string]string{"SECRETS_KEYS": k1 + ", " + k2}))
	if err != nil || c.SecretsKeys == nil {
		t.Fatalf("two keys: %v", err)
	}
	if s := c.String(); !strings.Contains(s, "SECRETS_KEYS=2 key(s) ****") || strings.Contains(s, k1) || strings.Contains(s, k2) {
		t.Errorf("summary %q, want SECRETS_KEYS=2 key(s) **** and no key", s)
	}
	if got := c.Fate(Worker)["SECRETS_KEYS"]; got != c.SecretsKeys.SealID() || got == "" {
		t.Errorf("fate SECRETS_KEYS = %q, want the sealing key's id", got)
	}
	for v, why := range map[string]string{
		"not-base64!":    "key 1 is not base64",
		k1 + ",c2hvcnQ=": "key 2 is 5 bytes",
		k1 + "," + k1:    "key 2 is listed twice",
	} {
		_, err := Load(env(map[string]string{"SECRETS_KEYS": v}))
		if err == nil || !strings.Contains(err.Error(), "SECRETS_KEYS: "+why) {
			t.Errorf("SECRETS_KEYS=%q: %v, want it to say %q", v, err, "SECRETS_KEYS: "+why)
		}
	}
}
