// Package retry holds retryd's delivery rules as pure functions: how one
// attempt's result is classified (success, retryable, permanent), how long to
// wait before the next attempt, and the adapter that hands that wait to
// asynq's RetryDelayFunc.
package retry

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy is one request's backoff policy.
type Policy struct {
	Base time.Duration // backoffMs
	Max  time.Duration // maxBackoffMs
}

// JitterMin and JitterMax bound the factor applied to every computed delay.
const (
	JitterMin = 0.8
	JitterMax = 1.2
)

// Raw returns the delay before retry n (n = 1 for the first retry) without
// jitter: min(Max, Base·2^(n−1)).
func (p Policy) Raw(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	// 2^62 ns is far above any cap (7 days), so clamp the exponent early to
	// keep the multiplication from overflowing.
	if n > 40 {
		return p.Max
	}
	d := float64(p.Base) * math.Pow(2, float64(n-1))
	if d >= float64(p.Max) {
		return p.Max
	}
	return time.Duration(d)
}

// Delay returns the jittered delay before retry n. u is a sample of U(0,1)
// (rand.Float64 in production; fixed in tests).
func (p Policy) Delay(n int, u float64) time.Duration {
	f := JitterMin + (JitterMax-JitterMin)*u
	return time.Duration(float64(p.Raw(n)) * f)
}

// Next returns the wait before retry n after an attempt classified as res:
// the destination's Retry-After when it gave one (no jitter, capped at
// Max), else the jittered backoff with u a sample of U(0,1).
func (p Policy) Next(n int, u float64, res Result) time.Duration {
	if res.HasRetryAfter {
		return min(res.RetryAfter, p.Max)
	}
	return p.Delay(n, u)
}

// ParseRetryAfter reads a Retry-After header value: seconds (an integer
// of any length, or a decimal such as "1.5" or "1e9"), an HTTP-date, or a
// duration ("6m5s", "1.5s", "250ms", "100d": what rate-limited APIs send
// in X-RateLimit-Reset-Requests, and QStash reads). A wait longer than
// MaxRetryAfter, however it is spelled, reads as MaxRetryAfter, so each
// caller's own cap applies to it. A date in the past means "now" (0). ok
// is false for anything else, including negative values and garbage.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, ok := parseSeconds(v); ok {
		return capWait(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(min(t.Sub(now), MaxRetryAfter), 0), true
	}
	if ns, ok := parseDuration(v); ok {
		return capWait(ns), true
	}
	return 0, false
}

// capWait turns ns nanoseconds (finite or not, never negative) into a
// Duration of at most MaxRetryAfter.
func capWait(ns float64) time.Duration {
	if ns >= float64(MaxRetryAfter) {
		return MaxRetryAfter
	}
	return time.Duration(ns)
}

// parseSeconds reads a non-negative decimal number of seconds: digits,
// an optional fraction and exponent. Spellings ParseFloat also takes
// ("inf", "NaN", hex, underscores) are refused; a number too large for a
// float64 is +Inf, which capWait caps.
func parseSeconds(v string) (float64, bool) {
	startsLikeANumber := v[0] == '.' || v[0] >= '0' && v[0] <= '9'
	if !startsLikeANumber || strings.Trim(v, "0123456789.eE+-") != "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return f, true
}

// durationUnits are the units a Retry-After duration may use: Go's, and
// d for a day.
var durationUnits = map[string]float64{
	"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9, "d": 86400e9,
}

// parseDuration reads a non-negative duration such as "1h30m", "1.5s" or
// "100d" as nanoseconds, in a float64 that does not overflow (a sum too
// large is +Inf).
func parseDuration(v string) (float64, bool) {
	var total float64
	for v != "" {
		i := 0
		for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
			i++
		}
		j := i
		for j < len(v) && (v[j] < '0' || v[j] > '9') && v[j] != '.' {
			j++
		}
		num, unit := v[:i], v[i:j]
		scale, known := durationUnits[unit]
		if num == "" || num == "." || !known {
			return 0, false
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		total += f * scale
		v = v[j:]
	}
	return total, true
}
