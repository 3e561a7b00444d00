package waiting

import (
	"os/exec"
	"strings"
	"testing"
)

// The owner shares Redis names with record through internal/keys, not by
// importing record: no package of this tree depends on internal/record,
// however deep (flow, whose moves the owner makes, included). go list's
// graph, not the import lines alone.
func TestWaitingImportsNoRecord(t *testing.T) {
	const (
		module = "github.com/retryd/retryd/"
		record = module + "internal/record"
	)
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}",
		".", "./asynqx", "./timer").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	roots := []string{module + "internal/waiting", module + "internal/waiting/asynqx", module + "internal/waiting/timer"}
	for _, r := range roots {
		if _, ok := imports[r]; !ok {
			t.Fatalf("go list -deps listed %d packages, not %s: is it run in the right directory?", len(imports), r)
		}
	}
	if _, ok := imports[module+"internal/keys"]; !ok {
		t.Fatal("the owner does not depend on internal/keys: does the check still look at the right tree?")
	}
	// Walk the graph from the roots; via names the path to a package, so
	// that a failure says which import brought record in.
	via := map[string]string{}
	todo := append([]string(nil), roots...)
	for _, r := range roots {
		via[r] = r
	}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		for _, d := range imports[p] {
			if _, seen := via[d]; seen {
				continue
			}
			via[d] = via[p] + " → " + d
			if d == record {
				t.Errorf("the owner depends on internal/record: %s", via[d])
				continue
			}
			todo = append(todo, d)
		}
	}
}
