// Package redistest starts a private, real redis-server for a test, on a
// free port in the test's temp dir, so tests never share data. Set
// REDIS_URL to use a server you run yourself instead (its data is flushed).
package redistest

import (
	"bufio"
	"context"
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

	"github.com/redis/go-redis/v9"
)

// InstallHint is the message given when redis-server is missing.
const InstallHint = "redis-server is not installed: install it with `apt-get install -y redis-server` " +
	"(or `brew install redis`), or set REDIS_URL to a Redis ≥ 7 the tests may flush"

// Server is a running redis-server.
type Server struct {
	Addr string
	URL  string
	Dir  string
	Port int

	t    testing.TB
	cmd  *exec.Cmd
	args []string
	// answers says whether the server is up (nil: a plain PING); a node
	// with a password or TLS needs a real client.
	answers func(addr string) bool
}

// Options tune the server.
type Options struct {
	// Persistent turns on AOF with fsync on every write (crash tests).
	Persistent bool
	// Dir, when set, is the data directory (to restart on the same data).
	Dir string
	// Port, when set, is the port to listen on (to restart on the same address).
	Port int
}

// Start returns a Redis for t: REDIS_URL when set (flushed first), else a
// new redis-server that is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("REDIS_URL: %v", err)
		}
		c := redis.NewClient(opt)
		defer c.Close()
		if err := c.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("flush REDIS_URL %s: %v", u, err)
		}
		return &Server{Addr: opt.Addr, URL: u, t: t}
	}
	return StartServer(t, Options{})
}

// StartServer always starts a new redis-server, even with REDIS_URL set.
func StartServer(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	s := &Server{Dir: dir, t: t}
	s.args = []string{"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--daemonize", "no",
		"--maxmemory-policy", "noeviction", "--logfile", filepath.Join(dir, "redis.log")}
	if o.Persistent {
		s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		s.args = append(s.args, "--appendonly", "no")
	}
	port := o.Port
	for try := 0; ; try++ {
		if o.Port == 0 {
			port = freePort(t)
		}
		if err := s.launch(bin, port); err == nil {
			break
		} else if try >= 4 || o.Port != 0 {
			t.Fatalf("start redis-server: %v", err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) launch(bin string, port int) error {
	return s.launchOn(bin, port, strconv.Itoa(port))
}

// launchOn starts the server with plain port plain ("0": none, for a TLS
// node whose address is port).
func (s *Server) launchOn(bin string, port int, plain string) error {
	args := append([]string{"--port", plain}, s.args...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.Port = cmd, port
	s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.URL = "redis://" + s.Addr + "/0"
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start: %s", port, s.logTail())
		default:
		}
		if up := s.answers; (up == nil && ping(s.Addr)) || (up != nil && up(s.Addr)) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("redis-server on port %d did not answer within 10s: %s", port, s.logTail())
}

// ping reports whether a Redis at addr answers PING with PONG (and is not
// still loading its data).
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	for i := 0; i < 200 && ping(s.Addr); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	s.cmd = nil
}

// Restart starts the server again on the same port and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatal(InstallHint)
	}
	if err := s.launch(bin, s.Port); err != nil {
		s.t.Fatalf("restart redis-server: %v", err)
	}
}

// Pid is the server's process id (0 for a server from REDIS_URL).
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Client returns a go-redis client for the server, closed with the test.
func (s *Server) Client() *redis.Client {
	opt, err := redis.ParseURL(s.URL)
	if err != nil {
		s.t.Fatalf("parse %s: %v", s.URL, err)
	}
	opt.Protocol = 2 // as retryd's own clients (internal/app)
	c := redis.NewClient(opt)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
