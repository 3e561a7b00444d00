package redistest

// Redis with credentials and TLS, as managed services run it: nodes with
// requirepass and an ACL user, TLS with a CA the test generates.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/testca"
)

// Secure is how a secured server or cluster is reached.
type Secure struct {
	// Password is requirepass (the default user's password).
	Password string
	// User and UserPassword are an ACL user with every permission.
	User, UserPassword string
	// CA, when set, is the PEM file of the CA that signed the nodes'
	// certificate: the nodes speak TLS only.
	CA string
	// cert and key are the nodes' certificate and key.
	cert, key string
}

// TLSConfig is a client configuration trusting the CA.
func (s Secure) TLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	if s.CA == "" {
		return nil
	}
	b, err := os.ReadFile(s.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// NewSecure returns credentials for a secured server, with a CA and a
// node certificate for 127.0.0.1 (generated in a temp dir) when tls.
func NewSecure(t testing.TB, withTLS bool) Secure {
	t.Helper()
	s := Secure{Password: "default-pw-" + strconv.Itoa(os.Getpid()), User: "retryd", UserPassword: "retryd-pw"}
	if withTLS {
		s.CA, s.cert, s.key = generateCA(t)
	}
	return s
}

// args are the redis-server arguments of s.
func (s Secure) args() []string {
	var a []string
	if s.Password != "" {
		a = append(a, "--requirepass", s.Password, "--masterauth", s.Password)
	}
	if s.User != "" {
		a = append(a, "--user", s.User, "on", ">"+s.UserPassword, "~*", "&*", "+@all")
	}
	if s.CA != "" {
		// The TLS port replaces the plain one (launch's --port).
		a = append(a, "--tls-cert-file", s.cert, "--tls-key-file", s.key, "--tls-ca-cert-file", s.CA,
			"--tls-auth-clients", "no", "--tls-cluster", "yes", "--tls-replication", "yes")
	}
	return a
}

// cliArgs are redis-cli's arguments to reach a node of s.
func (s Secure) cliArgs() []string {
	var a []string
	if s.Password != "" {
		a = append(a, "-a", s.Password, "--no-auth-warning")
	}
	if s.CA != "" {
		a = append(a, "--tls", "--cacert", s.CA)
	}
	return a
}

// answers says whether a node of s at addr answers PING.
func (s Secure) answers(t testing.TB) func(addr string) bool {
	conf := s.TLSConfig(t)
	return func(addr string) bool {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: s.Password, TLSConfig: conf,
			DialTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	}
}

// launchSecure starts a node of s on a free port (pair, for a cluster
// node) with the extra arguments.
func launchSecure(t testing.TB, s Secure, cluster bool, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	dir := t.TempDir()
	srv := &Server{Dir: dir, t: t, answers: s.answers(t)}
	srv.args = append([]string{"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log")}, extra...)
	base := append(srv.args, s.args()...)
	for try := 0; ; try++ {
		port := freePort(t)
		if cluster {
			port = clusterPort(t)
		}
		srv.args = base
		if s.CA != "" {
			// TLS only: the TLS port is the address; no plain port.
			srv.args = append(base[:len(base):len(base)], "--tls-port", strconv.Itoa(port))
			err = srv.launchOn(bin, port, "0")
		} else {
			err = srv.launch(bin, port)
		}
		if err == nil {
			break
		}
		if try == 9 {
			t.Fatalf("start a secured redis-server: %v", err)
		}
	}
	t.Cleanup(srv.Kill)
	return srv
}

// StartSecureServer starts a single node with s's credentials (and TLS).
// Its URL carries the password, rediss:// for TLS.
func StartSecureServer(t testing.TB, s Secure) *Server {
	t.Helper()
	srv := launchSecure(t, s, false)
	scheme := "redis"
	if s.CA != "" {
		scheme = "rediss"
	}
	srv.URL = scheme + "://" + s.User + ":" + s.UserPassword + "@" + srv.Addr + "/0"
	return srv
}

// StartSecureCluster starts a Redis Cluster of n masters with s's
// credentials (and TLS) and returns their addresses.
func StartSecureCluster(t testing.TB, n int, s Secure) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		dir := t.TempDir()
		srv := launchSecure(t, s, true, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "2000")
		addrs[i] = srv.Addr
	}
	args := append(s.cliArgs(), "--cluster", "create")
	args = append(append(args, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must see the cluster ok: one that has not heard of the
	// slot assignment yet answers CLUSTERDOWN.
	for _, addr := range addrs {
		deadline := time.Now().Add(20 * time.Second)
		for {
			host, port, _ := net.SplitHostPort(addr)
			out, _ := exec.Command("redis-cli", append(s.cliArgs(), "-h", host, "-p", port, "cluster", "info")...).Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ok after 20s: %s", addr, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return addrs
}

// generateCA writes a CA and a certificate it signs for 127.0.0.1 and
// localhost (server and client use: the cluster bus speaks TLS too).
func generateCA(t testing.TB) (ca, cert, key string) {
	t.Helper()
	issued, err := testca.Issue("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", issued.CA), write("node.pem", issued.Cert), write("node.key", issued.Key)
}

// StartSecureSentinel starts a master with s's credentials, a replica of
// it and a sentinel with its own password (sentinelPassword) watching
// them.
func StartSecureSentinel(t testing.TB, s Secure, sentinelPassword string) *Sentinel {
	t.Helper()
	master := launchSecure(t, s, false, "--appendonly", "yes", "--appendfsync", "always")
	replica := launchSecure(t, s, false, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	cli := func(port int, pw string, args ...string) string {
		a := append([]string{"-p", strconv.Itoa(port), "-a", pw, "--no-auth-warning"}, args...)
		out, _ := exec.Command("redis-cli", a...).Output()
		return string(out)
	}
	waitUntil(t, "the replica to be online", func() bool {
		return strings.Contains(cli(master.Port, s.Password, "info", "replication"), "state=online")
	})
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	content := "port " + strconv.Itoa(port) + "\nbind 127.0.0.1\ndir " + dir + "\nrequirepass " + sentinelPassword +
		"\nsentinel monitor retryd 127.0.0.1 " + strconv.Itoa(master.Port) + " 1\nsentinel auth-pass retryd " + s.Password +
		"\nsentinel down-after-milliseconds retryd 1000\nsentinel failover-timeout retryd 5000\n"
	if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitUntil(t, "the sentinel to see the replica", func() bool {
		return strings.Contains(cli(port, sentinelPassword, "sentinel", "replicas", "retryd"), strconv.Itoa(replica.Port))
	})
	return &Sentinel{Master: master, Replica: replica, SentinelAddr: "127.0.0.1:" + strconv.Itoa(port), MasterName: "retryd"}
}

// waitUntil polls cond for up to 20 s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
