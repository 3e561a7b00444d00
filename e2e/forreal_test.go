package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's "Running it for real" works as written, with the programs
// the other tests run: Redis with the durability the README promises two
// paragraphs later, an API and a worker started by its very commands (on
// free ports), /readyz answering what its comment says, the admin key it
// sets reaching the dashboard and /metrics (and the tenant key refused
// there), and the API listening on every interface, as the text says.
func TestRunningItForRealWorksAsWritten(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t, "for-real")
	if len(cmds) != 5 || !strings.HasPrefix(cmds[0], "redis-server ") || cmds[1] != "go build -o bin/ ./cmd/..." ||
		!strings.Contains(cmds[2], "bin/api") || !strings.Contains(cmds[3], "bin/worker") || !strings.HasPrefix(cmds[4], "curl ") {
		t.Fatalf("the commands changed; this test knows redis-server, go build, api, worker, curl: %q", cmds)
	}
	// The promise: a 202 is on disk only with appendfsync always, and no
	// key of it is evicted.
	for _, want := range []string{"--appendonly yes", "--appendfsync always", "--maxmemory-policy noeviction"} {
		if !strings.Contains(cmds[0], want) {
			t.Errorf("the README's Redis lacks %s, which the promise of a 202 below it needs: %s", want, cmds[0])
		}
	}
	readme, _ := os.ReadFile("../README.md")
	section := string(readme)[strings.Index(string(readme), "## Running it for real"):]
	section = section[:strings.Index(section, "\n## ")]
	if !strings.Contains(section, "listens on every interface") {
		t.Error("the README does not say that the API listens on every interface")
	}
	for _, c := range []string{"./cmd/api", "./cmd/worker"} {
		if _, err := os.Stat(filepath.Join("..", c)); err != nil {
			t.Errorf("go build ./cmd/... builds no %s", c)
		}
	}

	redisPort, apiPort := freePort(t), freePort(t)
	dir := t.TempDir()
	ports := strings.NewReplacer("6379", fmt.Sprint(redisPort), "localhost:3000", fmt.Sprintf("localhost:%d", apiPort),
		"--dir /tmp", "--dir "+dir, "bin/api", bin.api, "bin/worker", bin.worker)
	start := func(name, cmd string) *syncBuffer {
		cmd, _, _ = strings.Cut(cmd, " #")
		cmd = strings.TrimSuffix(strings.TrimSpace(cmd), "&")
		out := &syncBuffer{}
		c := exec.Command("bash", "-c", "exec env "+ports.Replace(cmd))
		c.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", apiPort))
		c.Dir, c.Stdout, c.Stderr = dir, out, out
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			}
			if t.Failed() {
				t.Logf("--- %s ---\n%s", name, out)
			}
		})
		return out
	}
	start("redis", cmds[0])
	api := start("api", cmds[2])
	start("worker", cmds[3])

	curl := exec.Command("bash", "-c", ports.Replace(cmds[4]))
	var ready string
	waitFor(t, time.Minute, "/readyz to answer as the README's comment says", func() bool {
		out, err := curl.Output()
		curl = exec.Command("bash", "-c", ports.Replace(cmds[4]))
		ready = string(out)
		return err == nil && strings.Contains(ready, `"status":"ready"`) && strings.Contains(ready, `"workers":1`)
	})
	if !regexp.MustCompile(`"addr":"(\[::\]|0\.0\.0\.0):` + fmt.Sprint(apiPort) + `"`).MatchString(api.String()) {
		t.Errorf("the API does not listen on every interface:\n%s", api)
	}

	admin := regexp.MustCompile(`ADMIN_KEYS=(\S+)`).FindStringSubmatch(cmds[2])
	tenant := regexp.MustCompile(`API_KEYS=[^:\s]+:(\S+)`).FindStringSubmatch(cmds[2])
	if admin == nil || tenant == nil {
		t.Fatalf("the API's command sets no ADMIN_KEYS or no tenant:key in API_KEYS: %s", cmds[2])
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	for _, path := range []string{"/metrics", "/monitoring/"} {
		if a := call(t, "GET", base+path, "", "Authorization", "Bearer "+admin[1]); a.status != 200 {
			t.Errorf("GET %s with the README's admin key: %d %s", path, a.status, a.raw)
		}
		if a := call(t, "GET", base+path, "", "Authorization", "Bearer "+tenant[1]); a.status != 403 {
			t.Errorf("GET %s with the README's tenant key: %d; want 403", path, a.status)
		}
	}
	if a := call(t, "GET", base+"/requests", "", "Authorization", "Bearer "+tenant[1]); a.status != 200 {
		t.Errorf("GET /requests with the README's tenant key: %d %s", a.status, a.raw)
	}
}
