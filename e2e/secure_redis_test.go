package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
)

// retryd on a 3-master cluster with requirepass and an ACL user
// (REDIS_USERNAME, REDIS_PASSWORD): the same deliveries as on an open
// cluster; a wrong password fails the start with what to fix.
func TestRedisClusterWithACLUser(t *testing.T) {
	t.Parallel()
	sec := redistest.NewSecure(t, false)
	addrs := redistest.StartSecureCluster(t, 3, sec)
	cluster := "REDIS_CLUSTER_ADDRS=" + strings.Join(addrs, ",")
	r := redistest.StartServer(t, redistest.Options{}) // unused by the programs; keeps startStackOn's shape
	s := startStackOn(t, r, 2, cluster, "REDIS_USERNAME="+sec.User, "REDIS_PASSWORD="+sec.UserPassword, "SWEEP_INTERVAL=1s")
	clusterDeliveries(t, s)
	for _, env := range [][]string{
		{cluster, "REDIS_USERNAME=" + sec.User, "REDIS_PASSWORD=wrong"},
		{cluster}, // no credentials at all
	} {
		startRefused(t, env, "wrong or missing credentials")
	}
}

// retryd on a TLS-only cluster whose certificate a private CA signed
// (REDIS_TLS, REDIS_TLS_CA_FILE), with a password; without the CA the
// start fails saying the certificate is not trusted, and without TLS it
// fails rather than hang.
func TestRedisClusterWithTLS(t *testing.T) {
	t.Parallel()
	sec := redistest.NewSecure(t, true)
	addrs := redistest.StartSecureCluster(t, 3, sec)
	cluster := "REDIS_CLUSTER_ADDRS=" + strings.Join(addrs, ",")
	creds := []string{cluster, "REDIS_USERNAME=" + sec.User, "REDIS_PASSWORD=" + sec.UserPassword}
	r := redistest.StartServer(t, redistest.Options{})
	s := startStackOn(t, r, 2, append(creds, "REDIS_TLS=true", "REDIS_TLS_CA_FILE="+sec.CA, "SWEEP_INTERVAL=1s")...)
	clusterDeliveries(t, s)
	startRefused(t, append(creds, "REDIS_TLS=true"), "not trusted")
}

// A single TLS node: rediss:// with the user and password in REDIS_URL,
// and the private CA in REDIS_TLS_CA_FILE.
func TestRedisTLSNode(t *testing.T) {
	t.Parallel()
	sec := redistest.NewSecure(t, true)
	srv := redistest.StartSecureServer(t, sec)
	s := startStackOn(t, srv, 1, "REDIS_TLS_CA_FILE="+sec.CA)
	dest := newDestination(t)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"backoffMs":100}`, dest.script("/tls", 503, 200)))
	if doc := s.waitTerminal(t, id, 20*time.Second); doc["status"] != "completed" {
		t.Errorf("over TLS: %v", doc["status"])
	}
	startRefused(t, []string{"REDIS_URL=" + srv.URL}, "not trusted")
	wrong := strings.Replace(srv.URL, sec.UserPassword, "wrong", 1)
	startRefused(t, []string{"REDIS_URL=" + wrong, "REDIS_TLS_CA_FILE=" + sec.CA}, "wrong or missing credentials")
}

// startRefused runs the API and the worker with env and wants each to
// exit non-zero within 20 s, saying want.
func startRefused(t *testing.T, env []string, want string) {
	t.Helper()
	for _, prog := range []string{bin.api, bin.worker} {
		cmd := exec.Command(prog)
		cmd.Env = append(os.Environ(), append([]string{fmt.Sprintf("PORT=%d", freePort(t)), "ALLOW_PRIVATE_TARGETS=true"}, env...)...)
		done := make(chan error, 1)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(out.String(), want) {
				t.Errorf("%s with %v: exit %v, want a failed start saying %q:\n%s", prog, env, err, want, out.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s with %v still runs after 20 s; want a failed start saying %q:\n%s", prog, env, want, out.String())
		}
	}
}

// Sentinel with passwords: an ACL user on the master and replica
// (REDIS_USERNAME, REDIS_PASSWORD) and the sentinels' own password
// (REDIS_SENTINEL_PASSWORD).
func TestRedisSentinelWithPasswords(t *testing.T) {
	t.Parallel()
	sec := redistest.NewSecure(t, false)
	sn := redistest.StartSecureSentinel(t, sec, "sentinel-pw")
	sentinel := []string{"REDIS_SENTINEL_ADDRS=" + sn.SentinelAddr, "REDIS_SENTINEL_MASTER=" + sn.MasterName}
	env := append(sentinel, "REDIS_USERNAME="+sec.User, "REDIS_PASSWORD="+sec.UserPassword, "REDIS_SENTINEL_PASSWORD=sentinel-pw")
	s := startStackOn(t, sn.Master, 1, env...)
	dest := newDestination(t)
	id := s.submit(t, fmt.Sprintf(`{"url":%q,"backoffMs":100}`, dest.script("/sentinel", 503, 200)))
	if doc := s.waitTerminal(t, id, 20*time.Second); doc["status"] != "completed" {
		t.Errorf("through Sentinel with passwords: %v", doc["status"])
	}
	startRefused(t, append(sentinel, "REDIS_USERNAME="+sec.User, "REDIS_PASSWORD=wrong", "REDIS_SENTINEL_PASSWORD=sentinel-pw"),
		"wrong or missing credentials")
	startRefused(t, append(sentinel, "REDIS_USERNAME="+sec.User, "REDIS_PASSWORD="+sec.UserPassword, "REDIS_SENTINEL_PASSWORD=wrong"),
		"wrong or missing credentials")
}
