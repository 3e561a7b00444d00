package flow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
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
// exported or not) and each non-test file's lines.
func TestNoGodObject(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxLines {
			t.Errorf("%s has %d lines, over %d", name, n, maxLines)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				methods[receiverType(fn.Recv.List[0].Type)]++
			}
		}
	}
	if len(methods) == 0 {
		t.Fatal("found no methods: the test reads the wrong directory")
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

// Flow decides and the owner acts: flow (its line library too) imports
// nothing of internal/waiting, however deep: go list's dependencies, not
// the import lines alone.
func TestFlowImportsNothingOfTheOwner(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./lines").Output()
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
	}
}
