package waiting

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// goRedis is go-redis' module path; its packages are below it.
const goRedis = "github.com/redis/go-redis/v9"

// module is retryd's module path.
const module = "github.com/retryd/retryd"

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
	Export     string
	ImportMap  map[string]string
	Module     *struct{ Path string }
}

// tree is the module's packages, and an importer that reads every
// package's compiled export data (fast: no dependency is type-checked
// from source).
type tree struct {
	fset  *token.FileSet
	pkgs  []*listed // the module's own, sorted by path
	byPth map[string]*listed
	imp   types.ImporterFrom
}

var (
	treeOnce sync.Once
	theTree  *tree
	treeErr  error
)

// loadTree lists the module from root once per test binary, compiling
// what the build cache lacks (with the test binary's -race, so that the
// cache a test run filled serves it).
func loadTree(root string) (*tree, error) {
	treeOnce.Do(func() { theTree, treeErr = listTree(root) })
	return theTree, treeErr
}

func listTree(root string) (*tree, error) {
	args := []string{"list", "-deps", "-export", "-json=ImportPath,Dir,GoFiles,CgoFiles,Imports,Deps,Export,ImportMap,Module"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	t := &tree{fset: token.NewFileSet(), byPth: map[string]*listed{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := &listed{}
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		t.byPth[p.ImportPath] = p
		if p.Module != nil && p.Module.Path == module {
			t.pkgs = append(t.pkgs, p)
		}
	}
	sort.Slice(t.pkgs, func(i, j int) bool { return t.pkgs[i].ImportPath < t.pkgs[j].ImportPath })
	t.imp = importer.ForCompiler(t.fset, "gc", func(path string) (io.ReadCloser, error) {
		p := t.byPth[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	}).(types.ImporterFrom)
	return t, nil
}

// goRedisCalls are where the files of package path (parsed from their
// directory, plus planted: file name -> source) use a go-redis function
// or method: a call, or a method value that a call can be made of. Naming
// go-redis' types, or its variables (redis.Nil), is not a use.
func (t *tree) goRedisCalls(path string, planted map[string]string) ([]string, error) {
	p := t.byPth[path]
	if p == nil {
		return nil, fmt.Errorf("no package %s", path)
	}
	var files []*ast.File
	for _, f := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
		af, err := parser.ParseFile(t.fset, filepath.Join(p.Dir, f), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, af)
	}
	for name, src := range planted {
		af, err := parser.ParseFile(t.fset, filepath.Join(p.Dir, name), src, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, af)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: mapped{t.imp, p.ImportMap}}
	if _, err := conf.Check(path, t.fset, files, info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", path, err)
	}
	var out []string
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if !ok || fn.Pkg() == nil || !(fn.Pkg().Path() == goRedis || strings.HasPrefix(fn.Pkg().Path(), goRedis+"/")) {
			continue
		}
		pos := t.fset.Position(id.Pos())
		out = append(out, fmt.Sprintf("%s:%d uses %s", filepath.Base(pos.Filename), pos.Line, fn.FullName()))
	}
	sort.Strings(out)
	return out, nil
}

// dependsOnGoRedis says whether package p can reach go-redis at all.
func (p *listed) dependsOnGoRedis() bool {
	for _, d := range p.Deps {
		if d == goRedis {
			return true
		}
	}
	return false
}

// importsGoRedis says whether p imports a go-redis package itself.
func importsGoRedis(imports []string) bool {
	for _, i := range imports {
		if i == goRedis || strings.HasPrefix(i, goRedis+"/") {
			return true
		}
	}
	return false
}

// mapped resolves a package's imports through its ImportMap (vendoring).
type mapped struct {
	types.ImporterFrom
	m map[string]string
}

func (m mapped) Import(path string) (*types.Package, error) { return m.ImportFrom(path, "", 0) }

func (m mapped) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if to, ok := m.m[path]; ok {
		path = to
	}
	return m.ImporterFrom.ImportFrom(path, dir, mode)
}
