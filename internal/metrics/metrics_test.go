package metrics

import (
	"context"
	"fmt"
	"testing"

	"github.com/retryd/retryd/internal/flow"
)

// Flow-control series stay bounded: the FlowKeys busiest keys, and the
// rest summed under key="other".
func TestFlowSeriesAreBoundedWithAnOtherBucket(t *testing.T) {
	t.Parallel()
	var stats []flow.KeyStats
	for i := range FlowKeys + 5 {
		stats = append(stats, flow.KeyStats{Key: fmt.Sprintf("k%02d", i), InFlight: 100 - i, Succeeded: 1})
	}
	m := New(nil, nil)
	m.RegisterFlows(func(context.Context) ([]flow.KeyStats, error) { return stats, nil })
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "retryd_flow_in_flight" {
			continue
		}
		keys := map[string]float64{}
		for _, s := range f.GetMetric() {
			keys[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
		if len(keys) != FlowKeys+1 {
			t.Errorf("%d keys, want %d and other: %v", len(keys), FlowKeys, keys)
		}
		// k10..k14 are summed: 90+89+88+87+86.
		if keys["other"] != 440 || keys["k00"] != 100 {
			t.Errorf("other %v, k00 %v", keys["other"], keys["k00"])
		}
		return
	}
	t.Error("no retryd_flow_in_flight series")
}
