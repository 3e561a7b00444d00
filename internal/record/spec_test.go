package record

import (
	"encoding/json"
	"reflect"
	"testing"
)

// everySpecField is a request that sets every member of its spec, with
// strings that need escapes.
func everySpecField() *Request {
	return &Request{URL: "https://E.example:8443/x?a=<b>&c", Method: "POST",
		Headers:        map[string]string{"Content-Type": "text/html", "X-Quote": `say "hi"`},
		Body:           "<p>\"é\"\n\u2028</p>",
		IdempotencyKey: "k", CallbackURL: "https://cb.example/", Dialect: DialectQStash,
		QStash: &QStash{RetryDelay: "1000 * retried", Labels: []string{"a", "b"}, Redact: &RedactFields{Body: true},
			CallbackHeaders: map[string]string{"A": "1"}},
		FlowControl: &FlowControl{Key: "k", Parallelism: 2, Rate: 3, PeriodMs: 1000},
		Topic:       "t", Publication: "p", TraceParent: "00-1-2-01",
		ResentFrom: &ResentFrom{ID: "r", AtMs: 5, Actor: "a"}, Credential: "cr", Proxy: "px"}
}

// A spec reads back what was written, every member and escape included.
func TestSpecReadsBackEveryMember(t *testing.T) {
	t.Parallel()
	r := everySpecField()
	got := specFrom(r.spec())
	want := spec{URL: r.URL, Method: r.Method, Headers: r.Headers, Body: r.Body, IdempotencyKey: r.IdempotencyKey,
		CallbackURL: r.CallbackURL, Dialect: r.Dialect, QStash: r.QStash, FlowControl: r.FlowControl, Topic: r.Topic,
		Publication: r.Publication, TraceParent: r.TraceParent, ResentFrom: r.ResentFrom, Credential: r.Credential, Proxy: r.Proxy}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("specFrom(spec()) =\n%+v\nwant\n%+v", got, want)
	}
	if _, ok := specMembers([]byte(r.spec())); !ok {
		t.Error("a spec retryd wrote was left to json.Unmarshal")
	}
}

// FuzzSpecFrom: specFrom answers what json.Unmarshal into a spec answers,
// for any stored text. Its seed corpus runs with the normal suite.
func FuzzSpecFrom(f *testing.F) {
	for _, s := range []string{
		everySpecField().spec(), (&Request{URL: "http://h/", Method: "GET"}).spec(),
		`{"u":1}`, `{"u":null,"b":"x"}`, `{"U":"http://h/"}`, `{"h":{"A":"1"},"h":{"B":"2"}}`, `{"h":{"A":1}}`,
		`{"q":{"rd":"1"},"q":{"l":"x"}}`, `{"u":"http://h/","h":{"A":"1","B":""}}`, `{"h":{}}`, `{"h":null}`, `{"x":1}`, `[]`, `not json`, ``, `{"b":"\u00e9\ud800"}`, "{\"b\":\"\xff\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want spec
		_ = json.Unmarshal([]byte(s), &want)
		if got := specFrom(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("specFrom(%q) =\n%+v\njson.Unmarshal:\n%+v", s, got, want)
		}
	})
}

// A request read from Redis keeps its URL taken apart, and a URL changed
// after is taken apart again.
func TestPlaceFollowsTheURL(t *testing.T) {
	t.Parallel()
	r := decode("id", map[string]string{}, (&Request{URL: "HTTPS://Api.Example/x", Method: "GET"}).spec())
	if r.Host != "api.example" || r.HostPort() != "api.example:443" || r.Endpoint() != "https://api.example:443" || r.FlowKey() != "api.example:443" {
		t.Errorf("read: host %q, host:port %q, endpoint %q, flow key %q", r.Host, r.HostPort(), r.Endpoint(), r.FlowKey())
	}
	r.URL = "http://other:8080/"
	if r.HostPort() != "other:8080" || r.Endpoint() != "http://other:8080" {
		t.Errorf("changed: host:port %q, endpoint %q", r.HostPort(), r.Endpoint())
	}
	for raw, want := range map[string]place{
		"":              {url: "", parsed: true, hostPort: ":"},
		"//h/x":         {url: "//h/x", parsed: true, host: "h", hostPort: "h:"},
		"ftp://h:21/":   {url: "ftp://h:21/", parsed: true, host: "h", hostPort: "h:21", endpoint: "ftp://h:21"},
		"http://[::1]/": {url: "http://[::1]/", parsed: true, host: "::1", hostPort: "[::1]:80", endpoint: "http://[::1]:80"},
		"http://h:x/":   {url: "http://h:x/", parsed: true},
	} {
		if got := placeOf(raw); got != want {
			t.Errorf("placeOf(%q) = %+v, want %+v", raw, got, want)
		}
		if got := hostOf(raw); got != want.host {
			t.Errorf("hostOf(%q) = %q, want %q", raw, got, want.host)
		}
	}
}
