package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// quickStart is the README's quick start: its commands, continuation lines
// joined, comments dropped.
func quickStart(t *testing.T) []string { return readmeCommands(t, "quickstart") }

// readmeCommands are the commands of the README's sh block between
// <!-- mark --> and <!-- /mark -->, continuation lines joined, comments
// dropped.
func readmeCommands(t *testing.T, mark string) []string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- " + mark + " -->\\s*```sh\\n(.*?)```\\s*<!-- /" + mark + " -->").FindSubmatch(raw)
	if m == nil {
		t.Fatalf("README.md has no sh block between <!-- %s --> and <!-- /%s -->", mark, mark)
	}
	var cmds []string
	cur := ""
	for _, line := range strings.Split(string(m[1]), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\")
			continue
		}
		cmds = append(cmds, cur+line)
		cur = ""
	}
	return cmds
}

// syncBuffer is a process's output, read while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The README's quick start works as written, on a machine with no internet:
// its commands run in order (the first two are the servers of terminals 1
// and 2, on free ports instead of 3000 and 4000), and the request ends
// completed after the destination's two 503s.
func TestQuickStartWorksAsWritten(t *testing.T) {
	t.Parallel()
	cmds := quickStart(t)
	if len(cmds) != 4 || !strings.HasPrefix(cmds[0], "go run ./cmd/api -dev") || !strings.HasPrefix(cmds[1], "go run ./cmd/retryctl listen") {
		t.Fatalf("the quick start's commands changed; this test knows api -dev, listen, then client calls: %q", cmds)
	}
	apiPort, destPort := freePort(t), freePort(t)
	ports := strings.NewReplacer("localhost:3000", fmt.Sprintf("localhost:%d", apiPort), "127.0.0.1:4000", fmt.Sprintf("127.0.0.1:%d", destPort))
	root, _ := filepath.Abs("..")
	env := append(os.Environ(), fmt.Sprintf("PORT=%d", apiPort), fmt.Sprintf("RETRYD_URL=http://127.0.0.1:%d", apiPort))
	shell := func(cmd string, out *syncBuffer) *exec.Cmd {
		c := exec.Command("bash", "-c", "exec "+ports.Replace(cmd))
		c.Dir, c.Env, c.Stdout, c.Stderr = root, env, out, out
		// Its own process group: a stop reaches go run's child too.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}
	var outs [2]*syncBuffer
	for i, cmd := range cmds[:2] {
		outs[i] = &syncBuffer{}
		// The QStash dev listener's default port may be taken here: off.
		if i == 0 {
			cmd += " -qstash-dev="
		}
		c := shell(cmd, outs[i])
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGINT)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			}
			if t.Failed() {
				t.Logf("--- %s ---\n%s", cmds[i], outs[i])
			}
		})
	}
	// go run compiles first: a minute on a cold cache.
	waitFor(t, 3*time.Minute, "the API and the destination to listen", func() bool {
		return statusOf(fmt.Sprintf("http://127.0.0.1:%d/healthz", apiPort)) == 200 &&
			strings.Contains(outs[1].String(), "listening on")
	})
	var submitted syncBuffer
	if err := shell(cmds[2], &submitted).Run(); err != nil || !strings.Contains(submitted.String(), `"status":"pending"`) {
		t.Fatalf("%s: %v\n%s", cmds[2], err, submitted.String())
	}
	var list syncBuffer
	waitFor(t, 2*time.Minute, "retryctl list to show the request completed", func() bool {
		list = syncBuffer{}
		return shell(cmds[3], &list).Run() == nil && strings.Contains(list.String(), "completed")
	})
	dest := outs[1].String()
	if n503, n200 := strings.Count(dest, "-> 503"), strings.Count(dest, "-> 200"); n503 != 2 || n200 != 1 {
		t.Errorf("the destination printed %d 503s and %d 200s, want 2 and 1:\n%s", n503, n200, dest)
	}
}
