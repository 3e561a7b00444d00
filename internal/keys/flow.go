package keys

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// Flow is part kind of the Redis state of flow-control name (a key's, or
// a line's: the functions below name every kind). A name's parts share
// its hashed tag, so its scripts run in one cluster slot.
func Flow(name, kind string) string {
	sum := sha1.Sum([]byte(name))
	return "{retryd-flow:" + hex.EncodeToString(sum[:8]) + "}:" + kind
}

// FlowParallelism is flow-control key k's parallelism: its slots by lease
// end, its line, and the requests handed a slot and not yet started.
func FlowParallelism(k string) (slots, wait, handed string) {
	return Flow(k, "slots"), Flow(k, "wait"), Flow(k, "handed")
}

// FlowRate is key k's rate: the next turn, and the turns given.
func FlowRate(k string) (next, given string) {
	return Flow(k, "turn"), Flow(k, "turns")
}

// FlowControl is an operator's settings on key k, and its waiters held
// while it is paused.
func FlowControl(k string) (ctl, paused string) {
	return Flow(k, "ctl"), Flow(k, "paused")
}

// FlowFair is a destination's (or a tenant's) fairness line: the line, the
// places of requests promoted from it, when each was handed over, and the
// places given to its tenants.
func FlowFair(lane string) (line, promoted, handed, tenants string) {
	n := LineField(LineFair, lane)
	return Flow(n, "line"), Flow(n, "promoted"), Flow(n, "handed"), Flow(n, "tenants")
}

// FlowCut is a cut key's line: the line, the waiters' places, and the
// turns given.
func FlowCut(k string) (line, places, turns string) {
	n := LineField(LineCut, k)
	return Flow(n, "line"), Flow(n, "places"), Flow(n, "turns")
}

// FlowQueue is queue name's (tenant-qualified) line, its parked requests,
// its settings, and its sequence of joins.
func FlowQueue(name string) (line, parked, meta, seq string) {
	n := "queue:" + name
	return Flow(n, "line"), Flow(n, "parked"), Flow(n, "meta"), Flow(n, "seq")
}

// FlowEndpoint is an endpoint's breaker state (a hash), its waiters' line,
// the flow-control keys of its waiters with parallelism (a hash: request
// id, key), and its waiters by when each began to wait (a sorted set:
// request id, ms), for endpoint name (tenant-qualified
// scheme://host:port).
func FlowEndpoint(name string) (state, line, keys, joined string) {
	n := "endpoint:" + name
	return Flow(n, "state"), Flow(n, "line"), Flow(n, "keys"), Flow(n, "joined")
}

// FlowWorkers lists the workers publishing flow-control figures by last
// publication (ms); FlowWorker is one worker's figures.
const FlowWorkers = "{retryd-flows}:workers"

// FlowPaused is the set of the flow-control keys an operator paused, so
// that GET /flows lists each with its waiters even while no worker
// publishes it.
const FlowPaused = "{retryd-flows}:paused"

// FlowEndpoints lists the endpoints that are not closed (field: the
// endpoint's tenant-qualified name, value "1"), for the lists that show
// them (GET /endpoints, the dashboard, metrics). A worker never reads it
// whole: it reads the state of the endpoint it delivers to.
const FlowEndpoints = "{retryd-flows}:endpoints"

// FlowHandOpened lists the endpoints tenant t opened by hand (field: the
// endpoint's tenant-qualified name, value: when it was listed, in ms),
// which ENDPOINT_LIMIT bounds.
func FlowHandOpened(t string) string { return "{retryd-flows}:hand-opened:" + t }

// FlowWorker is worker's published flow-control figures.
func FlowWorker(worker string) string { return "{retryd-flows}:w:" + worker }

// FlowWorkerEndpoints is worker's published endpoints used in the
// breaker's window: field, the endpoint's name; value, its attempts and
// failures.
func FlowWorkerEndpoints(worker string) string { return "{retryd-flows}:we:" + worker }

// Lines lists the flow-control lines that may hold waiters, of every kind,
// so that a worker that never saw a line (started since, or it was another
// worker's) gives its waiters turns or slots too, and hands on the slots
// of a dead worker when their leases end. Field: LineField(kind, name);
// value: what the kind needs to be served (a cut key's destination
// host:port, a parallelism key's parallelism, nothing for a fairness
// line).
const Lines = "{retryd-flows}:lines"

// The kinds of flow-control line Lines lists.
const (
	LineCut  = "cut"  // a cut key's (FlowCut)
	LineFair = "fair" // a destination's or a tenant's fairness line (FlowFair)
	LinePar  = "par"  // a flowControl key's parallelism line (FlowParallelism)
)

// LineField names line name of kind: its field in Lines, and the prefix
// of its own keys.
func LineField(kind, name string) string { return kind + ":" + name }

// ParseLineField reads a Lines field.
func ParseLineField(f string) (kind, name string, ok bool) { return strings.Cut(f, ":") }
