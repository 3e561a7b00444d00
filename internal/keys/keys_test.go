package keys

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/retryd/retryd/internal/partition"
)

// Only a script of the first partition can ring the workers' doorbell
// (the first partition's list): it alone shares the doorbell's cluster
// slot.
func TestRingableBellSharesTheScriptsSlot(t *testing.T) {
	for _, p := range []int{1, 4} {
		parts, err := partition.New(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, tag := range parts.Tags() {
			bell := RingableBell(parts, tag)
			switch {
			case i > 0 && bell != "":
				t.Errorf("%d partitions: partition %d rings %q, in slot %d, not its own %d", p, i, bell,
					partition.Slot(parts.Tag(0)), partition.Slot(tag))
			case i == 0 && bell != Bell(parts.Tag(0)):
				t.Errorf("%d partitions: partition 0 rings %q, want the workers' doorbell %q", p, bell, Bell(parts.Tag(0)))
			}
		}
	}
}

// keys is a leaf: it imports nothing of retryd but internal/partition (and
// what that imports), so that record, flow and waiting can all share it
// without depending on one another.
func TestKeysIsALeaf(t *testing.T) {
	const module = "github.com/retryd/retryd/"
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	allowed := map[string]bool{module + "internal/keys": true, module + "internal/partition": true}
	pout, err := exec.Command("go", "list", "-deps", "../partition").Output()
	if err != nil {
		t.Fatalf("go list -deps ../partition: %v", err)
	}
	for _, d := range strings.Fields(string(pout)) {
		allowed[d] = true
	}
	if !strings.Contains(string(out), module+"internal/keys\n") || !strings.Contains(string(pout), module+"internal/partition\n") {
		t.Fatalf("go list -deps listed %d packages here and %d for partition: is it run in the right directory?", len(deps), len(allowed))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, module) && !allowed[d] {
			t.Errorf("internal/keys depends on %s", d)
		}
	}
}

// The names are data in Redis: a deployment's keys stay where they were
// across versions, so each layout is pinned here (the values are those
// record built before the names moved to this package).
func TestNamesKeepTheirLayout(t *testing.T) {
	first := func(a, _ string) string { return a }
	fairLine, _, _, _ := FlowFair("host:443")
	endpointState, _, _, _ := FlowEndpoint("t/https://a:443")
	slots, _, _ := FlowParallelism("k")
	_, _, _, queueSeq := FlowQueue("q")
	_, _, cutTurns := FlowCut("k")
	for _, c := range []struct{ got, want string }{
		{Partition("retryd"), "{retryd}:"},
		{Timer("retryd"), "{retryd}:timer"},
		{TimerMover("p1"), "{p1}:timer:mover"},
		{TimerChannel, "retryd:timer"},
		{Parked("retryd"), "{retryd}:parked"},
		{Bell("retryd"), "{retryd}:bell"},
		{Tenants, "{retryd}:tenants"},
		{fairLine, "{retryd-flow:5b1f6f76bd796da5}:line"},
		{endpointState, "{retryd-flow:c1d9353ca10ef6f4}:state"},
		{slots, "{retryd-flow:13fbd79c3d390e5d}:slots"},
		{queueSeq, "{retryd-flow:2bf5181456d95eda}:seq"},
		{cutTurns, "{retryd-flow:ab30468e04bc1e6a}:turns"},
		{first(FlowRate("k")), Flow("k", "turn")},
		{first(FlowControl("k")), Flow("k", "ctl")},
		{FlowWorkers, "{retryd-flows}:workers"},
		{FlowPaused, "{retryd-flows}:paused"},
		{FlowEndpoints, "{retryd-flows}:endpoints"},
		{FlowHandOpened("t"), "{retryd-flows}:hand-opened:t"},
		{FlowWorker("w"), "{retryd-flows}:w:w"},
		{FlowWorkerEndpoints("w"), "{retryd-flows}:we:w"},
		{Lines, "{retryd-flows}:lines"},
		{LineField(LinePar, "k:1"), "par:k:1"},
	} {
		if c.got != c.want {
			t.Errorf("name %q, want %q", c.got, c.want)
		}
	}
	if kind, name, ok := ParseLineField(LineField(LineCut, "a:b")); !ok || kind != LineCut || name != "a:b" {
		t.Errorf("ParseLineField(LineField(cut, a:b)) = %q, %q, %v", kind, name, ok)
	}
}
