package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

func TestRawScheduleDoublesThenCaps(t *testing.T) {
	t.Parallel()
	p := Policy{Base: time.Second, Max: 10 * time.Second}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := p.Raw(i + 1); got != w {
			t.Errorf("Raw(%d) = %v, want %v", i+1, got, w)
		}
	}
	// Very large n must not overflow into a negative or tiny delay.
	for _, n := range []int{30, 63, 64, 100, 1 << 20} {
		if got := p.Raw(n); got != p.Max {
			t.Errorf("Raw(%d) = %v, want the cap %v", n, got, p.Max)
		}
	}
	big := Policy{Base: time.Hour, Max: 7 * 24 * time.Hour}
	if got := big.Raw(25); got != big.Max {
		t.Errorf("Raw(25) with 1h base = %v, want cap %v", got, big.Max)
	}
}

func TestDelayJitterStaysWithinBounds(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 1000 * time.Millisecond, Max: time.Hour}
	for n := 1; n <= 12; n++ {
		raw := p.Raw(n)
		lo, hi := time.Duration(float64(raw)*JitterMin), time.Duration(float64(raw)*JitterMax)
		if got := p.Delay(n, 0); got != lo {
			t.Errorf("Delay(%d, u=0) = %v, want %v", n, got, lo)
		}
		if got := p.Delay(n, 1); got != hi {
			t.Errorf("Delay(%d, u=1) = %v, want %v", n, got, hi)
		}
		for i := 0; i < 2000; i++ {
			got := p.Next(n, rand.Float64(), Result{})
			if got < lo || got > hi {
				t.Fatalf("Next(%d) = %v, outside [%v, %v]", n, got, lo, hi)
			}
		}
	}
}

func TestNextHonorsRetryAfterCappedWithoutJitter(t *testing.T) {
	t.Parallel()
	p := Policy{Base: time.Second, Max: 30 * time.Second}
	if got := p.Next(1, 0.5, Result{RetryAfter: 7 * time.Second, HasRetryAfter: true}); got != 7*time.Second {
		t.Errorf("Retry-After 7s: got %v, want exactly 7s", got)
	}
	if got := p.Next(1, 0.5, Result{RetryAfter: time.Hour, HasRetryAfter: true}); got != 30*time.Second {
		t.Errorf("Retry-After 1h: got %v, want the cap 30s", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"5", 5 * time.Second, true},
		{" 120 ", 120 * time.Second, true},
		{"-3", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"1.5", 1500 * time.Millisecond, true},
		{"99999999999999999", 365 * 24 * time.Hour, true},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"Mon, 32 Jan 2026 00:00:00 GMT", 0, false},
		{"6m5s", 6*time.Minute + 5*time.Second, true},
		{"1h30m3s", time.Hour + 30*time.Minute + 3*time.Second, true},
		{"250ms", 250 * time.Millisecond, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"-1s", 0, false},
		{"5x", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.wantOK)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyEveryRowOfTheContract(t *testing.T) {
	t.Parallel()
	now := time.Now()
	resp := func(code int, retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: code, Header: h}
	}
	cases := []struct {
		name      string
		resp      *http.Response
		err       error
		kind      Kind
		class     FailureClass
		retryWait time.Duration
	}{
		{"200", resp(200, ""), nil, Success, "", 0},
		{"201", resp(201, ""), nil, Success, "", 0},
		{"204", resp(204, ""), nil, Success, "", 0},
		{"299", resp(299, ""), nil, Success, "", 0},
		{"301 not followed", resp(301, ""), nil, Permanent, Redirect, 0},
		{"302", resp(302, ""), nil, Permanent, Redirect, 0},
		{"304", resp(304, ""), nil, Permanent, Redirect, 0},
		{"400", resp(400, ""), nil, Permanent, ClientError, 0},
		{"401", resp(401, ""), nil, Permanent, ClientError, 0},
		{"403", resp(403, ""), nil, Permanent, ClientError, 0},
		{"404", resp(404, ""), nil, Permanent, ClientError, 0},
		{"409", resp(409, ""), nil, Permanent, ClientError, 0},
		{"410", resp(410, ""), nil, Permanent, ClientError, 0},
		{"422", resp(422, ""), nil, Permanent, ClientError, 0},
		{"408 retryable", resp(408, ""), nil, Retryable, Timeout, 0},
		{"425 retryable", resp(425, ""), nil, Retryable, RateLimited, 0},
		{"429", resp(429, ""), nil, Retryable, RateLimited, 0},
		{"429 Retry-After", resp(429, "3"), nil, Retryable, RateLimited, 3 * time.Second},
		{"500", resp(500, ""), nil, Retryable, ServerError, 0},
		{"502", resp(502, ""), nil, Retryable, ServerError, 0},
		{"503 Retry-After", resp(503, "2"), nil, Retryable, ServerError, 2 * time.Second},
		{"504", resp(504, ""), nil, Retryable, ServerError, 0},
		{"599", resp(599, ""), nil, Retryable, ServerError, 0},
		{"deadline", nil, fmt.Errorf("Get: %w", context.DeadlineExceeded), Retryable, Timeout, 0},
		{"net timeout", nil, &net.OpError{Op: "read", Err: timeoutErr{}}, Retryable, Timeout, 0},
		{"refused", nil, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, Retryable, Network, 0},
		{"dns", nil, &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}, Retryable, Network, 0},
		{"tls", nil, errors.New("tls: failed to verify certificate"), Retryable, Network, 0},
		{"blocked", nil, fmt.Errorf("dial: %w", ErrBlocked), Permanent, BlockedDestination, 0},
		{"invalid", nil, fmt.Errorf("build: %w", ErrInvalid), Permanent, ClientError, 0},
	}
	for _, c := range cases {
		got := Classify(c.resp, c.err, now)
		if got.Kind != c.kind || got.Class != c.class || got.RetryAfter != c.retryWait {
			t.Errorf("%s: Classify = %+v; want kind %s class %q retryAfter %v", c.name, got, c.kind, c.class, c.retryWait)
		}
	}
}

func TestDelayFuncLeavesTheDueTimeToRetrydsTimer(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := DelayFunc(func() time.Time { return now }, 2*time.Second, Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second})
	task := asynq.NewTask("x", nil)
	if got := f(0, At(now.Add(10*time.Second), errors.New("503")), task); got != 12*time.Second {
		t.Errorf("due in 10s: delay %v, want 12s (the timer starts it; asynq is the safety net)", got)
	}
	if got := f(0, At(now.Add(-time.Millisecond), errors.New("stop")), task); got != 0 {
		t.Errorf("due already: delay %v, want 0", got)
	}
	if got := f(0, NotBefore(now.Add(3*time.Second), errors.New("500")), task); got != 4*time.Second {
		t.Errorf("untimed, due in 3s: delay %v, want 4s (rounded up past asynq's whole seconds)", got)
	}
	if got := f(3, errors.New("redis down"), task); got <= 0 || got > 36*time.Second {
		t.Errorf("infrastructure error: delay %v, want a short positive backoff", got)
	}
	if IsFailure(At(now, ErrNotDue)) {
		t.Error("IsFailure(not due) = true, want false")
	}
	if !IsFailure(At(now, errors.New("503"))) {
		t.Error("IsFailure(503) = false, want true")
	}
}

// A callback's retry (Untimed) keeps no lag of its own, and changes
// nothing for the tasks after it: asynq calls DelayFunc from many worker
// goroutines at once (run with -race).
func TestDelayFuncUntimedChangesNoLaterDelay(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	f := DelayFunc(func() time.Time { return now }, 2*time.Second, Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second})
	due := now.Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := f(0, NotBefore(due, errors.New("callback")), nil); got != 4*time.Second {
				t.Errorf("an untimed retry waits %v, want 4s (a second over its due time)", got)
			}
		}()
	}
	wg.Wait()
	if got := f(0, At(due, errors.New("timed")), nil); got != 5*time.Second {
		t.Errorf("a timed retry after untimed ones waits %v, want 5s (its due time and the 2 s lag)", got)
	}
}

// On /v2, QStash's rules: every non-2xx is retried (retryd's own API keeps
// most 4xx permanent), but 489 with Upstash-NonRetryable-Error: true, and
// Retry-After or X-RateLimit-Reset(-Requests|-Tokens) on any answer give
// the wait (seconds, an HTTP-date or a duration), capped at a day.
func TestClassifyQStashRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := func(code int, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: code, Header: h}
	}
	cases := []struct {
		name      string
		resp      *http.Response
		err       error
		kind      Kind
		class     FailureClass
		retryWait time.Duration
		hasWait   bool
	}{
		{"200", resp(200), nil, Success, "", 0, false},
		{"204", resp(204), nil, Success, "", 0, false},
		{"302 retried", resp(302), nil, Retryable, Redirect, 0, false},
		{"400 retried", resp(400), nil, Retryable, ClientError, 0, false},
		{"404 retried", resp(404), nil, Retryable, ClientError, 0, false},
		{"410 retried", resp(410), nil, Retryable, ClientError, 0, false},
		{"489 alone retried", resp(489), nil, Retryable, ClientError, 0, false},
		{"489 non-retryable", resp(489, "Upstash-NonRetryable-Error", "true"), nil, Permanent, ClientError, 0, false},
		{"489 non-retryable, any case", resp(489, "Upstash-NonRetryable-Error", "TRUE"), nil, Permanent, ClientError, 0, false},
		{"489 header false", resp(489, "Upstash-NonRetryable-Error", "false"), nil, Retryable, ClientError, 0, false},
		{"500 header on another status", resp(500, "Upstash-NonRetryable-Error", "true"), nil, Retryable, ServerError, 0, false},
		{"429 seconds", resp(429, "Retry-After", "10"), nil, Retryable, RateLimited, 10 * time.Second, true},
		{"404 Retry-After read too", resp(404, "Retry-After", "7"), nil, Retryable, ClientError, 7 * time.Second, true},
		{"500 duration", resp(500, "Retry-After", "6m5s"), nil, Retryable, ServerError, 6*time.Minute + 5*time.Second, true},
		{"500 date", resp(500, "Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), nil, Retryable, ServerError, 90 * time.Second, true},
		{"X-RateLimit-Reset", resp(429, "X-RateLimit-Reset", "12"), nil, Retryable, RateLimited, 12 * time.Second, true},
		{"X-RateLimit-Reset-Requests", resp(429, "X-RateLimit-Reset-Requests", "1m2s"), nil, Retryable, RateLimited, 62 * time.Second, true},
		{"X-RateLimit-Reset-Tokens", resp(429, "X-RateLimit-Reset-Tokens", "250ms"), nil, Retryable, RateLimited, 250 * time.Millisecond, true},
		{"Retry-After first", resp(429, "Retry-After", "3", "X-RateLimit-Reset", "9"), nil, Retryable, RateLimited, 3 * time.Second, true},
		{"garbage, then a good one", resp(429, "Retry-After", "soon", "X-RateLimit-Reset-Tokens", "4s"), nil, Retryable, RateLimited, 4 * time.Second, true},
		{"capped at a day", resp(503, "Retry-After", "172800"), nil, Retryable, ServerError, 24 * time.Hour, true},
		{"duration capped at a day", resp(503, "X-RateLimit-Reset", "49h"), nil, Retryable, ServerError, 24 * time.Hour, true},
		{"network", nil, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, Retryable, Network, 0, false},
		{"blocked", nil, fmt.Errorf("dial: %w", ErrBlocked), Permanent, BlockedDestination, 0, false},
	}
	for _, c := range cases {
		got := QStashRules.Classify(c.resp, c.err, now)
		if got.Kind != c.kind || got.Class != c.class || got.RetryAfter != c.retryWait || got.HasRetryAfter != c.hasWait {
			t.Errorf("%s: QStashRules.Classify = %+v; want kind %s class %q retryAfter %v (%v)", c.name, got, c.kind, c.class, c.retryWait, c.hasWait)
		}
		// retryd's own API is unchanged: a 4xx stays permanent there.
		if c.resp != nil && c.resp.StatusCode == 404 {
			if own := Classify(c.resp, nil, now); own.Kind != Permanent {
				t.Errorf("%s: retryd's rules made a 404 %s", c.name, own.Kind)
			}
		}
	}
}

// Every spelling of a long wait is read as a long wait, never as garbage
// that falls back to the ordinary backoff: each caller's cap then holds.
func TestParseRetryAfterReadsAnySizeAsLong(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []string{"100d", "1e9", "99999999999999999999999", "9999999999", "1e400", "99999999999h", "1.5e12"} {
		got, ok := ParseRetryAfter(v, now)
		if !ok || got < 24*time.Hour || got > MaxRetryAfter {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want over a day, at most %v", v, got, ok, MaxRetryAfter)
		}
		// /v2: capped at a day.
		res := QStashRules.Classify(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}, nil, now)
		if !res.HasRetryAfter || res.RetryAfter != 24*time.Hour {
			t.Errorf("QStash Retry-After %q: wait %v (%v); want a day", v, res.RetryAfter, res.HasRetryAfter)
		}
		// /requests: capped by maxBackoffMs.
		p := Policy{Base: 100 * time.Millisecond, Max: 4 * time.Second}
		own := Classify(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}, nil, now)
		if w := p.Next(1, 0.5, own); w != 4*time.Second {
			t.Errorf("retryd Retry-After %q: wait %v; want maxBackoffMs 4s", v, w)
		}
	}
	for _, c := range []struct {
		in   string
		want time.Duration
	}{{"1.5", 1500 * time.Millisecond}, {"2d", 48 * time.Hour}, {"1d1h", 25 * time.Hour}, {"2d12h", 60 * time.Hour}, {"3e1", 30 * time.Second}} {
		if got, ok := ParseRetryAfter(c.in, now); !ok || got != c.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{"inf", "NaN", "-1e9", "0x10", "1_000", "d", "1dd", "1e", "+Inf", "-99999999999999999999999", "1d-1h"} {
		if got, ok := ParseRetryAfter(bad, now); ok {
			t.Errorf("ParseRetryAfter(%q) = %v, true; want refused", bad, got)
		}
	}
}

// FuzzParseRetryAfter: whatever a destination sends, the wait is never
// negative and never past MaxRetryAfter, and the QStash and retryd caps
// hold on it.
func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"0", "5", "1.5", "1e9", "100d", "99999999999999999999999", "9999999999",
		"6m5s", "-3", "soon", "1e400", "Mon, 02 Jan 2006 15:04:05 GMT", "99999999999h", "2d12h", "inf", "NaN", ".5", "5."} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; a refusal must be 0", v, d)
		}
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v; want within [0, %v]", v, d, MaxRetryAfter)
		}
		res := QStashRules.Classify(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}, nil, now)
		if res.RetryAfter < 0 || res.RetryAfter > 24*time.Hour {
			t.Fatalf("QStash Retry-After %q: wait %v; want at most a day", v, res.RetryAfter)
		}
		p := Policy{Base: 100 * time.Millisecond, Max: 4 * time.Second}
		own := Classify(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}, nil, now)
		if w := p.Next(1, 0.5, own); w < 0 || w > 4*time.Second {
			t.Fatalf("retryd Retry-After %q: wait %v; want within maxBackoffMs", v, w)
		}
	})
}

// Only a request retryd refused to send before dialling made no call: every
// answer and every transport failure of a dial that was tried is a call.
func TestClassifySaysWhichAttemptsMadeNoCall(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	resp := &http.Response{StatusCode: 503, Header: http.Header{}}
	cases := []struct {
		name   string
		resp   *http.Response
		err    error
		noCall bool
	}{
		{"blocked", nil, fmt.Errorf("dial: %w", ErrBlocked), true},
		{"invalid", nil, fmt.Errorf("build: %w", ErrInvalid), true},
		{"refused", nil, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{"dns", nil, &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}, false},
		{"deadline", nil, fmt.Errorf("Get: %w", context.DeadlineExceeded), false},
		{"503", resp, nil, false},
	}
	for _, c := range cases {
		for _, rules := range []Rules{RetrydRules, QStashRules} {
			if got := rules.Classify(c.resp, c.err, now); got.NoCall != c.noCall {
				t.Errorf("%s (rules %d): NoCall = %v, want %v", c.name, rules, got.NoCall, c.noCall)
			}
		}
	}
}

// A credential that could not be made is credential_error, with no call:
// permanent when the credential says so (a token endpoint's 4xx), else
// retried, under either rules, however deeply it is wrapped.
func TestCredentialErrorsAreClassified(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		err  error
		kind Kind
	}{
		{&CredentialError{Permanent: true, Err: errors.New("token endpoint answered 400 invalid_scope")}, Permanent},
		{fmt.Errorf("attempt: %w", &CredentialError{Err: errors.New("token endpoint unreachable")}), Retryable},
	} {
		for _, rules := range []Rules{RetrydRules, QStashRules} {
			got := rules.Classify(nil, c.err, now)
			if got.Kind != c.kind || got.Class != CredentialFailed || !got.NoCall {
				t.Errorf("%v (rules %d): %+v, want %s credential_error with no call", c.err, rules, got, c.kind)
			}
		}
	}
}
