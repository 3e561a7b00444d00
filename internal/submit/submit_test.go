package submit

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/retryd/retryd/internal/record"
	"slices"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestParseAppliesDefaults(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://example.com/hook"}`), now)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if r.Method != "GET" || r.MaxRetries != 5 || r.BackoffMs != 1000 || r.MaxBackoffMs != 3_600_000 ||
		r.TimeoutMs != 30_000 || !r.NextAttemptAt.Equal(now) || r.Host != "example.com" || len(r.Headers) != 0 {
		t.Errorf("defaults not applied: %+v", r)
	}
}

func TestParseHostIsLowercased(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://API.Example.com:8443/x"}`), now)
	if err != nil || r.Host != "api.example.com" {
		t.Errorf("host %q, %v; want api.example.com (DLQ host filters match it)", r.Host, err)
	}
}

func TestParseOlderClientShape(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://api.example.com/sms","method":"post","body":"{\"to\":\"+1555\"}","maxRetries":3,"backoffMs":500}`), now)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if r.Method != "POST" || r.Body != `{"to":"+1555"}` || r.MaxRetries != 3 || r.BackoffMs != 500 {
		t.Errorf("got %+v", r)
	}
}

func TestParseScheduling(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://e.com","delayMs":2000}`), now)
	if err != nil || !r.NextAttemptAt.Equal(now.Add(2*time.Second)) {
		t.Errorf("delayMs 2000: %v, %v", r, err)
	}
	r, err = Parse([]byte(`{"url":"https://e.com","notBefore":"2026-06-02T12:00:00Z"}`), now)
	if err != nil || !r.NextAttemptAt.Equal(now.Add(24*time.Hour)) {
		t.Errorf("notBefore: %v, %v", r, err)
	}
	r, err = Parse([]byte(`{"url":"https://e.com","notBefore":"2020-01-01T00:00:00Z"}`), now)
	if err != nil || !r.NextAttemptAt.Equal(now) {
		t.Errorf("notBefore in the past should mean now: %v, %v", r, err)
	}
}

func TestParseHeadersAreCanonicalized(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://e.com","headers":{"x-api-token":"s3cret","content-type":"application/json"}}`), now)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if r.Headers["X-Api-Token"] != "s3cret" || r.Headers["Content-Type"] != "application/json" {
		t.Errorf("headers = %v", r.Headers)
	}
}

func TestParseRejectsWithTheFieldNamed(t *testing.T) {
	t.Parallel()
	manyHeaders := make([]string, 65)
	for i := range manyHeaders {
		manyHeaders[i] = fmt.Sprintf(`"X-H%d":"v"`, i)
	}
	bigHeader := `{"url":"https://e.com","headers":{"X-Big":"` + strings.Repeat("a", 16<<10) + `"}}`
	cases := []struct {
		name, body, field string
	}{
		{"empty", ``, ""},
		{"not json", `{"url":`, ""},
		{"array", `[]`, ""},
		{"string", `"x"`, ""},
		{"null", `null`, ""},
		{"two objects", `{"url":"https://e.com"}{}`, ""},
		{"missing url", `{}`, "url"},
		{"empty url", `{"url":""}`, "url"},
		{"url not string", `{"url":5}`, "url"},
		{"relative url", `{"url":"/hook"}`, "url"},
		{"ftp url", `{"url":"ftp://e.com/x"}`, "url"},
		{"no host", `{"url":"http:///x"}`, "url"},
		{"userinfo", `{"url":"https://u:p@e.com"}`, "url"},
		{"long url", `{"url":"https://e.com/` + strings.Repeat("a", 2048) + `"}`, "url"},
		{"bad method", `{"url":"https://e.com","method":"TRACE"}`, "method"},
		{"method not string", `{"url":"https://e.com","method":1}`, "method"},
		{"headers not object", `{"url":"https://e.com","headers":"x"}`, "headers"},
		{"header value not string", `{"url":"https://e.com","headers":{"X":1}}`, "headers"},
		{"too many headers", `{"url":"https://e.com","headers":{` + strings.Join(manyHeaders, ",") + `}}`, "headers"},
		{"headers too big", bigHeader, "headers"},
		{"hop-by-hop Connection", `{"url":"https://e.com","headers":{"Connection":"close"}}`, "headers"},
		{"hop-by-hop keep-alive", `{"url":"https://e.com","headers":{"keep-alive":"1"}}`, "headers"},
		{"hop-by-hop TE", `{"url":"https://e.com","headers":{"TE":"trailers"}}`, "headers"},
		{"Transfer-Encoding", `{"url":"https://e.com","headers":{"Transfer-Encoding":"chunked"}}`, "headers"},
		{"Upgrade", `{"url":"https://e.com","headers":{"Upgrade":"websocket"}}`, "headers"},
		{"Proxy-Authorization", `{"url":"https://e.com","headers":{"Proxy-Authorization":"x"}}`, "headers"},
		{"Host", `{"url":"https://e.com","headers":{"host":"evil"}}`, "headers"},
		{"bad header name", `{"url":"https://e.com","headers":{"Bad Name":"x"}}`, "headers"},
		{"CRLF in value", `{"url":"https://e.com","headers":{"X":"a\r\nInjected: 1"}}`, "headers"},
		{"duplicate header", `{"url":"https://e.com","headers":{"X-A":"1","x-a":"2"}}`, "headers"},
		{"body not string", `{"url":"https://e.com","body":{"a":1}}`, "body"},
		{"maxRetries negative", `{"url":"https://e.com","maxRetries":-1}`, "maxRetries"},
		{"maxRetries 26", `{"url":"https://e.com","maxRetries":26}`, "maxRetries"},
		{"maxRetries float", `{"url":"https://e.com","maxRetries":2.5}`, "maxRetries"},
		{"maxRetries string", `{"url":"https://e.com","maxRetries":"3"}`, "maxRetries"},
		{"maxRetries huge", `{"url":"https://e.com","maxRetries":1e99}`, "maxRetries"},
		{"backoff low", `{"url":"https://e.com","backoffMs":99}`, "backoffMs"},
		{"backoff high", `{"url":"https://e.com","backoffMs":3600001}`, "backoffMs"},
		{"maxBackoff below backoff", `{"url":"https://e.com","backoffMs":5000,"maxBackoffMs":4000}`, "maxBackoffMs"},
		{"maxBackoff over 7 days", `{"url":"https://e.com","maxBackoffMs":604800001}`, "maxBackoffMs"},
		{"timeout low", `{"url":"https://e.com","timeoutMs":99}`, "timeoutMs"},
		{"timeout high", `{"url":"https://e.com","timeoutMs":900001}`, "timeoutMs"},
		{"delay negative", `{"url":"https://e.com","delayMs":-1}`, "delayMs"},
		{"delay over a year", `{"url":"https://e.com","delayMs":31536000001}`, "delayMs"},
		{"notBefore garbage", `{"url":"https://e.com","notBefore":"tomorrow"}`, "notBefore"},
		{"notBefore over a year", `{"url":"https://e.com","notBefore":"2027-06-02T12:00:00Z"}`, "notBefore"},
		{"delay and notBefore", `{"url":"https://e.com","delayMs":1,"notBefore":"2026-06-02T12:00:00Z"}`, "notBefore"},
		{"callback relative", `{"url":"https://e.com","callbackUrl":"/cb"}`, "callbackUrl"},
		{"callback not string", `{"url":"https://e.com","callbackUrl":true}`, "callbackUrl"},
		{"flowControl not object", `{"url":"https://e.com","flowControl":"tenant"}`, "flowControl"},
		{"flowControl array", `{"url":"https://e.com","flowControl":[1]}`, "flowControl"},
		{"flowControl unknown member", `{"url":"https://e.com","flowControl":{"burst":2}}`, "flowControl.burst"},
		{"flowControl empty key", `{"url":"https://e.com","flowControl":{"key":""}}`, "flowControl.key"},
		{"flowControl key not string", `{"url":"https://e.com","flowControl":{"key":7}}`, "flowControl.key"},
		{"flowControl key with newline", `{"url":"https://e.com","flowControl":{"key":"a\nb"}}`, "flowControl.key"},
		{"flowControl parallelism 0", `{"url":"https://e.com","flowControl":{"parallelism":0}}`, "flowControl.parallelism"},
		{"flowControl parallelism string", `{"url":"https://e.com","flowControl":{"parallelism":"2"}}`, "flowControl.parallelism"},
		{"flowControl rate 0", `{"url":"https://e.com","flowControl":{"rate":0}}`, "flowControl.rate"},
		{"flowControl period under 1s", `{"url":"https://e.com","flowControl":{"rate":1,"periodMs":999}}`, "flowControl.periodMs"},
		{"flowControl period without rate", `{"url":"https://e.com","flowControl":{"parallelism":1,"periodMs":1000}}`, "flowControl.periodMs"},
		{"credential not string", `{"url":"https://e.com","credential":7}`, "credential"},
		{"credential empty", `{"url":"https://e.com","credential":""}`, "credential"},
		{"credential too long", `{"url":"https://e.com","credential":"` + strings.Repeat("c", 129) + `"}`, "credential"},
		{"credential with a newline", `{"url":"https://e.com","credential":"a\nb"}`, "credential"},
		{"proxy not string", `{"url":"https://e.com","proxy":["p"]}`, "proxy"},
		{"proxy with a NUL", `{"url":"https://e.com","proxy":"a\u0000b"}`, "proxy"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.body), now)
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%s: got %v, want a *submit.Error", c.name, err)
			continue
		}
		if se.Field != c.field {
			t.Errorf("%s: field %q, want %q (message %q)", c.name, se.Field, c.field, se.Message)
		}
		if se.Message == "" {
			t.Errorf("%s: empty message", c.name)
		}
	}
}

func TestParseAcceptsTheBoundaries(t *testing.T) {
	t.Parallel()
	body := `{"url":"https://e.com","maxRetries":25,"backoffMs":100,"maxBackoffMs":604800000,"timeoutMs":900000,"delayMs":31536000000}`
	if _, err := Parse([]byte(body), now); err != nil {
		t.Errorf("upper/lower bounds refused: %v", err)
	}
	if _, err := Parse([]byte(`{"url":"https://e.com","maxRetries":0,"timeoutMs":100,"backoffMs":3600000}`), now); err != nil {
		t.Errorf("maxRetries 0 refused: %v", err)
	}
}

func TestParseFlowControl(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://e.com","flowControl":{"key":"tenant-1","parallelism":2,"rate":10,"periodMs":60000}}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if *r.FlowControl != (record.FlowControl{Key: "tenant-1", Parallelism: 2, Rate: 10, PeriodMs: 60000}) {
		t.Errorf("flowControl = %+v", *r.FlowControl)
	}
	if r.FlowKey() != "tenant-1" {
		t.Errorf("FlowKey = %q", r.FlowKey())
	}
	r, _ = Parse([]byte(`{"url":"https://E.com/x","flowControl":{"rate":5}}`), now)
	if r.FlowControl.PeriodMs != DefaultFlowPeriod || r.FlowKey() != "e.com:443" {
		t.Errorf("defaults: %+v, key %q", *r.FlowControl, r.FlowKey())
	}
}

func TestParseKeepsTheCredentialAndProxyNamed(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`{"url":"https://e.com","credential":"partner-oauth","proxy":"fixed-egress"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if r.Credential != "partner-oauth" || r.Proxy != "fixed-egress" {
		t.Errorf("credential %q, proxy %q; want partner-oauth, fixed-egress", r.Credential, r.Proxy)
	}
	r, _ = Parse([]byte(`{"url":"https://e.com","credential":null}`), now)
	if r.Credential != "" || r.Proxy != "" {
		t.Errorf("none named: credential %q, proxy %q", r.Credential, r.Proxy)
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	t.Parallel()
	if err := ValidIdempotencyKey(strings.Repeat("k", 255)); err != nil {
		t.Errorf("255 chars refused: %v", err)
	}
	if err := ValidIdempotencyKey(strings.Repeat("k", 256)); err == nil {
		t.Error("256 chars accepted")
	}
}

// FuzzParse checks that no input panics, that every rejection is a
// *submit.Error with a message, and that every accepted request is within
// the documented bounds. Its seed corpus runs with the normal suite.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://e.com"}`,
		`{"url":"https://e.com","method":"POST","headers":{"A":"b"},"body":"x","maxRetries":3,"backoffMs":100,"maxBackoffMs":1000,"timeoutMs":100,"delayMs":5}`,
		`{"url":"https://e.com","notBefore":"2026-06-01T12:00:01.5+02:00","callbackUrl":"http://cb.example/x"}`,
		`{"url":"http://[::1]:80/x","maxRetries":1e3}`,
		`{"url":null,"headers":null}`,
		`{"url":"https://e.com","headers":{"Connection":"x"}}`,
		`[1,2]`, `{`, ``, `{"url":"https://e.com"} x`,
		`{"url":"https://e.com","mehtod":"POST"}`,
		`{"id":"x","url":"https://e.com","status":"completed","callbackUrl":"https://e.com/cb","attempts":[]}`,
		`{"url":"https://e.com","flowControl":{"key":"t1","parallelism":2,"rate":10,"periodMs":60000}}`,
		`{"url":"https://e.com","flowControl":{"rate":-1,"periodMs":1e9}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body, now)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Message == "" {
				t.Fatalf("rejection %v is not a *submit.Error with a message", err)
			}
			return
		}
		var members map[string]any
		if json.Unmarshal(body, &members) == nil {
			for name := range members {
				if !slices.Contains(Known, name) {
					t.Fatalf("accepted unknown member %q", name)
				}
			}
		}
		if r.URL == "" || r.Host == "" || len(r.URL) > MaxURLLen {
			t.Fatalf("accepted a bad url %q", r.URL)
		}
		if r.MaxRetries < 0 || r.MaxRetries > MaxMaxRetries || r.BackoffMs < MinBackoffMs || r.BackoffMs > MaxBackoffMs ||
			r.MaxBackoffMs < r.BackoffMs || r.MaxBackoffMs > MaxMaxBackoffMs || r.TimeoutMs < MinTimeoutMs || r.TimeoutMs > MaxTimeoutMs {
			t.Fatalf("accepted out-of-bounds numbers: %+v", r)
		}
		if r.NextAttemptAt.Before(now) || r.NextAttemptAt.After(now.Add(MaxDelay)) {
			t.Fatalf("accepted a first attempt time %v", r.NextAttemptAt)
		}
		if len(r.Headers) > MaxHeaders {
			t.Fatalf("accepted %d headers", len(r.Headers))
		}
	})
}

func TestParseRefusesUnknownMembersByName(t *testing.T) {
	t.Parallel()
	for body, field := range map[string]string{
		`{"url":"https://e.com","mehtod":"POST"}`:                                    "mehtod",
		`{"url":"https://e.com","maxRetry":3}`:                                       "maxRetry",
		`{"url":"https://e.com","callbackURL":"https://e.com/cb"}`:                   "callbackURL",
		`{"id":"r1","url":"https://e.com","status":"completed","attempts":[],"x":1}`: "attempts",
	} {
		_, err := Parse([]byte(body), now)
		var se *Error
		if !errors.As(err, &se) || se.Field != field || !strings.Contains(se.Message, field) {
			t.Errorf("Parse(%s) = %v; want a rejection naming %q", body, err, field)
		}
	}
}

// The notBefore format error's example is a time the limit accepts.
func TestNotBeforeErrorOffersATimeItTakes(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, err := Parse([]byte(`{"url":"https://example.com/","notBefore":"tomorrow"}`), now)
	msg := fmt.Sprint(err)
	i := strings.LastIndex(msg, " ")
	if err == nil || i < 0 {
		t.Fatalf("a bad notBefore: %v", err)
	}
	example := msg[i+1:]
	if _, err := Parse([]byte(`{"url":"https://example.com/","notBefore":"`+example+`"}`), now); err != nil {
		t.Errorf("the example %q of %q is refused: %v", example, msg, err)
	}
}
