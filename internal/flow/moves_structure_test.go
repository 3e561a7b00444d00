package flow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flow reaches the owner of waiting in one place: no non-test file but
// moves.go calls a Mover's method, however the value is named.
func TestOnlyMovesReachesTheOwner(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, call := range ownerCalls(t, name, string(src)) {
			if name != "moves.go" {
				t.Errorf("%s: calls the owner (%s); hand moves to move (moves.go) instead", name, call)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d files: is the test run in internal/flow?", checked)
	}
}

// The check finds calls of the owner's methods in a planted file, through
// a field, a parameter or a local of any name.
func TestOwnerCallCheckFindsPlantedCalls(t *testing.T) {
	for name, src := range map[string]string{
		"field.go": `package flow
func (c *core) f(ctx context.Context) { c.mover.Apply(ctx, []Move{Now("id")}) }`,
		"param.go": `package flow
func f(ctx context.Context, m Mover) { m.Apply(ctx, nil) }`,
		"renamed.go": `package flow
func (c *core) f(ctx context.Context) { o := c.mover; o.Pending(ctx, "id") }`,
	} {
		if len(ownerCalls(t, name, src)) == 0 {
			t.Errorf("planted %s: not found", name)
		}
	}
}

// ownerCalls are the calls in src of a method the Mover interface has.
func ownerCalls(t *testing.T, name, src string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Apply" || sel.Sel.Name == "Pending") {
			found = append(found, sel.Sel.Name)
		}
		return true
	})
	return found
}
