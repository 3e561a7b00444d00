package partition

import (
	"testing"
	"time"

	"github.com/retryd/retryd/internal/ids"
)

// Redis's own reference values for CRC16 slots.
func TestSlotIsRedisClusterKeyslot(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]int{"123456789": 12739, "foo": 12182, "bar": 5061, "retryd": Slot("retryd")} {
		if got := Slot(tag); got != want {
			t.Errorf("Slot(%q) = %d, want %d", tag, got, want)
		}
	}
}

func TestTagsSpreadNearTheirTargetSlots(t *testing.T) {
	t.Parallel()
	for _, p := range []int{2, 3, 6, 12, 32} {
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i := 0; i < p; i++ {
			target := (2*i + 1) * Slots / (2 * p)
			d := Slot(s.Tag(i)) - target
			if d < 0 {
				d = -d
			}
			if d > Slots/(4*p) {
				t.Errorf("P=%d partition %d: tag %s at slot %d, target %d", p, i, s.Tag(i), Slot(s.Tag(i)), target)
			}
			if seen[s.Tag(i)] {
				t.Errorf("P=%d: tag %s twice", p, s.Tag(i))
			}
			seen[s.Tag(i)] = true
		}
	}
	// P = 6 on 3 masters of equal ranges: two partitions each.
	s, _ := New(6)
	per := map[int]int{}
	for i := 0; i < 6; i++ {
		per[Slot(s.Tag(i))*3/Slots]++
	}
	if per[0] != 2 || per[1] != 2 || per[2] != 2 {
		t.Errorf("P=6 over 3 masters: %v, want 2 each", per)
	}
}

func TestOnePartitionIsTodaysLayout(t *testing.T) {
	t.Parallel()
	s := One()
	if s.Len() != 1 || s.Tag(0) != "retryd" {
		t.Fatalf("P=1: %v", s.Tags())
	}
	id := ids.New(time.Now())
	if s.OfID(id) != 0 || s.OfKey("k") != 0 {
		t.Error("P=1 routes somewhere else than partition 0")
	}
}

func TestIDsAndKeysTellTheirPartition(t *testing.T) {
	t.Parallel()
	s, _ := New(6)
	now := time.Now()
	hit := map[int]bool{}
	for i := 0; i < 200; i++ {
		id := s.NewID(now, "")
		if !ids.Valid(id) {
			t.Fatalf("NewID made an invalid id %q", id)
		}
		hit[s.OfID(id)] = true
	}
	if len(hit) != 6 {
		t.Errorf("ids without a key land in %d of 6 partitions", len(hit))
	}
	for _, key := range []string{"order-1", "order-2", "x"} {
		id := s.NewID(now, key)
		if s.OfID(id) != s.OfKey(key) {
			t.Errorf("key %q: id in partition %d, key picks %d", key, s.OfID(id), s.OfKey(key))
		}
	}
	if _, err := New(0); err == nil {
		t.Error("New(0) accepted")
	}
	if _, err := New(Max + 1); err == nil {
		t.Error("New(33) accepted")
	}
}

// A request made from another (a resend) is in its partition, so one
// script writes both.
func TestNewIDInIsInThatPartition(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, n := range []int{1, 6, Max} {
		s, _ := New(n)
		for p := range n {
			id := s.NewIDIn(now, p)
			if !ids.Valid(id) || s.OfID(id) != p {
				t.Errorf("%d partitions: NewIDIn(%d) = %q, valid %v, in partition %d", n, p, id, ids.Valid(id), s.OfID(id))
			}
		}
	}
}
