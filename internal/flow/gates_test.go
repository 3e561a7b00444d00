package flow

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestPackageDocListsTheGates: the package doc names Admit's gates in the
// order the code runs them.
func TestPackageDocListsTheGates(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^//   - (\w+):`).FindAllSubmatch(src, -1) {
		documented = append(documented, string(m[1]))
	}
	var code []string
	for _, g := range gates {
		code = append(code, g.name)
	}
	if !slices.Equal(documented, code) {
		t.Fatalf("the package doc lists the gates %v; Admit runs %v", documented, code)
	}
}
