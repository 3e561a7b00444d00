package handlers

import (
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/selection"
	"github.com/retryd/retryd/internal/tenant"
)

// The filters of GET /requests and of the bulk calls by filter.
const (
	FilterStatus       = "status"
	FilterHost         = "host"
	FilterMethod       = "method"
	FilterFailureClass = "failureClass"
	FilterStatusCode   = "statusCode"
	FilterCreatedFrom  = "createdFrom"
	FilterCreatedTo    = "createdTo"
	FilterFinishedFrom = "finishedFrom"
	FilterFinishedTo   = "finishedTo"
	FilterLabel        = "label"
	FilterURLContains  = "urlContains"
	FilterWaitingFor   = "waitingFor"
)

// RequestFilters lists them, in the order the API documents them.
var RequestFilters = []string{FilterStatus, FilterHost, FilterMethod, FilterFailureClass, FilterStatusCode,
	FilterCreatedFrom, FilterCreatedTo, FilterFinishedFrom, FilterFinishedTo, FilterLabel, FilterURLContains, FilterWaitingFor}

// filterQuery is what one filtered call names.
type filterQuery struct {
	Filter record.Filter
	// Tenant narrows an admin's call to one tenant ("": every tenant).
	Tenant string
	Limit  int
	Cursor string
	// Params are the values of the route's own parameters.
	Params map[string]string
}

// filterRoute is what one filtered route takes besides the filters.
type filterRoute struct {
	Params                 []string
	DefaultLimit, MaxLimit int
}

// parseFilterQuery reads a filtered call from query (and, for a bulk
// call, its JSON body, merged: a key may come from either, once). Each
// key is given once; an unknown key is an error naming the known ones.
func parseFilterQuery(rt filterRoute, query url.Values, body []byte) (filterQuery, error) {
	merged, err := mergeBody(query, body)
	if err != nil {
		return filterQuery{}, err
	}
	q := filterQuery{Limit: rt.DefaultLimit, Params: map[string]string{}}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad key named is the same every time
	f := &q.Filter
	for _, k := range keys {
		vs := merged[k]
		if len(vs) != 1 {
			return filterQuery{}, Errorf(CodeInvalid, k, k+" is given more than once; give it once")
		}
		v := strings.TrimSpace(vs[0])
		known := slices.Contains(RequestFilters, k) || slices.Contains(rt.Params, k) ||
			k == "limit" || k == "cursor" || k == selection.TenantParam
		if known && vs[0] == notScalar {
			return filterQuery{}, Errorf(CodeInvalid, k, k+" must be a string, a number or a boolean")
		}
		switch k {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > rt.MaxLimit {
				return filterQuery{}, Errorf(CodeInvalid, k, "limit must be an integer between 1 and "+strconv.Itoa(rt.MaxLimit))
			}
			q.Limit = n
		case "cursor":
			if len(v) > 64 {
				return filterQuery{}, Errorf(CodeInvalid, k, "cursor is not one this API returned")
			}
			q.Cursor = v
		case selection.TenantParam:
			if !tenant.Valid(v) {
				return filterQuery{}, Errorf(CodeInvalid, k, "tenant must be 1 to 64 of a-z, 0-9, _ and -")
			}
			q.Tenant = v
		case FilterStatus:
			for _, st := range strings.Split(v, ",") {
				if st := record.Status(strings.TrimSpace(st)); st.Valid() {
					f.Statuses |= record.StatusesOf(st)
					continue
				}
				return filterQuery{}, Errorf(CodeInvalid, k, "status must be one or more of "+statusNames()+", comma-separated (status=failed,pending)")
			}
		case FilterWaitingFor:
			var reasons []string
			for _, w := range strings.Split(v, ",") {
				reasons = append(reasons, strings.TrimSpace(w))
			}
			set, ok := record.WaitingOf(reasons...)
			if !ok {
				return filterQuery{}, Errorf(CodeInvalid, k, "waitingFor must be one or more of "+strings.Join(record.WaitingReasons, ", ")+", comma-separated")
			}
			f.WaitingFor = set
		case FilterHost:
			if f.Host, err = hostFilter(v); err != nil {
				return filterQuery{}, err
			}
		case FilterMethod:
			if v == "" || len(v) > 16 || strings.ContainsFunc(v, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') }) {
				return filterQuery{}, Errorf(CodeInvalid, k, "method must be an HTTP method such as GET or POST")
			}
			f.Method = strings.ToUpper(v)
		case FilterFailureClass:
			if err := checkClass(v); err != nil || v == "" {
				return filterQuery{}, Errorf(CodeInvalid, k, "failureClass must be one of "+strings.Join(FailureClasses, ", "))
			}
			f.FailureClass = v
		case FilterStatusCode:
			n, err := strconv.Atoi(v)
			if err != nil || n < 100 || n > 599 {
				return filterQuery{}, Errorf(CodeInvalid, k, "statusCode must be an HTTP status code, 100 to 599")
			}
			f.StatusCode = n
		case FilterCreatedFrom, FilterCreatedTo, FilterFinishedFrom, FilterFinishedTo:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || t.Year() < 2000 || t.Year() > 9999 {
				return filterQuery{}, Errorf(CodeInvalid, k, k+" must be an RFC 3339 time such as 2025-06-01T12:00:00Z")
			}
			*map[string]*time.Time{FilterCreatedFrom: &f.CreatedFrom, FilterCreatedTo: &f.CreatedTo,
				FilterFinishedFrom: &f.FinishedFrom, FilterFinishedTo: &f.FinishedTo}[k] = t.UTC()
		case FilterLabel:
			if err := names.Label.Check(k, v); err != nil || v == "" {
				return filterQuery{}, Errorf(CodeInvalid, k, "label must be 1 to 256 bytes with no control characters")
			}
			f.Label = v
		case FilterURLContains:
			if v == "" || len(v) > 2048 || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				return filterQuery{}, Errorf(CodeInvalid, k, "urlContains must be 1 to 2048 characters with no control characters")
			}
			f.URLContains = v
		default:
			if !known {
				known := append(append([]string{}, RequestFilters...), "tenant", "limit", "cursor")
				return filterQuery{}, Errorf(CodeInvalid, names.Short(k), "unknown parameter "+names.Quote(k)+"; this call takes "+
					strings.Join(append(known, rt.Params...), ", "))
			}
			q.Params[k] = vs[0]
		}
	}
	if err := f.Check(); err != nil {
		return filterQuery{}, err
	}
	return q, nil
}

// hostFilter reads a host filter: a host name or host:port, in lower
// case ([::1] style for IPv6 with a port).
func hostFilter(v string) (string, error) {
	v = strings.ToLower(v)
	bad := func() (string, error) {
		return "", Errorf(CodeInvalid, FilterHost, "host must be a host name or host:port, such as api.example.com or api.example.com:8443")
	}
	if v == "" || len(v) > 260 || strings.ContainsAny(v, "/?#@ \t") {
		return bad()
	}
	if h, port, err := net.SplitHostPort(v); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || h == "" {
			return bad()
		}
		return v, nil
	}
	if strings.Count(v, ":") == 1 {
		return bad() // host: with no port
	}
	return v, nil
}

func statusNames() string {
	out := make([]string, len(record.Statuses))
	for i, s := range record.Statuses {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// notScalar stands for a body value that is not a string, a number or a
// boolean.
const notScalar = "\x00"

// mergeBody joins the keys of query and a JSON body (an object of
// strings, numbers and booleans; empty is none).
func mergeBody(query url.Values, body []byte) (url.Values, error) {
	merged := url.Values{}
	for k, v := range query {
		merged[k] = append(merged[k], v...)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return merged, nil
	}
	var obj map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil || obj == nil {
		return nil, Errorf(CodeInvalid, "", `body must be a JSON object such as {"host": "api.example.com", "dryRun": true}`)
	}
	for k, v := range obj {
		var s string
		switch t := v.(type) {
		case string:
			s = t
		case json.Number:
			s = t.String()
		case bool:
			s = strconv.FormatBool(t)
		default:
			s = notScalar // refused once the key is known to be one the call takes
		}
		if _, inQuery := query[k]; inQuery {
			return nil, Errorf(CodeInvalid, k, k+" is given both in the query and in the body; give it once")
		}
		merged[k] = []string{s}
	}
	return merged, nil
}
