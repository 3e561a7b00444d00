package record

import (
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
			case i == 0 && bell != BellKey(parts.Tag(0)):
				t.Errorf("%d partitions: partition 0 rings %q, want the workers' doorbell %q", p, bell, BellKey(parts.Tag(0)))
			}
		}
	}
}
