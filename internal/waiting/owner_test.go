package waiting

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Only this package and those below it import asynq's private layout and
// the timer: nothing else in retryd moves a task between asynq's sets.
// (Tests elsewhere, e2e's, may read asynq's keys.)
func TestOnlyTheOwnerMovesTasks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	private := []string{"github.com/retryd/retryd/internal/waiting/asynqx", "github.com/retryd/retryd/internal/waiting/timer"}
	owner := filepath.Join(root, "internal", "waiting")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(path, owner+string(os.PathSeparator)) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, q := range private {
				if p == q {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s imports %s: move tasks through internal/waiting", rel, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files under %s: is the module root right?", checked, root)
	}
}
