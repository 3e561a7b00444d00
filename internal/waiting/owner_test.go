package waiting

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Only internal/waiting makes a task sleep or run: the tree outside it
// (tests aside) imports neither asynq's private layout nor the timer, names
// no asynq key in Go or Lua, calls none of asynq's task-moving API, and
// writes no line but through the line library.
func TestOnlyTheOwnerMovesTasks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	found, checked, err := ownerViolations(root, filepath.Join(root, "internal", "waiting"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Error(v)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files under %s: is the module root right?", checked, root)
	}
}

// The check is not fooled: a planted file of each kind fails it.
func TestOwnerCheckFindsPlantedFiles(t *testing.T) {
	planted := map[string]string{
		"imports.go": `package p
import _ "github.com/retryd/retryd/internal/waiting/asynqx"`,
		"keys.go": `package p
const k = "asynq:{retryd}:scheduled"`,
		"keybuilt.go": `package p
func k(q string) string { return "asynq:{" + q + "}:" + "retry" }`,
		"runtask.go": `package p
import "github.com/hibiken/asynq"
func f(in *asynq.Inspector) error { return in.RunTask("retryd", "id") }`,
		"archive.go": `package p
import "github.com/hibiken/asynq"
func f(in *asynq.Inspector) error { return in.ArchiveTask("retryd", "id") }`,
		"delete.go": `package p
import "github.com/hibiken/asynq"
func f(in *asynq.Inspector) error { return in.DeleteTask("retryd", "id") }`,
		"later.go": `package p
import ("time"; "github.com/hibiken/asynq")
var o = asynq.ProcessIn(time.Minute)`,
		"at.go": `package p
import ("time"; "github.com/hibiken/asynq")
func f(c *asynq.Client, t *asynq.Task) { c.Enqueue(t, asynq.ProcessAt(time.Now())) }`,
		"zpop.go": `package p
import ("context"; "github.com/redis/go-redis/v9")
func f(rdb redis.UniversalClient, pausedLine string) { rdb.ZPopMin(context.Background(), pausedLine, 1) }`,
		"zadd.go": `package p
import ("context"; "github.com/redis/go-redis/v9")
func f(rdb redis.UniversalClient, line string) { rdb.ZAdd(context.Background(), line, redis.Z{Member: "id"}) }`,
		"asynq.lua": `-- Moves a task.
-- KEYS[1]: a set
redis.call("ZADD", "asynq:{retryd}:scheduled", 0, ARGV[1])`,
		"rawline.lua": `-- Joins a line by hand.
-- KEYS[1]: the key's waiting line (member: request id)
-- ARGV[1]: request id
redis.call("ZADD", KEYS[1], "NX", 0, ARGV[1])`,
		"rawpop.lua": `-- Takes from a line by hand.
-- KEYS[1]: the queue's line
-- KEYS[2]: its settings
return redis.call("ZPOPMIN", KEYS[1], 1)`,
	}
	for name, text := range planted {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		found, checked, err := ownerViolations(dir, filepath.Join(dir, "owner"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if checked != 1 || len(found) == 0 {
			t.Errorf("planted %s (checked %d files): not found", name, checked)
		}
	}
	// And the same files are fine inside the owner's tree.
	dir := t.TempDir()
	owner := filepath.Join(dir, "owner")
	if err := os.MkdirAll(owner, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range planted {
		if err := os.WriteFile(filepath.Join(owner, name), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if found, _, err := ownerViolations(dir, owner); err != nil || len(found) != 0 {
		t.Errorf("inside the owner's tree: %v, %v; want nothing", found, err)
	}
}

// asynqTaskMoves are asynq's calls that make a task run, sleep or go.
var asynqTaskMoves = map[string]bool{
	"RunTask": true, "ArchiveTask": true, "DeleteTask": true, "ProcessAt": true, "ProcessIn": true,
	"RunAllScheduledTasks": true, "RunAllRetryTasks": true, "RunAllArchivedTasks": true, "RunAllAggregatingTasks": true,
	"ArchiveAllPendingTasks": true, "ArchiveAllScheduledTasks": true, "ArchiveAllRetryTasks": true,
	"DeleteAllPendingTasks": true, "DeleteAllScheduledTasks": true, "DeleteAllRetryTasks": true,
	"DeleteAllArchivedTasks": true, "DeleteAllCompletedTasks": true,
}

// zWrites are go-redis's sorted-set writes; on a line key they bypass the
// line library.
var zWrites = map[string]bool{
	"ZAdd": true, "ZAddNX": true, "ZAddXX": true, "ZAddArgs": true, "ZIncrBy": true, "ZPopMin": true, "ZPopMax": true,
	"BZPopMin": true, "BZPopMax": true, "ZRem": true, "ZRemRangeByScore": true, "ZRemRangeByRank": true, "ZMPop": true,
}

// luaZWrite is a Lua sorted-set write on KEYS[n].
var luaZWrite = regexp.MustCompile(`redis\.call\(\s*"(?i:zadd|zincrby|zpopmin|zpopmax|zrem|zremrangebyscore|zremrangebyrank|zmpop)"\s*,\s*KEYS\[(\d+)\]`)

// luaLineKey is a script header's line of a KEYS entry that is a line.
var luaLineKey = regexp.MustCompile(`^--\s*KEYS\[(\d+)\]:[^;]*\bline\b`)

// ownerViolations lists what the files below root, outside owner, do that
// only the owner may, and how many files it checked.
func ownerViolations(root, owner string) (found []string, checked int, err error) {
	private := map[string]bool{"github.com/retryd/retryd/internal/waiting/asynqx": true,
		"github.com/retryd/retryd/internal/waiting/timer": true}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path == owner || (path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case strings.HasSuffix(path, "_test.go"):
			return nil
		case strings.HasSuffix(path, ".go"):
			checked++
			v, err := goViolations(path, private)
			for _, s := range v {
				found = append(found, rel+": "+s)
			}
			return err
		case strings.HasSuffix(path, ".lua"):
			checked++
			v, err := luaViolations(path)
			for _, s := range v {
				found = append(found, rel+": "+s)
			}
			return err
		}
		return nil
	})
	return found, checked, err
}

// goViolations are a Go file's imports of the owner's private packages,
// asynq key names in its strings, calls of asynq's task-moving API, and
// sorted-set writes on what it names a line.
func goViolations(path string, private map[string]bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); private[p] {
			out = append(out, fmt.Sprintf("imports %s: move tasks through internal/waiting", p))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && strings.Contains(s, "asynq:") {
				out = append(out, fmt.Sprintf("line %d names asynq's keys (%q): only internal/waiting/asynqx may", fset.Position(n.Pos()).Line, s))
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			line := fset.Position(n.Pos()).Line
			if asynqTaskMoves[sel.Sel.Name] {
				out = append(out, fmt.Sprintf("line %d calls %s: only internal/waiting moves a task", line, sel.Sel.Name))
			}
			if zWrites[sel.Sel.Name] && len(n.Args) > 1 && namesALine(n.Args[1]) {
				out = append(out, fmt.Sprintf("line %d writes a line with %s: only the line library (internal/flow/lines) may", line, sel.Sel.Name))
			}
		}
		return true
	})
	return out, nil
}

// namesALine says whether a key argument's expression names a line (a
// paused key's, a queue's, a fairness or parallelism line).
func namesALine(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if s := strings.ToLower(id.Name); strings.Contains(s, "line") || strings.Contains(s, "paused") || strings.Contains(s, "wait") {
				found = true
			}
		}
		return !found
	})
	return found
}

// luaViolations are a script's asynq key names (outside comments) and
// its sorted-set writes on a KEYS entry its header calls a line.
func luaViolations(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lineKeys := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if m := luaLineKey.FindStringSubmatch(text); m != nil {
			lineKeys[m[1]] = true
		}
		code, _, _ := strings.Cut(text, "--")
		if strings.Contains(code, "asynq:") {
			out = append(out, fmt.Sprintf("line %d names asynq's keys: only internal/waiting/asynqx may", n))
		}
		for _, m := range luaZWrite.FindAllStringSubmatch(code, -1) {
			if lineKeys[m[1]] {
				out = append(out, fmt.Sprintf("line %d writes line KEYS[%s] by hand: use the line library (internal/flow/lines)", n, m[1]))
			}
		}
	}
	return out, sc.Err()
}
