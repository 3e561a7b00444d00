package flow

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The package's shape is part of its contract: no type with more than
// maxMethods methods (a type that needs a table of contents is several),
// no non-test file over maxLines lines.
const (
	maxMethods = 25
	maxLines   = 500
)

// TestNoGodObject counts each type's methods (pointer or value receiver,
// exported or not) and each non-test file's lines, in flow and in its
// Redis I/O (flowdb).
func TestNoGodObject(t *testing.T) {
	fset := token.NewFileSet()
	methods := map[string]int{}
	for _, dir := range []string{".", "flowdb"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			path := filepath.Join(dir, name)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), "\n"); n > maxLines {
				t.Errorf("%s has %d lines, over %d", path, n, maxLines)
			}
			f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
					methods[dir+"."+receiverType(fn.Recv.List[0].Type)]++
					found++
				}
			}
		}
		if found == 0 {
			t.Fatalf("found no methods in %s: the test reads the wrong directory", dir)
		}
	}
	for typ, n := range methods {
		if n > maxMethods {
			t.Errorf("type %s has %d methods, over %d", typ, n, maxMethods)
		}
	}
}

// receiverType is the name of a receiver's type: T, *T, T[P] or *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// Flow decides and the owner acts: flow (its line library and its I/O
// too) imports nothing of internal/waiting, nor of internal/record,
// however deep: go list's dependencies, not the import lines alone.
func TestFlowImportsNothingOfTheOwner(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./lines", "./flowdb").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list -deps listed %d packages: is it run in the right directory?", len(deps))
	}
	for _, d := range deps {
		if d == "github.com/retryd/retryd/internal/waiting" || strings.HasPrefix(d, "github.com/retryd/retryd/internal/waiting/") {
			t.Errorf("flow depends on %s, the owner's", d)
		}
		if d == "github.com/retryd/retryd/internal/record" {
			t.Errorf("flow depends on %s: take shared names from internal/keys", d)
		}
	}
}

// Flow decides and flowdb talks to Redis: no non-test file of package
// flow calls go-redis or runs a script. go-redis may be named only as the
// client type handed to flowdb (a signature's redis.UniversalClient).
func TestFlowTalksToRedisOnlyThroughFlowdb(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		found, err := redisIO(name, src)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, f := range found {
			t.Errorf("%s: %s: Redis I/O belongs in internal/flow/flowdb", name, f)
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files: is the test run in internal/flow?", checked)
	}
}

// The check finds what it must: a go-redis command on a client, a script
// run, a pipeline, a go-redis value or function, and scripts loaded here.
func TestRedisIOCheckFindsPlantedCalls(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"a command on rdb", `rdb.Do(ctx, "ZREM", k, id)`, "Do"},
		{"a script run", `x.Run(ctx, rdb, keys)`, "Run"},
		{"a command on a field", `c.rdb.HGet(ctx, k, "f")`, "HGet"},
		{"a pipeline", `pipe := rdb.Pipeline(); pipe.Exec(ctx)`, "Pipeline"},
		{"a script by sha", `s.EvalSha(ctx, rdb, keys)`, "EvalSha"},
		{"a go-redis value", `_ = errors.Is(err, redis.Nil)`, "redis.Nil"},
		{"a go-redis function", `_ = redis.NewScript("return 1")`, "redis.NewScript"},
	} {
		src := fmt.Sprintf("package flow\n\nimport \"github.com/redis/go-redis/v9\"\n\nfunc f(rdb redis.UniversalClient) {\n\t%s\n}\n", c.body)
		found, err := redisIO("planted.go", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.ContainsFunc(found, func(f string) bool { return strings.Contains(f, c.want) }) {
			t.Errorf("%s (%s): found %q, want one naming %s", c.name, c.body, found, c.want)
		}
	}
	clean := "package flow\n\nimport \"github.com/redis/go-redis/v9\"\n\nfunc New(rdb redis.UniversalClient) *DB { return flowdb.New(rdb) }\n"
	if found, err := redisIO("clean.go", []byte(clean)); err != nil || len(found) > 0 {
		t.Errorf("a client handed to flowdb: found %q, %v; want nothing", found, err)
	}
	loads := "package flow\n\nimport \"github.com/retryd/retryd/internal/luascript\"\n\nvar s = luascript.Load(nil, \"\")\n"
	if found, _ := redisIO("loads.go", []byte(loads)); len(found) == 0 {
		t.Error("a file loading scripts passed")
	}
}

// redisTypes are the go-redis names flow may use: the client it hands to
// flowdb, in signatures.
var redisTypes = map[string]bool{"UniversalClient": true, "Cmdable": true}

// redisMethods are the calls that run commands or scripts, whatever they
// are called on.
var redisMethods = map[string]bool{"Run": true, "RunRO": true, "Eval": true, "EvalRO": true, "EvalSha": true,
	"EvalShaRO": true, "Do": true, "Process": true, "Exec": true, "Pipeline": true, "TxPipeline": true,
	"Pipelined": true, "TxPipelined": true, "Watch": true}

// clientNames are what a go-redis client or pipeline is called: any
// method called on one is a command.
var clientNames = map[string]bool{"rdb": true, "pipe": true, "tx": true, "client": true}

// redisIO lists the Redis I/O in a Go file: go-redis named other than
// as a client type, a command or script run, a method called on a client,
// and an import of the script loader.
func redisIO(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []string
	redisName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		switch {
		case path == "github.com/redis/go-redis/v9":
			redisName = "redis"
			if imp.Name != nil {
				redisName = imp.Name.Name
			}
		case path == "github.com/retryd/retryd/internal/luascript":
			found = append(found, "imports internal/luascript: scripts are loaded in flowdb")
		}
	}
	at := func(n ast.Node) string { return fmt.Sprintf("line %d", fset.Position(n.Pos()).Line) }
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && redisName != "" && id.Name == redisName && !redisTypes[n.Sel.Name] {
				found = append(found, fmt.Sprintf("%s names %s.%s", at(n), redisName, n.Sel.Name))
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch {
			case redisMethods[sel.Sel.Name]:
				found = append(found, fmt.Sprintf("%s calls %s", at(n), sel.Sel.Name))
			case clientNames[lastName(sel.X)]:
				found = append(found, fmt.Sprintf("%s calls %s on %s", at(n), sel.Sel.Name, lastName(sel.X)))
			}
		}
		return true
	})
	return found, nil
}

// lastName is the last name of x: rdb for rdb, c.rdb or c.core.rdb.
func lastName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}
