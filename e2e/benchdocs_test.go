package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/benchmarks.md's figures come from its recipes: every `make bench…`
// command its text names as how a figure was produced is a line of the
// "as run" block under Reproducing (a bare target, as a section's heading
// names it, is run by some line), and every setting that block gives is
// one the Makefile or the benchmarks read.
func TestBenchmarkFiguresNameTheirRecipes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "## Reproducing")
	if i < 0 {
		t.Fatal("docs/benchmarks.md has no Reproducing section")
	}
	text, repro := doc[:i], doc[i:]
	block := regexp.MustCompile("(?s)The figures above, as run:\\s*```sh\\n(.*?)```").FindStringSubmatch(repro)
	if block == nil {
		t.Fatal("docs/benchmarks.md has no \"The figures above, as run:\" block")
	}
	normal := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var lines []string
	cur := ""
	for _, line := range strings.Split(block[1], "\n") {
		line, _, _ = strings.Cut(line, "#")
		if strings.HasSuffix(strings.TrimSpace(line), "\\") {
			cur += strings.TrimSuffix(strings.TrimSpace(line), "\\") + " "
			continue
		}
		if l := normal(cur + line); l != "" {
			lines = append(lines, l)
		}
		cur = ""
	}
	recipe := regexp.MustCompile("`([^`]*make bench[^`]*)`")
	for _, line := range strings.Split(text, "\n") {
		heading := strings.HasPrefix(line, "#")
		for _, m := range recipe.FindAllStringSubmatch(line, -1) {
			r := normal(m[1])
			// A heading names a target: some line runs it.
			runs := func(l string) bool { return l == r || strings.HasSuffix(l, " "+r) }
			if !slices.Contains(lines, r) && !(heading && slices.ContainsFunc(lines, runs)) {
				t.Errorf("the figures name the recipe %q, which is not a line of the \"as run\" block: %q", m[1], lines)
			}
		}
	}
	var code strings.Builder
	for _, f := range append([]string{"../Makefile"}, globFiles(t, "*_test.go")...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code.Write(b)
	}
	for _, m := range regexp.MustCompile(`\b([A-Z][A-Z0-9_]+)=`).FindAllStringSubmatch(block[1], -1) {
		if !strings.Contains(code.String(), `"`+m[1]+`"`) && !strings.Contains(code.String(), m[1]+"=") && !readEnv(m[1]) {
			t.Errorf("the \"as run\" block sets %s, which neither the Makefile nor a benchmark reads", m[1])
		}
	}
}

func globFiles(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
