package qstash

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retryd/retryd/handlers"
	"github.com/retryd/retryd/internal/delayexpr"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/names"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/submit"
)

// Reading a publish: QStash's Upstash-* headers translated into retryd's
// submission and the fields a QStash message adds to it.

// duration reads a QStash duration: plain seconds ("30"), or one or more
// whole numbers each with a unit, as QStash's own parser takes them
// ("10s", "5m", "2h", "1d", "1h30m3s", "1500ms"). A value a time.Duration
// cannot hold is an error, never a wrapped one (213504d once wrapped to 25
// minutes).
func duration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		v += "s" // plain seconds
	}
	if v == "" {
		return 0, errors.New("invalid duration")
	}
	var total time.Duration
	for v != "" {
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		j := i
		for j < len(v) && (v[j] < '0' || v[j] > '9') {
			j++
		}
		unit, ok := durationUnits[v[i:j]]
		if i == 0 || !ok {
			return 0, errors.New("invalid duration")
		}
		n, err := strconv.ParseInt(v[:i], 10, 64)
		if err != nil || n > int64((maxDuration-total)/unit) {
			return 0, errors.New("out of range")
		}
		total += time.Duration(n) * unit
		v = v[j:]
	}
	return total, nil
}

// durationUnits are the units of a QStash duration: Go's, and days.
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond,
	"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
}

// maxNotBefore is the last second of the year 9999.
const maxNotBefore = 253402300799

// maxDuration bounds a QStash duration: far beyond any limit of retryd's
// (which then answers with its own message), far below int64's wrap.
const maxDuration = 100 * 365 * 24 * time.Hour

// submission translates a publish call into retryd's submission body, so
// every rule of retryd's API applies to it unchanged, and the fields QStash
// adds to it.
func submission(h http.Header, dest string, body []byte) (map[string]any, *record.QStash, error) {
	extra, err := extras(h)
	if err != nil {
		return nil, nil, err
	}
	sub := map[string]any{"url": dest, "method": "POST", "maxRetries": DefaultRetries}
	if v := h.Get("Upstash-Flow-Control-Value"); v != "" || extra.FlowControlKey != "" {
		// Enforced by retryd's flow control, across all workers.
		fc, err := flowControl(extra.FlowControlKey, v)
		if err != nil {
			return nil, nil, err
		}
		m := map[string]any{"key": fc.Key}
		if fc.Parallelism > 0 {
			m["parallelism"] = fc.Parallelism
		}
		if fc.Rate > 0 {
			m["rate"], m["periodMs"] = fc.Rate, fc.Period.Milliseconds()
		}
		sub["flowControl"] = m
	}
	headers := map[string]string{}
	for name, values := range h {
		lower := strings.ToLower(name)
		switch {
		case strings.HasPrefix(lower, "upstash-forward-"):
			fwd := name[len("upstash-forward-"):]
			if submit.Framing(http.CanonicalHeaderKey(fwd)) {
				// The official SDKs forward Content-Length and Host (the
				// workflow SDK always): framing is retryd's to set, so
				// they are dropped here, not refused.
				continue
			}
			headers[fwd] = strings.Join(values, ", ")
		case lower == "content-type":
			headers["Content-Type"] = values[0]
		}
	}
	if m := h.Get("Upstash-Method"); m != "" {
		sub["method"] = strings.ToUpper(m)
	}
	if v := h.Get("Upstash-Retries"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, nil, badRequest("Upstash-Retries", "Upstash-Retries must be an integer")
		}
		sub["maxRetries"] = n
	}
	if v := h.Get("Upstash-Timeout"); v != "" {
		d, err := duration(v)
		if err != nil {
			return nil, nil, badRequest("Upstash-Timeout", "Upstash-Timeout must be a duration such as 30s")
		}
		sub["timeoutMs"] = d.Milliseconds()
	}
	switch nb, delay := h.Get("Upstash-Not-Before"), h.Get("Upstash-Delay"); {
	case nb != "":
		sec, err := strconv.ParseInt(nb, 10, 64)
		if err != nil || sec < 0 || sec > maxNotBefore {
			return nil, nil, badRequest("Upstash-Not-Before", "Upstash-Not-Before must be a Unix time in seconds (before the year 10000)")
		}
		sub["notBefore"] = time.Unix(sec, 0).UTC().Format(time.RFC3339)
	case delay != "":
		d, err := duration(delay)
		if err != nil {
			return nil, nil, badRequest("Upstash-Delay", "Upstash-Delay must be a duration such as 10s, 5m, 2h or 1d")
		}
		sub["delayMs"] = d.Milliseconds()
	}
	if cb := h.Get("Upstash-Callback"); cb != "" {
		sub["callbackUrl"] = cb
	}
	// retryd's own: the tenant's credential and proxy a delivery uses (the
	// API checks at submit that the tenant has them).
	for _, c := range []struct{ header, member string }{{handlers.CredentialHeader, "credential"}, {handlers.ProxyHeader, "proxy"}} {
		if v := h.Get(c.header); v != "" {
			if err := names.Credential.Check(c.header, v); err != nil {
				return nil, nil, err
			}
			sub[c.member] = v
		}
	}
	if len(headers) > 0 {
		sub["headers"] = headers
	}
	if len(body) > 0 {
		sub["body"] = string(body)
	}
	return sub, extra, nil
}

// extras reads the fields a publish adds to retryd's submission.
func extras(h http.Header) (*record.QStash, error) {
	q := &record.QStash{
		RetryDelay: strings.TrimSpace(h.Get("Upstash-Retry-Delay")), FailureCallback: h.Get("Upstash-Failure-Callback"),
		FlowControlKey: h.Get("Upstash-Flow-Control-Key"),
	}
	if err := checkNames(h); err != nil {
		return nil, err
	}
	if v := h.Get("Upstash-Callback-Workflow-RunId"); v != "" {
		if err := names.WorkflowRun.Check("Upstash-Callback-Workflow-RunId", v); err != nil {
			return nil, err
		}
	}
	q.CallbackHeaders = forwardedHeaders(h, "Upstash-Callback-")
	q.FailureHeaders = forwardedHeaders(h, "Upstash-Failure-Callback-")
	for _, f := range []struct {
		what string
		h    map[string]string
	}{{"Upstash-Callback-Forward-*", q.CallbackHeaders}, {"Upstash-Failure-Callback-Forward-*", q.FailureHeaders}} {
		if err := submit.CheckHeaders(f.h); err != nil {
			return nil, badRequest(f.what, f.what+": "+err.Error())
		}
	}
	// Several labels: Upstash-Label "a,b" (or repeated). Label keeps the
	// first, as QStash's legacy field does.
	for _, v := range h.Values("Upstash-Label") {
		for _, l := range strings.Split(v, ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(q.Labels, l) {
				if err := names.Label.Check("Upstash-Label", l); err != nil {
					return nil, err
				}
				if len(q.Labels) == MaxLabels {
					// Refused at once: a header of many short labels
					// must not grow a list it then searches for each.
					return nil, badRequest("Upstash-Label", fmt.Sprintf("Upstash-Label: at most %d labels", MaxLabels))
				}
				q.Labels = append(q.Labels, l)
			}
		}
	}
	if len(q.Labels) > 0 {
		q.Label = q.Labels[0]
	}
	if len(q.Labels) == 1 {
		q.Labels = nil // Label says it all (AllLabels)
	}
	if name := h.Get("Upstash-Queue-Name"); name != "" {
		if err := validQueue(name); err != nil {
			return nil, badRequest("Upstash-Queue-Name", "Upstash-Queue-Name: a queue's name is 1 to 128 of letters, digits, _ . : and -")
		}
		q.Queue = name
	}
	if v := h.Get("Upstash-Redact-Fields"); v != "" {
		f, err := redactFields(v)
		if err != nil {
			return nil, err
		}
		q.Redact = f
	}
	if q.RetryDelay != "" {
		if _, err := delayexpr.Compile(q.RetryDelay); err != nil {
			return nil, badRequest("Upstash-Retry-Delay", "Upstash-Retry-Delay "+names.Quote(q.RetryDelay)+": "+err.Error())
		}
	}
	if cb := q.FailureCallback; cb != "" {
		// The rules of callbackUrl: absolute http(s), a host, no
		// user:password, at most 2048 characters.
		if _, err := egress.ValidateURL(cb); err != nil {
			return nil, badRequest("Upstash-Failure-Callback", "Upstash-Failure-Callback "+err.Error())
		}
	}
	return q, nil
}

// FlowControl is what Upstash-Flow-Control-Key and -Value ask for.
type FlowControl struct {
	Key         string
	Parallelism int
	Rate        int
	Period      time.Duration
}

// flowControl parses "parallelism=2, rate=10, period=1m" for key.
func flowControl(key, value string) (FlowControl, error) {
	fc := FlowControl{Key: key, Period: time.Second}
	if key == "" {
		return fc, badRequest("Upstash-Flow-Control-Key", "Upstash-Flow-Control-Value needs an Upstash-Flow-Control-Key")
	}
	if strings.TrimSpace(value) == "" {
		return fc, badRequest("Upstash-Flow-Control-Value", "Upstash-Flow-Control-Value must set parallelism or rate, like \"parallelism=2, rate=10, period=1m\"")
	}
	for _, part := range strings.Split(value, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fc, badRequest("Upstash-Flow-Control-Value", "Upstash-Flow-Control-Value: "+names.Quote(part)+" is not name=value")
		}
		var err error
		switch strings.TrimSpace(name) {
		case "parallelism":
			fc.Parallelism, err = strconv.Atoi(strings.TrimSpace(v))
			if fc.Parallelism < 1 {
				err = errors.New("below 1")
			}
		case "rate":
			fc.Rate, err = strconv.Atoi(strings.TrimSpace(v))
			if fc.Rate < 1 {
				err = errors.New("below 1")
			}
		case "period":
			fc.Period, err = duration(v)
			if err == nil && fc.Period < time.Second {
				err = errors.New("below 1s")
			}
		default:
			err = errors.New("unknown setting (parallelism, rate, period)")
		}
		if err != nil {
			return fc, badRequest("Upstash-Flow-Control-Value", "Upstash-Flow-Control-Value: "+names.Quote(strings.TrimSpace(part))+": "+err.Error())
		}
	}
	return fc, nil
}

// dedupKey is the Idempotency-Key a publish maps to: its deduplication id,
// or a hash of its content with content-based deduplication.
func dedupKey(h http.Header, dest string, body []byte) string {
	if id := h.Get("Upstash-Deduplication-Id"); id != "" {
		return "qstash:" + id
	}
	if strings.EqualFold(h.Get("Upstash-Content-Based-Deduplication"), "true") {
		sum := sha256.New()
		sum.Write([]byte(dest + "\n"))
		var names []string
		for k := range h {
			if strings.HasPrefix(strings.ToLower(k), "upstash-forward-") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			sum.Write([]byte(k + ":" + strings.Join(h[k], ",") + "\n"))
		}
		sum.Write(body)
		return "qstash-content:" + hex.EncodeToString(sum.Sum(nil))
	}
	return ""
}

// MaxLabels bounds a message's labels.
const MaxLabels = 20

// namedHeaders are the headers that carry a single name the client
// chose, and its kind. Labels (a list) are checked one by one as they
// are read.
var namedHeaders = []struct {
	header string
	kind   names.Kind
}{
	{"Upstash-Flow-Control-Key", names.FlowKey},
	{"Upstash-Deduplication-Id", names.DedupID},
	{"Upstash-Queue-Name", names.Queue},
	{"Upstash-Schedule-Id", names.ScheduleID},
}

// checkNames refuses a publish whose named headers hold a control
// character or are longer than their kind allows, naming the header.
func checkNames(h http.Header) error {
	for _, n := range namedHeaders {
		if err := n.kind.Check(n.header, h.Get(n.header)); err != nil {
			return err
		}
	}
	return nil
}

// redactFields reads Upstash-Redact-Fields: "body", "header" (every
// header) and "header[Name]", comma-separated.
func redactFields(v string) (*record.RedactFields, error) {
	f := &record.RedactFields{}
	if strings.Count(v, ",") >= submit.MaxHeaders+2 {
		return nil, badRequest("Upstash-Redact-Fields", fmt.Sprintf("Upstash-Redact-Fields: at most %d entries (body, header and one header[Name] per header)", submit.MaxHeaders+2))
	}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "body":
			f.Body = true
		case part == "header":
			f.AllHeaders = true
		case strings.HasPrefix(part, "header[") && strings.HasSuffix(part, "]") && len(part) > len("header[]"):
			name := part[len("header[") : len(part)-1]
			if err := names.HeaderName.Check("Upstash-Redact-Fields", name); err != nil {
				return nil, err
			}
			f.Headers = append(f.Headers, name)
		default:
			return nil, badRequest("Upstash-Redact-Fields", "Upstash-Redact-Fields: "+names.Quote(part)+
				" is not body, header or header[Name]")
		}
	}
	return f, nil
}

// RedactHeaders masks the headers f hides.
func RedactHeaders(h map[string][]string, f *record.RedactFields) map[string][]string {
	for k := range h {
		if f.Header(k) {
			h[k] = []string{redact.Mask}
		}
	}
	return h
}
