package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartCluster starts a Redis Cluster of n masters (no replicas) and
// returns their addresses.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	return StartSecureCluster(t, n, Secure{})
}

// Sentinel is a master, a replica and the sentinels watching them.
type Sentinel struct {
	Master, Replica *Server
	// SentinelAddr is the first sentinel's address; SentinelAddrs all.
	SentinelAddr  string
	SentinelAddrs []string
	MasterName    string
}

// StartSentinel starts a persistent master (AOF, fsync always), a replica
// of it, and a sentinel that fails over after one second of silence.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	return StartSentinels(t, 1)
}

// StartSentinels is StartSentinel with n sentinels and a quorum of a
// majority of them, as a production deployment runs (three, quorum two).
func StartSentinels(t testing.TB, n int) *Sentinel {
	t.Helper()
	master := StartServer(t, Options{Persistent: true})
	replica := startWith(t, Options{Persistent: true}, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	waitOnline(t, master)
	sn := &Sentinel{Master: master, Replica: replica, MasterName: "retryd"}
	for i := 0; i < n; i++ {
		sn.SentinelAddrs = append(sn.SentinelAddrs, startSentinel(t, master.Port, n/2+1))
	}
	sn.SentinelAddr = sn.SentinelAddrs[0]
	for _, addr := range sn.SentinelAddrs {
		// Each sentinel must know the replica (to promote it) and, with
		// several, its peers (to reach the quorum) before a test kills
		// anything.
		waitSentinel(t, addr, "replicas", strconv.Itoa(replica.Port), 1)
		waitSentinel(t, addr, "sentinels", "runid", n-1)
	}
	return sn
}

// startSentinel starts one sentinel (redis-server --sentinel: no package
// beyond redis-server) monitoring the master on masterPort.
func startSentinel(t testing.TB, masterPort, quorum int) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal(InstallHint)
	}
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, "sentinel.conf")
	content := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor retryd 127.0.0.1 %d %d\n"+
		"sentinel down-after-milliseconds retryd 1000\nsentinel failover-timeout retryd 5000\n"+
		"sentinel parallel-syncs retryd 1\n", port, dir, filepath.Join(dir, "sentinel.log"), masterPort, quorum)
	if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// waitSentinel waits until the sentinel at addr lists, for SENTINEL
// <what> retryd, at least want entries containing mark.
func waitSentinel(t testing.TB, addr, what, mark string, want int) {
	t.Helper()
	if want <= 0 {
		return
	}
	_, port, _ := strings.Cut(addr, ":")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := exec.Command("redis-cli", "-p", port, "sentinel", what, "retryd").Output()
		if strings.Count(string(out), mark) >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel %s does not list %d %s after 30s: %s", addr, want, what, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Failovers is how many failovers the sentinel at addr has seen (its
// config-epoch for the master: 0 before the first).
func (sn *Sentinel) Failovers(addr string) int {
	_, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", "-p", port, "sentinel", "master", sn.MasterName).Output()
	if err != nil {
		return -1
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "config-epoch" {
			n, _ := strconv.Atoi(f[i+1])
			return n
		}
	}
	return -1
}

// MasterAddr is the master's address as the sentinel at addr gives it.
func (sn *Sentinel) MasterAddr(addr string) string {
	_, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", "-p", port, "sentinel", "get-master-addr-by-name", sn.MasterName).Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return ""
	}
	return f[0] + ":" + f[1]
}

// StartReplica starts a replica of master (no sentinel) and waits until
// its link is up.
func StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	r := startWith(t, Options{}, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	waitOnline(t, master)
	return r
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

// Pause stops the server (SIGSTOP) until the returned resume is called,
// or the test ends: a replica that stops confirming writes.
func (s *Server) Pause(t testing.TB) (resume func()) {
	t.Helper()
	if err := syscall.Kill(s.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(s.Pid(), syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}
