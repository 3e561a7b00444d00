package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/tenant"
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

// A tenant's flow-control key is named inside retryd with a control
// character between tenant and key; its series carry the two apart, and
// no label value holds a control character.
func TestFlowLabelValuesHoldNoControlCharacters(t *testing.T) {
	t.Parallel()
	stats := []flow.KeyStats{
		{Key: tenant.Qualify("acme", "acmeflow"), Named: true, InFlight: 3},
		{Key: "api.example.com:443", InFlight: 2},
		{Key: "old\x01key", Named: true, InFlight: 1}, // stored before names were checked
	}
	m := New(nil, nil)
	m.RegisterFlows(func(context.Context) ([]flow.KeyStats, error) { return stats, nil })
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				if names.ControlAt(l.GetValue()) >= 0 {
					t.Errorf("%s: label %s=%q holds a control character", f.GetName(), l.GetName(), l.GetValue())
				}
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "retryd_flow_in_flight" {
				got[labels["key"]] = labels["tenant"]
			}
		}
	}
	want := map[string]string{"acmeflow": "acme", "api.example.com:443": "default", "oldkey": "default"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("key→tenant of the series = %v, want %v", got, want)
	}
}

// Every flow series of a key carries its true tenant: a named key its
// owner's (a bare one the default tenant's), and a destination's own
// host:port key its tenant's, since flow keeps one per tenant: team-a's
// attempts to a host must not read as the default tenant's.
func TestFlowSeriesNameTheKeysTenant(t *testing.T) {
	t.Parallel()
	stats := []flow.KeyStats{
		{Key: tenant.Qualify("team-a", "orders"), Named: true, InFlight: 1, Succeeded: 4, Overloaded: 1},
		{Key: "orders", Named: true, Succeeded: 2},
		{Key: "hooks.example.com:443", Succeeded: 7},
		{Key: tenant.Qualify("team-a", "hooks.example.com:443"), Succeeded: 3},
	}
	m := New(nil, nil)
	m.RegisterFlows(func(context.Context) ([]flow.KeyStats, error) { return stats, nil })
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "retryd_flow_") {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "retryd_flow_recent_attempts" && labels["outcome"] == "succeeded" {
				got[labels["key"]+"|"+labels["tenant"]] = s.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{"orders|team-a": 4, "orders|default": 2, "hooks.example.com:443|default": 7, "hooks.example.com:443|team-a": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("retryd_flow_recent_attempts{outcome=succeeded} by key|tenant = %v, want %v", got, want)
	}
}

// The breaker series count the endpoints that are not closed, both states
// always present, and name each held endpoint apart from its tenant.
func TestEndpointSeriesCountWhatIsHeld(t *testing.T) {
	t.Parallel()
	infos := []flow.EndpointInfo{
		{Name: tenant.Qualify("acme", "https://api.example.com:443"), State: flow.EndpointOpen, Waiting: 7},
		{Name: "http://10.0.0.1:80", State: flow.EndpointClosed, Waiting: 0},
	}
	m := New(nil, nil)
	m.RegisterEndpoints(func(context.Context) ([]flow.EndpointInfo, error) { return infos, nil })
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			name := f.GetName()
			for _, l := range s.GetLabel() {
				name += "|" + l.GetName() + "=" + l.GetValue()
			}
			got[name] = s.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"retryd_endpoints|state=open":      1,
		"retryd_endpoints|state=half_open": 0,
		"retryd_endpoint_waiting|endpoint=https://api.example.com:443|state=open|tenant=acme": 7,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.Contains(k, "10.0.0.1") {
			t.Errorf("a closed endpoint has a series: %s", k)
		}
	}
}
