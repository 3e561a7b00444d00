package tuning

import (
	"testing"
	"time"
)

type inner struct{ A, B time.Duration }

type outer struct {
	X, Y  time.Duration
	In    inner
	Other int
}

// Zero durations take the default, at any depth; set ones and other
// fields stay.
func TestWithDefaultsFillsOnlyZeroDurations(t *testing.T) {
	def := outer{X: 1, Y: 2, In: inner{A: 3, B: 4}, Other: 9}
	got := WithDefaults(outer{Y: 20, In: inner{B: 40}}, def)
	want := outer{X: 1, Y: 20, In: inner{A: 3, B: 40}}
	if got != want {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
}
