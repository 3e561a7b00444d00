package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster starts a Redis Cluster of n masters (no replicas) and
// returns their addresses.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	return StartSecureCluster(t, n, Secure{})
}

// Sentinel is a master, a replica and one sentinel watching them.
type Sentinel struct {
	Master, Replica *Server
	SentinelAddr    string
	MasterName      string
}

// StartSentinel starts a persistent master (AOF, fsync always), a replica
// of it, and a sentinel that fails over after one second of silence.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	master := StartServer(t, Options{Persistent: true})
	replica := startWith(t, Options{Persistent: true}, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	waitOnline(t, master)
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	content := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor retryd 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds retryd 1000\nsentinel failover-timeout retryd 5000\n"+
		"sentinel parallel-syncs retryd 1\n", port, dir, master.Port)
	if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("redis-cli", "-p", strconv.Itoa(port), "sentinel", "replicas", "retryd").Output()
		if strings.Contains(string(out), strconv.Itoa(replica.Port)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel does not see the replica after 20s: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &Sentinel{Master: master, Replica: replica, SentinelAddr: addr, MasterName: "retryd"}
}

func startWith(t testing.TB, o Options, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	s := &Server{Dir: t.TempDir(), t: t}
	s.args = []string{"--bind", "127.0.0.1", "--dir", s.Dir, "--save", "", "--maxmemory-policy", "noeviction",
		"--logfile", filepath.Join(s.Dir, "redis.log")}
	if o.Persistent {
		s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always")
	}
	s.args = append(s.args, extra...)
	for try := 0; ; try++ {
		err := s.launch(bin, freePort(t))
		if err == nil {
			break
		}
		if try == 4 {
			t.Fatalf("start redis-server: %v", err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

// waitOnline waits until the master reports a replica whose link is up.
func waitOnline(t testing.TB, master *Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := exec.Command("redis-cli", "-p", strconv.Itoa(master.Port), "info", "replication").Output()
		if strings.Contains(string(out), "state=online") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not online after 30s: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterPort returns a free port whose cluster-bus port (+10000) is free too.
func clusterPort(t testing.TB) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := freePort(t)
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}
