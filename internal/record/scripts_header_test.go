package record

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Lua script of retryd's own is a file of its own: none is written
// inline in Go, where its header would go unchecked.
func TestNoScriptIsWrittenInline(t *testing.T) {
	inline := regexp.MustCompile("redis\\.NewScript\\(`")
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if inline.Match(b) {
				t.Errorf("%s writes a Lua script inline: give it a file in scripts/", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every Lua script of retryd's own says at its top what it takes and what
// it answers: the KEYS and ARGV it uses, and Returns (a library prepended
// to scripts says it is one instead).
func TestEveryScriptHeaderListsKeysArgvAndReturns(t *testing.T) {
	files, err := filepath.Glob("../*/scripts/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	below, err := filepath.Glob("../*/*/scripts/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, below...)
	if len(files) < 30 || len(below) < 8 {
		t.Fatalf("found %d scripts: is the glob right?", len(files))
	}
	uses := regexp.MustCompile(`\b(KEYS|ARGV)\[`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var header, body []string
		inHeader := true
		for _, l := range strings.Split(string(b), "\n") {
			if inHeader && strings.HasPrefix(l, "--") {
				header = append(header, l)
				continue
			}
			inHeader = false
			body = append(body, l)
		}
		h, code := strings.Join(header, "\n"), strings.Join(body, "\n")
		if len(header) == 0 {
			t.Errorf("%s: no header comment", f)
			continue
		}
		if strings.Contains(h, "A library, not a script") {
			continue
		}
		for _, m := range uses.FindAllStringSubmatch(code, -1) {
			if !strings.Contains(h, m[1]+"[") {
				t.Errorf("%s uses %s but its header lists none", f, m[1])
				break
			}
		}
		if !strings.Contains(h, "Returns") {
			t.Errorf("%s: its header says nothing of what it Returns", f)
		}
	}
}
