// Package retry holds retryd's delivery rules as pure functions: how one
// attempt's result is classified (success, retryable, permanent), how long to
// wait before the next attempt, and the adapter that hands that wait to
// asynq's RetryDelayFunc.
package retry

import (
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

// ParseRetryAfter reads a Retry-After header value: delta seconds, an
// HTTP-date or a Go-style duration ("6m5s", "1.5s", "250ms": what
// rate-limited APIs send in X-RateLimit-Reset-Requests, and QStash reads).
// A date in the past means "now" (0). ok is false for anything else,
// including negative numbers and garbage.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Cap absurd values before converting so they cannot overflow.
		if secs > int64(365*24*time.Hour/time.Second) {
			secs = int64(365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		d, derr := time.ParseDuration(v)
		if derr != nil || d < 0 {
			return 0, false
		}
		return d, true
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}
