// Package selection reads what a bulk call or a filtered list names (ids,
// filter values, a count and a cursor) from its query string and its JSON
// body, the same way for every such route of both APIs, and decides which
// requests it matches. It exists because a selection read loosely acts on
// everything: an id list sent in the body, a misspelled filter key or an
// ignored count each once made a bulk call act on every request of the
// deployment. So here an unknown key is an error naming it, ids come from
// the query or the body, a count caps every call, and a call that names
// nothing selects everything only where its route says that is what naming
// nothing means.
package selection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/tenant"
)

// Error is a selection the route cannot take; Field names the key.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// The filter keys, as both APIs name them.
const (
	MessageID      = "messageId"
	URL            = "url"
	Host           = "host"
	Path           = "path"
	Label          = "label"
	FlowControlKey = "flowControlKey"
	ScheduleID     = "scheduleId"
	ResponseStatus = "responseStatus"
	FailureClass   = "failureClass"
	FromDate       = "fromDate"
	ToDate         = "toDate"
	// TopicName is the topic (URL group) a request was published to;
	// URLGroup is QStash's newer name of it.
	TopicName = "topicName"
	URLGroup  = "urlGroup"
	// QueueName is a QStash queue's name.
	QueueName = "queueName"
	// CallerIP is a key QStash defines that no retryd request carries
	// (yet): a filter on it is understood and matches nothing, rather
	// than everything.
	CallerIP = "callerIp"
)

// Route is what one route accepts.
type Route struct {
	// IDs is the parameter that lists ids ("messageIds", "dlqIds"); ""
	// when the route takes none.
	IDs string
	// Filters are the filter keys the route understands.
	Filters []string
	// Params are other keys the route reads itself (an actor, a reason):
	// accepted here, not filters.
	Params []string
	// CountParam names the count ("count", or "limit" in retryd's API).
	CountParam   string
	DefaultCount int
	MaxCount     int
	// Cursor: the route continues with a cursor.
	Cursor bool
	// CursorWithin: the cursor may also be id.n, a place within one
	// request's entries (the events of /v2/events).
	CursorWithin bool
	// NothingIsAll: a call that names no id and no filter selects
	// everything (QStash's {all: true} sends no filter). Without it such a
	// call is refused.
	NothingIsAll bool
}

// MaxIDs bounds the ids one call names.
const MaxIDs = 1000

// Selection is what one call names.
type Selection struct {
	// IDs are the ids named (valid ones only: an id this API never issued
	// matches nothing). Named says ids were named at all.
	IDs   []string
	Named bool
	// Values holds each filter key's values: a request matches any value
	// of a key, and every key.
	Values   map[string][]string
	From, To int64 // createdAt bounds in ms; 0 is open
	Count    int
	Cursor   string
	// Params are the values of the route's own Params.
	Params map[string]string
	// Tenant is the tenant an admin key narrows the call to ("": its
	// every tenant). Every route takes it; a tenant key may only name its
	// own (the handlers check).
	Tenant string
}

// TenantParam narrows any selection to one tenant.
const TenantParam = "tenant"

// All reports whether the call names no id and no filter.
func (s Selection) All() bool { return !s.Named && len(s.Values) == 0 && s.From == 0 && s.To == 0 }

// Parse reads a selection from query and body (a JSON object, or empty).
func Parse(rt Route, query url.Values, body []byte) (Selection, error) {
	merged, err := merge(rt, query, body)
	if err != nil {
		return Selection{}, err
	}
	s := Selection{Values: map[string][]string{}, Count: rt.DefaultCount, Params: map[string]string{}}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first unknown key named is the same every time
	for _, k := range keys {
		v := merged[k]
		switch {
		case rt.IDs != "" && k == rt.IDs:
			s.Named = true
			for _, id := range v {
				for _, one := range strings.Split(id, ",") {
					if one = strings.TrimSpace(one); ids.Valid(one) {
						s.IDs = append(s.IDs, one)
					}
				}
			}
		case k == rt.CountParam && rt.CountParam != "":
			n, err := strconv.Atoi(last(v))
			if err != nil || n < 1 || n > rt.MaxCount {
				return Selection{}, errorf(k, "%s must be an integer between 1 and %d", k, rt.MaxCount)
			}
			s.Count = n
		case k == "cursor" && rt.Cursor:
			if c := last(v); c != "" {
				id, n, within := strings.Cut(c, ".")
				if !ids.Valid(id) || within && (!rt.CursorWithin || strings.Trim(n, "0123456789") != "" || n == "") {
					return Selection{}, errorf(k, "cursor is not one this API returned")
				}
				s.Cursor = c
			}
		case k == TenantParam:
			if s.Tenant = strings.TrimSpace(last(v)); !tenant.Valid(s.Tenant) {
				return Selection{}, errorf(k, "tenant must be 1 to 64 of a-z, 0-9, _ and -")
			}
		case slices.Contains(rt.Params, k):
			s.Params[k] = last(v)
		case slices.Contains(rt.Filters, k) && (k == FromDate || k == ToDate):
			n, err := strconv.ParseInt(last(v), 10, 64)
			if err != nil || n < 0 {
				return Selection{}, errorf(k, "%s must be a Unix time in milliseconds", k)
			}
			if k == FromDate {
				s.From = n
			} else {
				s.To = n
			}
		case slices.Contains(rt.Filters, k):
			var vals []string
			for _, one := range v {
				if one = strings.TrimSpace(one); one != "" {
					if err := filterKind(k).Check(k, one); err != nil {
						return Selection{}, err
					}
					vals = append(vals, one)
				}
			}
			if len(vals) == 0 {
				return Selection{}, errorf(k, "filter %s has no value", k)
			}
			if k == URLGroup { // QStash's new name of topicName
				k = TopicName
			}
			s.Values[k] = append(s.Values[k], vals...)
		default:
			return Selection{}, errorf(names.Short(k), "unknown parameter %s; this call takes %s", names.Quote(k), strings.Join(rt.known(), ", "))
		}
	}
	if s.Named && merged.Get(rt.CountParam) == "" {
		s.Count = min(len(s.IDs), MaxIDs) // named ids are acted on, all of them, unless a count says otherwise
	}
	if len(s.IDs) > MaxIDs {
		return Selection{}, errorf(rt.IDs, "%s names %d ids; at most %d per call", rt.IDs, len(s.IDs), MaxIDs)
	}
	if s.Named && (len(s.Values) > 0 || s.From != 0 || s.To != 0) {
		return Selection{}, errorf(rt.IDs, "name %s or filters, not both", rt.IDs)
	}
	if s.All() && !rt.NothingIsAll {
		return Selection{}, errorf("", "this call must name %s", rt.selectors())
	}
	return s, nil
}

// merge joins the keys of query and body. A key that takes one value (a
// count, a cursor, a date, a parameter) may be given once: when a limit
// came both in the query and in the body, one of them used to win
// silently, and the caller's intent is not ours to guess.
func merge(rt Route, query url.Values, body []byte) (url.Values, error) {
	merged := url.Values{}
	for k, v := range query {
		merged[k] = append(merged[k], v...)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		fromBody, err := bodyValues(rt, body)
		if err != nil {
			return nil, err
		}
		for k, v := range fromBody {
			merged[k] = append(merged[k], v...)
		}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n := len(merged[k]); n > 1 && rt.singleValued(k) {
			where := "more than once"
			if _, inQuery := query[k]; inQuery && len(query[k]) < n {
				where = "both in the query and in the body"
			}
			return nil, errorf(k, "%s is given %s; give it once", k, where)
		}
	}
	return merged, nil
}

// singleValued reports whether key k of the route takes one value.
func (rt Route) singleValued(k string) bool {
	switch {
	case k == rt.CountParam && rt.CountParam != "", k == "cursor" && rt.Cursor, k == TenantParam:
		return true
	case slices.Contains(rt.Params, k):
		return true
	case slices.Contains(rt.Filters, k) && (k == FromDate || k == ToDate):
		return true
	}
	return false
}

// numeric reports whether key k of the route is a number, which a JSON
// body must send as one: "5" for 5 is refused, as everywhere else in the
// API.
func (rt Route) numeric(k string) bool {
	return (k == rt.CountParam && rt.CountParam != "") || (slices.Contains(rt.Filters, k) && (k == FromDate || k == ToDate || k == ResponseStatus))
}

// filterKind is the kind of name a filter key's values are: a filter
// value is refused as the name itself would be.
func filterKind(k string) names.Kind {
	switch k {
	case Label:
		return names.Label
	case FlowControlKey:
		return names.FlowKey
	case TopicName, URLGroup:
		return names.Topic
	case QueueName:
		return names.Queue
	case ScheduleID:
		return names.ScheduleID
	}
	return names.FilterValue
}

func last(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func (rt Route) selectors() string {
	filters := "a filter (" + strings.Join(rt.Filters, ", ") + ")"
	if rt.IDs == "" {
		return filters
	}
	return rt.IDs + " or " + filters
}

// example is a body this route takes, in its own field names: a body of
// retryd's API is not pointed at a QStash field.
func (rt Route) example() string {
	if rt.IDs != "" {
		return fmt.Sprintf("{%q: [\"...\"]}", rt.IDs)
	}
	if len(rt.Params) > 0 {
		return fmt.Sprintf("{%q: \"...\"}", rt.Params[0])
	}
	return "{}"
}

func (rt Route) known() []string {
	var out []string
	if rt.IDs != "" {
		out = append(out, rt.IDs)
	}
	out = append(out, rt.Filters...)
	if rt.CountParam != "" {
		out = append(out, rt.CountParam)
	}
	if rt.Cursor {
		out = append(out, "cursor")
	}
	return append(out, rt.Params...)
}

// bodyValues reads a JSON object whose members are strings, numbers,
// booleans or arrays of them (qstash-py sends {"messageIds": [...]}).
// Anything but an object is refused: the body null once read as "no
// filter", and so as everything.
func bodyValues(rt Route, body []byte) (url.Values, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, errorf("", "body must be a JSON object such as %s", rt.example())
	}
	out := url.Values{}
	for k, raw := range obj {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			list = []json.RawMessage{raw}
		}
		for _, item := range list {
			v, err := scalar(item)
			if err != nil {
				return nil, errorf(k, "%s must be a string, a number or a list of them", k)
			}
			if v != nil && rt.numeric(k) && !isNumber(item) {
				return nil, errorf(k, "%s must be a JSON number, not %s", k, bytes.TrimSpace(item))
			}
			if v != nil {
				out[k] = append(out[k], *v)
			}
		}
		if _, ok := out[k]; !ok {
			out[k] = []string{} // named, with nothing: still named
		}
	}
	return out, nil
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw json.RawMessage) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return false
	}
	_, ok := v.(json.Number)
	return ok
}

// scalar is a JSON string, number or boolean as text; nil for null.
func scalar(raw json.RawMessage) (*string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var s string
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		s = t
	case bool:
		s = strconv.FormatBool(t)
	case float64:
		s = strings.TrimSpace(string(raw))
	default:
		return nil, fmt.Errorf("not a scalar")
	}
	return &s, nil
}

// Match reports whether r is selected: one of the named ids, or, without
// ids, a request every filter key matches (a key matches when one of its
// values does). A key whose field r does not have never matches.
func (s Selection) Match(r *record.Request) bool {
	if s.Named {
		return slices.Contains(s.IDs, r.ID)
	}
	for k, want := range s.Values {
		if k == Label && r.QStash != nil {
			// Any of the request's labels matches any of the values.
			if !slices.ContainsFunc(r.QStash.AllLabels(), func(l string) bool { return slices.Contains(want, l) }) {
				return false
			}
			continue
		}
		got := field(r, k)
		if got == "" || !slices.ContainsFunc(want, func(w string) bool { return equal(r, k, w, got) }) {
			return false
		}
	}
	created := r.CreatedAt.UnixMilli()
	return (s.From == 0 || created >= s.From) && (s.To == 0 || created <= s.To)
}

// equal compares a filter value with r's field: URLs, paths, ids, labels
// and keys exactly; a host (or host:port, that port) as the DLQ's host
// filter does; other names without regard to case.
func equal(r *record.Request, key, want, got string) bool {
	switch key {
	case URL, Path, MessageID, ScheduleID, Label, FlowControlKey, TopicName, QueueName:
		return want == got
	case Host:
		return record.DLQFilter{Host: strings.ToLower(want)}.Match(r)
	}
	return strings.EqualFold(want, got)
}

// field is r's value for filter key k ("" when it has none).
func field(r *record.Request, k string) string {
	var q record.QStash
	if r.QStash != nil {
		q = *r.QStash
	}
	switch k {
	case MessageID:
		return r.ID
	case URL:
		return r.URL
	case Host:
		return r.Host
	case Path:
		if u, err := url.Parse(r.URL); err == nil {
			return u.Path
		}
	case Label:
		return q.Label
	case FlowControlKey:
		if q.FlowControlKey != "" {
			return q.FlowControlKey
		}
		if r.FlowControl != nil {
			return r.FlowControl.Key
		}
	case ScheduleID:
		return q.ScheduleID
	case TopicName:
		return r.Topic
	case QueueName:
		return q.Queue
	case ResponseStatus:
		if r.LastStatusCode != 0 {
			return strconv.Itoa(r.LastStatusCode)
		}
	case FailureClass:
		return r.FailureClass
	}
	return ""
}
