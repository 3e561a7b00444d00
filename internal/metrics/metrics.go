// Package metrics serves retryd's Prometheus metrics. Each program builds
// one Metrics on its own registry (no global state). Two kinds of series:
//
//   - cluster-wide counters, kept in Redis by the scripts that record the
//     events (attempts, their duration and lateness, redrives, callbacks,
//     sweeper repairs) plus asynq's queue metrics and index sizes: every
//     process reports the same totals (aggregate with max, not sum);
//   - per-process series: submissions answered by this API process, and
//     Go/process metrics.
package metrics

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
)

// Source is what the cluster-wide series are read from.
type Source interface {
	Stats(ctx context.Context) (map[string]int64, error)
	StatusCount(ctx context.Context, tenant string, status record.Status) (int64, error)
	// Tenants bound the tenant label: the configured tenants that stored
	// a record, and the default one.
	Tenants(ctx context.Context) ([]string, error)
}

// Metrics is one process's registry.
type Metrics struct {
	Registry    *prometheus.Registry
	Submissions *prometheus.CounterVec // result: accepted, replayed, rejected, unavailable
}

// New builds the registry: per-process series, and the cluster-wide ones
// read from src and asynq's inspector at scrape time.
func New(src Source, inspector *asynq.Inspector) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Submissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retryd_submissions_total", Help: "Requests submitted to this API process by any route, by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.Submissions, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if src != nil {
		reg.MustRegister(&cluster{src: src})
	}
	if inspector != nil {
		reg.MustRegister(asynqmetrics.NewQueueMetricsCollector(inspector))
	}
	return m
}

// Handler serves the registry in Prometheus format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// The results of a submission.
const (
	Accepted    = "accepted"
	Replayed    = "replayed"
	Rejected    = "rejected"
	Unavailable = "unavailable"
)

// Submission counts one answered submission; nil-safe.
func (m *Metrics) Submission(result string) {
	if m != nil {
		m.Submissions.WithLabelValues(result).Inc()
	}
}

var (
	descAttempts = prometheus.NewDesc("retryd_attempts_total",
		"Delivery attempts by outcome and failure class (cluster-wide).", []string{"outcome", "failure_class"}, nil)
	descDuration = prometheus.NewDesc("retryd_attempt_duration_seconds",
		"Duration of delivery attempts (cluster-wide).", nil, nil)
	descLateness = prometheus.NewDesc("retryd_attempt_lateness_seconds",
		"How long after the start it was owed (its due time, or the turn a wait ended at) an attempt started: the workers' delay, never time spent waiting (cluster-wide).", nil, nil)
	descRedrives = prometheus.NewDesc("retryd_redrives_total",
		"Redrives of failed requests by source, api or dashboard (cluster-wide).", []string{"source"}, nil)
	descCallbacks = prometheus.NewDesc("retryd_callback_attempts_total",
		"Outcome callback attempts by resulting state (cluster-wide).", []string{"status"}, nil)
	descSweeper = prometheus.NewDesc("retryd_sweeper_repairs_total",
		"Requests the sweeper handed back to the workers, by kind (cluster-wide).", []string{"kind"}, nil)
	descEventsGivenUp = prometheus.NewDesc("retryd_operator_events_given_up_total",
		"Operator events (OPERATOR_EVENTS_URL) given up after their retries, or dropped from a full buffer (cluster-wide).", nil, nil)
	descRequests = prometheus.NewDesc("retryd_requests",
		"Requests by status and tenant (retained records).", []string{"status", "tenant"}, nil)
	descDLQ = prometheus.NewDesc("retryd_dlq_size", "Failed requests in the dead-letter queue, of every tenant.", nil, nil)
)

// cluster reads the Redis counters at scrape time.
type cluster struct{ src Source }

func (c *cluster) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAttempts, descDuration, descLateness, descRedrives, descCallbacks, descSweeper, descEventsGivenUp, descRequests, descDLQ} {
		ch <- d
	}
}

func (c *cluster) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := c.src.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descAttempts, err)
		return
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts := strings.Split(k, "|")
		v := float64(stats[k])
		switch {
		case parts[0] == "att" && len(parts) == 3:
			ch <- prometheus.MustNewConstMetric(descAttempts, prometheus.CounterValue, v, parts[1], parts[2])
		case parts[0] == "rdr" && len(parts) == 2:
			ch <- prometheus.MustNewConstMetric(descRedrives, prometheus.CounterValue, v, parts[1])
		case parts[0] == "cb" && len(parts) == 2:
			ch <- prometheus.MustNewConstMetric(descCallbacks, prometheus.CounterValue, v, parts[1])
		case parts[0] == "sweep" && len(parts) == 2:
			ch <- prometheus.MustNewConstMetric(descSweeper, prometheus.CounterValue, v, parts[1])
		case k == "events|given_up":
			ch <- prometheus.MustNewConstMetric(descEventsGivenUp, prometheus.CounterValue, v)
		}
	}
	ch <- histogram(descDuration, stats, "dur", record.DurationBuckets)
	ch <- histogram(descLateness, stats, "late", record.LatenessBuckets)
	tenants, err := c.src.Tenants(ctx)
	if err != nil {
		return
	}
	for _, st := range record.Statuses {
		var total int64
		for _, t := range tenants {
			n, err := c.src.StatusCount(ctx, t, st)
			if err != nil {
				continue
			}
			total += n
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.GaugeValue, float64(n), string(st), t)
		}
		if st == record.Failed {
			ch <- prometheus.MustNewConstMetric(descDLQ, prometheus.GaugeValue, float64(total))
		}
	}
}

// histogram builds a cumulative histogram from per-bucket counts
// "<prefix>|<i>" and the sum "<prefix>_sum_ms".
func histogram(desc *prometheus.Desc, stats map[string]int64, prefix string, bounds []float64) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += uint64(stats[prefix+"|"+strconv.Itoa(i)])
		buckets[b] = cum
	}
	count := cum + uint64(stats[prefix+"|"+strconv.Itoa(len(bounds))])
	return prometheus.MustNewConstHistogram(desc, count, float64(stats[prefix+"_sum_ms"])/1000, buckets)
}

// FlowKeys is how many flow-control keys get series of their own; the rest
// are summed under key="other", so a deployment with many tenants keeps a
// bounded number of series.
const FlowKeys = 10

var (
	descFlowInFlight = prometheus.NewDesc("retryd_flow_in_flight",
		"Attempts in flight per flow-control key (the busiest keys; the rest under key=\"other\").", flowLabels, nil)
	descFlowWaiting = prometheus.NewDesc("retryd_flow_waiting",
		"Requests parked for a flow-control slot in the last second, per key.", flowLabels, nil)
	descFlowRate = prometheus.NewDesc("retryd_flow_effective_rate",
		"The rate per second adaptive backpressure holds a key to (0: not held), summed over workers.", flowLabels, nil)
	descFlowRecent = prometheus.NewDesc("retryd_flow_recent_attempts",
		"Attempts of the last one to two minutes per key, by what they said about its load.", append(flowLabels, "outcome"), nil)
)

// flowLabels name a flow-control key's series: the key as its tenant named
// it, and the tenant ("" for the other bucket). The key's internal name
// joins the two with a control character, which a label value must not
// hold.
var flowLabels = []string{"key", "tenant"}

// flowLabelValues are the key and tenant labels of s. Every key is a
// tenant's, a destination's own host:port key too (flow keeps one per
// tenant), so its owner is the tenant that qualifies it.
func flowLabelValues(s flow.KeyStats, other bool) (string, string) {
	if other {
		return s.Key, ""
	}
	owner, name := tenant.Split(s.Key)
	return names.Clean(name), owner
}

// FlowSource reads the flow-control keys, busiest first.
type FlowSource func(ctx context.Context) ([]flow.KeyStats, error)

// RegisterFlows adds the per-key flow-control series, read at scrape time.
func (m *Metrics) RegisterFlows(read FlowSource) { m.Registry.MustRegister(flows{read}) }

type flows struct{ read FlowSource }

func (f flows) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFlowInFlight, descFlowWaiting, descFlowRate, descFlowRecent} {
		ch <- d
	}
}

func (f flows) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := f.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descFlowInFlight, err)
		return
	}
	shown := stats[:min(len(stats), FlowKeys)]
	if len(stats) > FlowKeys {
		other := flow.KeyStats{Key: "other"}
		for _, s := range stats[FlowKeys:] {
			other.InFlight += s.InFlight
			other.Parked += s.Parked
			other.EffectiveRate += s.EffectiveRate
			other.Succeeded += s.Succeeded
			other.Overloaded += s.Overloaded
		}
		shown = append(append([]flow.KeyStats(nil), shown...), other)
	}
	for i, s := range shown {
		key, owner := flowLabelValues(s, i == FlowKeys)
		ch <- prometheus.MustNewConstMetric(descFlowInFlight, prometheus.GaugeValue, float64(s.InFlight), key, owner)
		ch <- prometheus.MustNewConstMetric(descFlowWaiting, prometheus.GaugeValue, float64(s.Parked), key, owner)
		ch <- prometheus.MustNewConstMetric(descFlowRate, prometheus.GaugeValue, s.EffectiveRate, key, owner)
		ch <- prometheus.MustNewConstMetric(descFlowRecent, prometheus.GaugeValue, float64(s.Succeeded), key, owner, "succeeded")
		ch <- prometheus.MustNewConstMetric(descFlowRecent, prometheus.GaugeValue, float64(s.Overloaded), key, owner, "overloaded")
	}
}

var (
	descEndpoints = prometheus.NewDesc("retryd_endpoints",
		"Endpoints whose breaker is open or half_open (its probe out), of every tenant.", []string{"state"}, nil)
	descEndpointWaiting = prometheus.NewDesc("retryd_endpoint_waiting",
		"Requests waiting for an open endpoint to close, per endpoint that is not closed (the first ten by waiters; the rest under endpoint=\"other\").",
		[]string{"endpoint", "tenant", "state"}, nil)
)

// EndpointSource reads the breakers of the endpoints not closed.
type EndpointSource func(ctx context.Context) ([]flow.EndpointInfo, error)

// RegisterEndpoints adds the breaker series, read at scrape time.
func (m *Metrics) RegisterEndpoints(read EndpointSource) { m.Registry.MustRegister(endpoints{read}) }

type endpoints struct{ read EndpointSource }

func (e endpoints) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEndpoints
	ch <- descEndpointWaiting
}

func (e endpoints) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	infos, err := e.read(ctx)
	if err != nil {
		// No breaker series this scrape; the others still answer.
		return
	}
	count := map[string]int{flow.EndpointOpen: 0, flow.EndpointHalfOpen: 0}
	var held []flow.EndpointInfo
	for _, in := range infos {
		if in.State == flow.EndpointClosed {
			continue
		}
		count[in.State]++
		held = append(held, in)
	}
	for _, st := range []string{flow.EndpointOpen, flow.EndpointHalfOpen} {
		ch <- prometheus.MustNewConstMetric(descEndpoints, prometheus.GaugeValue, float64(count[st]), st)
	}
	sort.SliceStable(held, func(i, j int) bool { return held[i].Waiting > held[j].Waiting })
	var other int64
	for i, in := range held {
		if i >= FlowKeys {
			other += in.Waiting
			continue
		}
		owner, ep := tenant.Split(in.Name)
		// Cleaned: an endpoint stored before names were checked may hold a
		// control character, which a label would carry raw to every scraper.
		ch <- prometheus.MustNewConstMetric(descEndpointWaiting, prometheus.GaugeValue, float64(in.Waiting), names.Clean(ep), names.Clean(owner), in.State)
	}
	if len(held) > FlowKeys {
		ch <- prometheus.MustNewConstMetric(descEndpointWaiting, prometheus.GaugeValue, float64(other), "other", "", "")
	}
}
