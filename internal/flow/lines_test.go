package flow

import (
	"context"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// Lines that older workers listed in the registries of each kind are
// adopted, and moved into the one registry.
func TestLinesOfTheOlderRegistriesAreAdoptedAndMoved(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c := newController(t, rdb, Config{Concurrency: 10}, &waker{}, clk)
	listed := map[string][2]string{ // kind -> name, value
		record.LineCut:  {"key-a", "a:443"},
		record.LineFair: {"b:443", ""},
		record.LinePar:  {"key-c", "3"},
	}
	for kind, l := range listed {
		if err := rdb.HSet(ctx, record.LegacyLinesKeys[kind], l[0], l[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.adoptLines(ctx)

	c.mu.Lock()
	cut, fair, par := c.keys["key-a"], c.hosts["b:443"], c.parLines["key-c"]
	c.mu.Unlock()
	if cut == nil || cut.lineSeen.IsZero() || fair == nil || fair.lineSeen.IsZero() || par == nil || par.parallelism != 3 {
		t.Errorf("adopted: cut %v, fair %v, par %v; want each line known", cut, fair, par)
	}
	for kind, l := range listed {
		if v, err := rdb.HGet(ctx, record.LinesKey, record.LineField(kind, l[0])).Result(); err != nil || v != l[1] {
			t.Errorf("%s line %s in the registry: %q, %v; want %q", kind, l[0], v, err, l[1])
		}
		if n, err := rdb.Exists(ctx, record.LegacyLinesKeys[kind]).Result(); err != nil || n != 0 {
			t.Errorf("the older %s registry still exists (%d, %v)", kind, n, err)
		}
	}
}
