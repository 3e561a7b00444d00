// Package names checks the names a client gives retryd: flow-control
// keys, topics (URL groups), queues, schedule ids, labels, deduplication
// and idempotency keys, endpoint names and filter values, wherever they
// arrive (a path, a query, a header or a body). One rule holds for all of
// them: no control character, and at most the kind's documented length in
// bytes.
//
// Control characters matter beyond tidiness: retryd joins a tenant's name
// to the names it chose with a control character (see tenant.Qualify), so
// a name that could hold one could spell another tenant's internal name.
// Lengths matter because a name is stored with every request and shown in
// every list: an unbounded label once made one list call build tens of
// megabytes.
package names

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Kind is one sort of name: what the API calls it and its longest length
// in bytes.
type Kind struct {
	What string
	Max  int
}

// The documented limits, in bytes.
const (
	MaxFlowKey        = 255
	MaxTopic          = 128
	MaxQueue          = 128
	MaxScheduleID     = 128
	MaxEndpointName   = 128
	MaxLabel          = 256
	MaxDedupID        = 256
	MaxIdempotencyKey = 255
	MaxFilterValue    = 2048
	MaxHeaderName     = 256
	MaxCredential     = 128
	MaxWorkflowRun    = 128
	MaxEventID        = 256
)

// The kinds of names (docs/security.md lists them).
var (
	FlowKey        = Kind{What: "a flow-control key", Max: MaxFlowKey}
	Topic          = Kind{What: "a topic (URL group) name", Max: MaxTopic}
	Queue          = Kind{What: "a queue name", Max: MaxQueue}
	ScheduleID     = Kind{What: "a schedule id", Max: MaxScheduleID}
	EndpointName   = Kind{What: "an endpoint name", Max: MaxEndpointName}
	Label          = Kind{What: "a label", Max: MaxLabel}
	DedupID        = Kind{What: "a deduplication id", Max: MaxDedupID}
	IdempotencyKey = Kind{What: "an idempotency key", Max: MaxIdempotencyKey}
	// HeaderName bounds a header a client names (Upstash-Redact-Fields'
	// header[Name]).
	HeaderName = Kind{What: "a header name", Max: MaxHeaderName}
	// Credential names a tenant's credential (or proxy), in a path, a body
	// member or a header.
	Credential = Kind{What: "a credential name", Max: MaxCredential}
	// WorkflowRun is an Upstash Workflow run id (Upstash-Workflow-RunId).
	WorkflowRun = Kind{What: "a workflow run id", Max: MaxWorkflowRun}
	// EventID is the event a workflow waits for (/v2/wait, /v2/notify).
	EventID = Kind{What: "an event id", Max: MaxEventID}
	// FilterValue bounds a filter value that is not itself one of the
	// names above (a URL, a host, a path): as long as a URL may be.
	FilterValue = Kind{What: "a filter value", Max: MaxFilterValue}
)

// Kinds lists every kind, for documentation and tests.
var Kinds = []Kind{FlowKey, Topic, Queue, ScheduleID, EndpointName, Label, DedupID, IdempotencyKey, HeaderName, Credential, FilterValue, WorkflowRun, EventID}

// Error is a refused name. Field says where the client gave it (a header,
// a query parameter, a body member, a path segment); Message says why and
// holds at most a short prefix of the value.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Check refuses v when it is longer than k allows or holds a control
// character. Emptiness is the caller's to decide: some names are optional.
func (k Kind) Check(field, v string) error {
	if len(v) > k.Max {
		return &Error{Field: field, Message: fmt.Sprintf("%s: %s is at most %d bytes, got %d (%s)",
			field, k.What, k.Max, len(v), Quote(v))}
	}
	if i := ControlAt(v); i >= 0 {
		return &Error{Field: field, Message: fmt.Sprintf("%s: %s must not hold control characters (one at byte %d of %s)",
			field, k.What, i, Quote(v))}
	}
	return nil
}

// ControlAt is the byte offset of v's first control character (C0, DEL or
// C1), or -1 when it has none.
func ControlAt(v string) int {
	for i, r := range v {
		if unicode.IsControl(r) {
			return i
		}
	}
	return -1
}

// quoteMax is how much of a value an error message repeats.
const quoteMax = 32

// Quote is v quoted for an error message, cut to its first 32 bytes (at a
// character boundary, then marked "…"): an error never echoes a huge
// value whole.
func Quote(v string) string {
	if len(v) <= quoteMax {
		return strconv.Quote(v)
	}
	return strconv.Quote(v[:cut(v)]) + "…"
}

// Short is v cut as Quote cuts it, unquoted: for an error's field, which
// names a client's key (an unknown member, an unknown parameter).
func Short(v string) string {
	if len(v) <= quoteMax {
		return v
	}
	return v[:cut(v)] + "…"
}

// cut is where Quote and Short end a long v: at most quoteMax bytes, at a
// character boundary.
func cut(v string) int {
	n := quoteMax
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return n
}

// Clean is v without its control characters: for values shown where a
// control character would forge structure (a metric label, a log line)
// and that cannot be refused any more.
func Clean(v string) string {
	if ControlAt(v) < 0 {
		return v
	}
	out := make([]rune, 0, len(v))
	for _, r := range v {
		if !unicode.IsControl(r) {
			out = append(out, r)
		}
	}
	return string(out)
}
