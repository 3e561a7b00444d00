package record

import (
	rediskeys "github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
)

// record's names for the keys it shares with waiting and flow, which
// internal/keys defines (see there for what each holds). They stay so that
// callers that reach them through record keep compiling while they move
// to internal/keys; each is the leaf's, never a second definition.

// TimerKey is keys.Timer.
func TimerKey(tag string) string { return rediskeys.Timer(tag) }

// TimerMoverKey is keys.TimerMover.
func TimerMoverKey(tag string) string { return rediskeys.TimerMover(tag) }

// TimerChannel is keys.TimerChannel.
const TimerChannel = rediskeys.TimerChannel

// ParkedKey is keys.Parked.
func ParkedKey(tag string) string { return rediskeys.Parked(tag) }

// BellKey is keys.Bell.
func BellKey(tag string) string { return rediskeys.Bell(tag) }

// RingableBell is keys.RingableBell.
func RingableBell(parts partition.Set, tag string) string { return rediskeys.RingableBell(parts, tag) }

// TenantsKey is keys.Tenants.
const TenantsKey = rediskeys.Tenants

// FlowKey is keys.Flow.
func FlowKey(name, kind string) string { return rediskeys.Flow(name, kind) }

// FlowParallelismKeys is keys.FlowParallelism.
func FlowParallelismKeys(k string) (slots, wait, handed string) { return rediskeys.FlowParallelism(k) }

// FlowRateKeys is keys.FlowRate.
func FlowRateKeys(k string) (next, given string) { return rediskeys.FlowRate(k) }

// FlowControlKeys is keys.FlowControl.
func FlowControlKeys(k string) (ctl, paused string) { return rediskeys.FlowControl(k) }

// FlowFairKeys is keys.FlowFair.
func FlowFairKeys(lane string) (line, promoted, handed, tenants string) {
	return rediskeys.FlowFair(lane)
}

// FlowCutKeys is keys.FlowCut.
func FlowCutKeys(k string) (line, places, turns string) { return rediskeys.FlowCut(k) }

// FlowQueueKeys is keys.FlowQueue.
func FlowQueueKeys(name string) (line, parked, meta, seq string) { return rediskeys.FlowQueue(name) }

// FlowEndpointKeys is keys.FlowEndpoint.
func FlowEndpointKeys(name string) (state, line, keys, joined string) {
	return rediskeys.FlowEndpoint(name)
}

// FlowHandOpenedKey is keys.FlowHandOpened.
func FlowHandOpenedKey(t string) string { return rediskeys.FlowHandOpened(t) }

// FlowWorkerKey is keys.FlowWorker.
func FlowWorkerKey(worker string) string { return rediskeys.FlowWorker(worker) }

// FlowWorkerEndpointsKey is keys.FlowWorkerEndpoints.
func FlowWorkerEndpointsKey(worker string) string { return rediskeys.FlowWorkerEndpoints(worker) }

// The flow-control names that are constants: keys.FlowWorkers,
// keys.FlowPaused, keys.FlowEndpoints, keys.Lines.
const (
	FlowWorkersKey   = rediskeys.FlowWorkers
	FlowPausedKey    = rediskeys.FlowPaused
	FlowEndpointsKey = rediskeys.FlowEndpoints
	LinesKey         = rediskeys.Lines
)

// The kinds of flow-control line: keys.LineCut, keys.LineFair, keys.LinePar.
const (
	LineCut  = rediskeys.LineCut
	LineFair = rediskeys.LineFair
	LinePar  = rediskeys.LinePar
)

// LineField is keys.LineField.
func LineField(kind, name string) string { return rediskeys.LineField(kind, name) }

// ParseLineField is keys.ParseLineField.
func ParseLineField(f string) (kind, name string, ok bool) { return rediskeys.ParseLineField(f) }
