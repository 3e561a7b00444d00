package ids

import (
	"testing"
	"time"
)

func TestNewIsSortableByTimeAndValid(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_700_000_000_000)
	prev := ""
	for i := 0; i < 1000; i++ {
		id := New(base.Add(time.Duration(i) * time.Millisecond))
		if !Valid(id) {
			t.Fatalf("New made %q, which Valid rejects", id)
		}
		if id <= prev {
			t.Fatalf("id %q made later sorts before %q", id, prev)
		}
		prev = id
	}
}

// Ids made within one millisecond sort in the order they were made, and
// differ. Not parallel: the other tests' ids would be newer.
func TestNewWithinAMillisecondKeepsTheOrderMade(t *testing.T) {
	at := time.UnixMilli(4_000_000_000_000) // newer than any other test's
	prev := New(at)
	for range 1000 {
		id := New(at)
		if !Valid(id) || id[:Len-1] <= prev[:Len-1] {
			t.Fatalf("id %q made after %q in the same millisecond: valid %v, sorts after it without the last character (a partition's) %v",
				id, prev, Valid(id), id[:Len-1] > prev[:Len-1])
		}
		prev = id
	}
}

func TestValidRejectsOtherStrings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "short", "0123456789abcdefghjkX", "0123456789abcdefghji", "../../../../etc/pass", "0123456789ABCDEFGHJK"} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

// Prefix bounds the ids of a time: those made a millisecond before sort
// before it, those made at the time after it.
func TestPrefixBoundsTheIdsOfATime(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	p, before, made := Prefix(at), New(at.Add(-time.Millisecond)), New(at)
	if !(before < p && p < made) || made[:10] != p {
		t.Errorf("Prefix %q, an id of a millisecond before %q, of the time %q", p, before, made)
	}
}

func TestTimeIsWhenTheIdWasMade(t *testing.T) {
	at := time.UnixMilli(1_765_000_123_456)
	if got, ok := Time(New(at)); !ok || !got.Equal(at) {
		t.Errorf("Time of an id made at %v: %v %v", at, got, ok)
	}
	if _, ok := Time("not-an-id"); ok {
		t.Error("Time of a string that is no id")
	}
}
