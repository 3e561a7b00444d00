package record

import (
	"strconv"

	rediskeys "github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/tenant"
)

// keys builds every key name of one partition: "{tag}:kind:…". This is the
// only place a request's key names are made; the names other packages
// share (the timer's, the doorbell's, flow control's) are internal/keys'.
// All keys of one request (and the asynq
// task of it, whose queue is named like the tag) share the tag, so every
// script runs within one cluster slot. With one partition the tag is
// "retryd", the layout before partitions existed.
type keys string

func keysOf(tag string) keys { return keys(rediskeys.Partition(tag)) }

func (k keys) req(id string) string      { return string(k) + "req:" + id }
func (k keys) attempts(id string) string { return string(k) + "att:" + id }
func (k keys) redrives(id string) string { return string(k) + "rdr:" + id }
func (k keys) spec(id string) string     { return string(k) + "spec:" + id }
func (k keys) result(id string) string   { return string(k) + "res:" + id }

// tkeys builds the keys of one tenant within a partition: what a tenant
// lists (its indexes), what it names (idempotency keys, schedule aliases)
// and what it is counted by (its owner set). A request's own keys (req,
// att, …) are reached by id alone and carry no tenant. The default
// tenant's are the names of before tenants existed, so the data of a
// deployment that had none stays where it was and is default's.
type tkeys string

// of is tenant t's keys in partition k.
func (k keys) of(t string) tkeys {
	if t = tenant.Of(t); t == tenant.Default {
		return tkeys(k)
	}
	return tkeys(string(k) + "t:" + t + ":")
}

func (k tkeys) index(s Status) string         { return string(k) + "idx:" + string(s) }
func (k tkeys) idem(key string) string        { return string(k) + "idem:" + hashHex(key) }
func (k tkeys) redriveIdem(key string) string { return string(k) + "idem-redrive:" + hashHex(key) }
func (k tkeys) resendIdem(key string) string  { return string(k) + "idem-resend:" + hashHex(key) }

// legacyAll is the all-requests index of earlier versions: no longer
// written or listed, kept drained by the trim (trimFinished, trimListed)
// as the requests in it end. Not for new work.
func (k tkeys) legacyAll() string { return string(k) + "idx:all" }

// payloadDue indexes the tenant's finished requests by finish time (ms)
// while the tenant has a payload retention: the sweeper erases their
// payloads when it ends (Store.ExpirePayloads).
func (k tkeys) payloadDue() string { return string(k) + "idx:payload-due" }

// failedHost indexes failed requests by destination host name (no port),
// for the DLQ's host filter.
func (k tkeys) failedHost(host string) string { return string(k) + "idx:failed-host:" + host }

// The list filters' indexes (filter.go). host, label and finished hold
// every request of theirs whatever its status; failClass and failCode hold
// the requests whose last attempt failed, with that class and (when it
// got an answer) that status code: an attempt that succeeds first time
// touches neither. All but finished are ordered by id (score 0), so a
// created-time range is a range of ids; finished is scored by completedAt.
func (k tkeys) host(host string) string   { return string(k) + "idx:host:" + host }
func (k tkeys) label(label string) string { return string(k) + "idx:label:" + label }
func (k tkeys) failClass(c string) string { return k.failClassPrefix() + c }
func (k tkeys) failCode(code int) string  { return k.failCodePrefix() + strconv.Itoa(code) }
func (k tkeys) failClassPrefix() string   { return string(k) + "idx:class:" }
func (k tkeys) failCodePrefix() string    { return string(k) + "idx:code:" }
func (k tkeys) finished() string          { return string(k) + "idx:finished" }

// hostIndexReady marks a partition whose failed requests of before the
// failed-by-host index were indexed (see backfillHostIndex).
func (k keys) hostIndexReady() string { return string(k) + "idx:failed-host-ready" }

// callbackDue indexes requests whose callback is due but not finished, so
// the sweeper can find callbacks whose task was lost.
func (k keys) callbackDue() string { return string(k) + "idx:callback-due" }

// stats is a hash of counters, bumped by the scripts that change a
// request (so they cost no extra round trip); cluster-wide figures are the
// sum over partitions.
func (k keys) stats() string { return string(k) + "stats" }

func (k tkeys) owner(o string) string        { return string(k) + "owner:" + o }
func (k keys) authFailures(ip string) string { return string(k) + "authfail:" + ip }

func (k keys) schedule(id string) string      { return string(k) + "sch:" + id }
func (k keys) scheduleFires(id string) string { return string(k) + "sch-fires:" + id }
func (k tkeys) schedules() string             { return string(k) + "idx:schedules" }

// topic is a topic's endpoints (in partition 0); topics indexes a
// tenant's topics by name.
func (k tkeys) topic(name string) string { return string(k) + "topic:" + hashHex(name) }
func (k tkeys) topics() string           { return string(k) + "idx:topics" }

// queues lists a tenant's QStash queues by name.
func (k tkeys) queues() string { return string(k) + "idx:queues" }

// publication is one publish to a topic: its children.
func (k keys) publication(id string) string { return string(k) + "pub:" + id }

// scheduleAlias maps a QStash schedule id its client chose to retryd's.
func (k tkeys) scheduleAlias(alias string) string { return string(k) + "sch-alias:" + hashHex(alias) }

// scheduleDue is the schedules by next fire time (ms).
func (k keys) scheduleDue() string { return string(k) + "sch-due" }

// statusIndexes are the status indexes in Statuses order.
func (k tkeys) statusIndexes() []string {
	out := make([]string, len(Statuses))
	for i, s := range Statuses {
		out[i] = k.index(s)
	}
	return out
}

// k is the keys of the partition of request (or schedule) id.
func (s *Store) k(id string) keys { return keysOf(s.parts.Tag(s.parts.OfID(id))) }

// each is the keys of every partition, partition 0 first.
func (s *Store) each() []keys {
	out := make([]keys, s.parts.Len())
	for i := range out {
		out[i] = keysOf(s.parts.Tag(i))
	}
	return out
}

// first is partition 0's keys, for the few records of no request (failed
// authentications).
func (s *Store) first() keys { return keysOf(s.parts.Tag(0)) }

// Partitions are the store's partitions.
func (s *Store) Partitions() partition.Set { return s.parts }

// Keys of no request. They are named here too, so that every key retryd
// writes is listed here or in internal/keys.

// RateLimitKey is the API rate limit's counter of owner (an API key's hash
// or a client address).
func RateLimitKey(owner string) string { return "{retryd}:" + owner }

// SweeperLockKey is held by the worker sweeping; SweeperTurnKey by the
// worker that took the current interval's sweep, so that all workers
// together sweep once per interval; SweeperCursorKey holds where each
// partition's and status's slice stopped (field "<part>:<status>"), so
// the sweep goes on where the last one stopped, whichever worker ran it.
// TrimCursorKey holds where the trim of each index it walks goes on (field:
// the index's key), whichever worker sweeps (see trimCursors).
const (
	SweeperLockKey   = "{retryd}:sweeper:lock"
	SweeperTurnKey   = "{retryd}:sweeper:turn"
	SweeperCursorKey = "{retryd}:sweeper:cursor"
	TrimCursorKey    = "{retryd}:sweeper:trim"
)

// ListenersKey is where every retryd process lists its listen addresses
// (member "ip:port", score: when the entry lapses, ms), so that each
// knows the others' and refuses them as destinations.
const ListenersKey = "{retryd}:listeners"

// ScheduleChangesKey holds a random mark, new at each change that can
// make a schedule due sooner than a scheduler knows (a schedule created or
// resumed), so that the schedulers look at every partition only when it
// moved.
const ScheduleChangesKey = "{retryd}:sch-changes"

// ReplicaMarkKey is written just before a WAIT that confirms earlier
// changes (Store.Replicated): WAIT counts the replicas that hold its own
// connection's last write, and the replication stream is in order, so
// replicas that hold the mark hold every change answered before it.
const ReplicaMarkKey = "{retryd}:replicamark"

// SettingsKey holds, per process (field: its id), the settings that
// decide a request's fate there and until when the entry holds
// (internal/agree).
const SettingsKey = "{retryd}:settings"

// RetentionKey holds the retention an admin set per tenant (field: the
// tenant; value: "<records ms> <payload ms>", 0 for the default's).
const RetentionKey = "{retryd}:retention"
