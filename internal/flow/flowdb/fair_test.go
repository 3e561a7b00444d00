package flowdb

import (
	"slices"
	"testing"
)

// fair_next's reply is read strictly: a bad one is an error, never a
// panic or a misread.
func TestParseFairTakeRejectsBadReplies(t *testing.T) {
	got, err := parseFairTake([]string{"3", "2", "1", "s", "a", "b"})
	if err != nil || got.Left != 3 || got.Handed != 2 || !slices.Equal(got.Stale, []string{"s"}) || !slices.Equal(got.IDs, []string{"a", "b"}) {
		t.Fatalf("parseFairTake = %+v, %v", got, err)
	}
	for _, bad := range [][]string{nil, {"1"}, {"1", "0"}, {"x", "0", "0"}, {"1", "x", "0"}, {"1", "0", "x"}, {"1", "0", "-1"}, {"1", "0", "2", "s"}} {
		if _, err := parseFairTake(bad); err == nil {
			t.Errorf("parseFairTake(%q) accepted a bad reply", bad)
		}
	}
}
