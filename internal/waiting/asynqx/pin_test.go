package asynqx

import (
	"crypto/sha1"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This package knows asynq's private layout of one version: the build must
// use exactly that version. (A test binary's runtime/debug build info
// lists no dependencies, so the module graph is asked.)
func TestAsynqVersionIsThePinnedOne(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "github.com/hibiken/asynq").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/hibiken/asynq: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != Version {
		t.Fatalf("the build uses asynq %s; internal/waiting/asynqx knows the layout of %s: check every fact in it "+
			"(key names, the scripts' fingerprints, the task hash's fields) against the new version, then move Version", got, Version)
	}
}

// The scripts the doorbell recognises are read from asynq's source as the
// build uses it: a script whose text changed no longer matches its
// fingerprint.
func TestFingerprints(t *testing.T) {
	dir := filepath.Join(asynqDir(t), "internal", "rdb")
	found := map[string]string{}
	fs := token.NewFileSet()
	for _, name := range []string{"rdb.go", "inspect.go"} {
		file, err := parser.ParseFile(fs, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatalf("read asynq's scripts: %v (run go mod download)", err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Values) != 1 || len(vs.Names) != 1 {
				return true
			}
			call, ok := vs.Values[0].(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "NewScript" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			src, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			sum := sha1.Sum([]byte(src))
			found[vs.Names[0].Name] = hex.EncodeToString(sum[:])
			return true
		})
	}
	for name, want := range Scripts {
		if got, ok := found[name]; !ok {
			t.Errorf("asynq %s has no script %s", Version, name)
		} else if got != want {
			t.Errorf("asynq %s's %s has fingerprint %s, the doorbell knows %s", Version, name, got, want)
		}
	}
}

// Stranded's notion of a silent worker rests on asynq's lease length and
// heartbeat interval, read here from asynq's source as the build uses it.
func TestLeaseFacts(t *testing.T) {
	dir := asynqDir(t)
	for file, fact := range map[string]*regexp.Regexp{
		"internal/rdb/rdb.go": regexp.MustCompile(`const LeaseDuration = 30 \* time\.Second`),
		"server.go":           regexp.MustCompile(`newHeartbeater\(heartbeaterParams\{[^}]*interval:\s*5 \* time\.Second`),
		"heartbeat.go":        regexp.MustCompile(`ExtendLease\(qname, ids\.\.\.\)`),
	} {
		src, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("read asynq's %s: %v (run go mod download)", file, err)
		}
		if !fact.Match(src) {
			t.Errorf("asynq %s's %s no longer says %s: check LeaseDuration, HeartbeatEvery and Silent", Version, file, fact)
		}
	}
	if LeaseDuration != 30*time.Second || HeartbeatEvery != 5*time.Second {
		t.Errorf("LeaseDuration %v, HeartbeatEvery %v: not what asynq %s uses", LeaseDuration, HeartbeatEvery, Version)
	}
}

// asynqDir is the source directory of the asynq version the build uses.
func asynqDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "github.com", "hibiken", "asynq@"+Version)
}
