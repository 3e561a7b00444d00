package waiting

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Lua script below the owner (asynqx's, the timer's) says at its top
// what it takes and what it answers, as internal/record's test asks of
// the scripts of internal/*/scripts: the KEYS and ARGV it uses, and
// Returns (a library prepended to scripts says it is one instead).
func TestEveryScriptHeaderListsKeysArgvAndReturns(t *testing.T) {
	files, err := filepath.Glob("*/scripts/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
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
