package selection

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
)

var every = []string{MessageID, URL, Host, Path, Label, FlowControlKey, ScheduleID, ResponseStatus, FailureClass,
	FromDate, ToDate, TopicName, URLGroup, QueueName, CallerIP}

var route = Route{IDs: "messageIds", Filters: every, Params: []string{"actor"}, CountParam: "count", DefaultCount: 100, MaxCount: 1000,
	Cursor: true, NothingIsAll: true}

const id1, id2 = "01m8mg842n8nbsaee7cq", "01m8mg842n8nbsaee7cr"

func sample() *record.Request {
	return &record.Request{ID: id1, URL: "https://api.e.com:8443/hooks/a?x=1", Host: "api.e.com", LastStatusCode: 410, FailureClass: "client_error",
		CreatedAt: time.UnixMilli(1_700_000_000_000), FlowControl: &record.FlowControl{Key: "own-key"},
		QStash: &record.QStash{Label: "nightly", ScheduleID: "s1"}}
}

// Every filter key, one value that matches and one that does not.
func TestEveryFilterMatchesWhatItNames(t *testing.T) {
	t.Parallel()
	r := sample()
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"", true},
		{"messageId=" + id1, true}, {"messageId=" + id2, false},
		{"url=https://api.e.com:8443/hooks/a?x=1", true}, {"url=https://api.e.com:8443/hooks/A?x=1", false},
		{"host=API.e.com", true}, {"host=api.e.com:8443", true}, {"host=api.e.com:443", false}, {"host=e.com", false},
		{"path=/hooks/a", true}, {"path=/Hooks/a", false},
		{"label=nightly", true}, {"label=x&label=nightly", true}, {"label=Nightly", false}, {"label=x", false},
		{"flowControlKey=own-key", true}, {"flowControlKey=other", false},
		{"scheduleId=s1", true}, {"scheduleId=s2", false},
		{"responseStatus=410", true}, {"responseStatus=500", false},
		{"failureClass=client_error", true}, {"failureClass=server_error", false},
		{"fromDate=1699999999999", true}, {"fromDate=1700000000001", false},
		{"toDate=1700000000000", true}, {"toDate=1699999999999", false},
		{"topicName=t", false}, {"urlGroup=t", false}, {"queueName=q", false}, {"callerIp=1.2.3.4", false},
		{"label=nightly&host=api.e.com", true}, {"label=nightly&host=other", false},
		{"messageIds=" + id1, true}, {"messageIds=" + id2, false}, {"messageIds=" + id2 + "," + id1, true},
		{"messageIds=not-an-id", false},
	} {
		q, _ := url.ParseQuery(tc.query)
		s, err := Parse(route, q, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		if got := s.Match(r); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestIDsFromTheQueryOrTheBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query, body string
		want        []string
	}{
		{"messageIds=" + id1 + "&messageIds=" + id2, "", []string{id1, id2}},
		{"", `{"messageIds": ["` + id1 + `"]}`, []string{id1}},
		{"", `{"messageIds": "` + id2 + `"}`, []string{id2}},
		{"messageIds=" + id1, `{"messageIds": ["` + id2 + `"]}`, []string{id1, id2}},
		{"", `{"messageIds": []}`, nil},
	} {
		q, _ := url.ParseQuery(tc.query)
		s, err := Parse(route, q, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s %s: %v", tc.query, tc.body, err)
		}
		if !s.Named || strings.Join(s.IDs, ",") != strings.Join(tc.want, ",") || s.All() {
			t.Errorf("%s %s: ids %v named %v, want %v", tc.query, tc.body, s.IDs, s.Named, tc.want)
		}
		if s.Count != len(tc.want) {
			t.Errorf("%s %s: count %d, want every id named (%d)", tc.query, tc.body, s.Count, len(tc.want))
		}
	}
}

// Every rejection names the key at fault.
func TestRefusals(t *testing.T) {
	t.Parallel()
	strict := route
	strict.NothingIsAll = false
	for _, tc := range []struct {
		rt          Route
		query, body string
		field       string
	}{
		{route, "labeel=x", "", "labeel"},
		{route, "", `{"dlqIds": ["` + id1 + `"]}`, "dlqIds"},
		{route, "count=0", "", "count"},
		{route, "count=1001", "", "count"},
		{route, "count=x", "", "count"},
		{route, "cursor=../../", "", "cursor"},
		{route, "fromDate=yesterday", "", "fromDate"},
		{route, "toDate=-1", "", "toDate"},
		{route, "label=", "", "label"},
		{route, "messageIds=" + id1 + "&label=x", "", "messageIds"},
		{route, "", `[1, 2]`, ""},
		{route, "", `{"label": {"a": 1}}`, "label"},
		{route, "", `{"messageIds": [["` + id1 + `"]]}`, "messageIds"},
		{strict, "", "", ""},
		{strict, "count=5", "", ""},
		{route, "messageIds=" + strings.Repeat(id1+",", MaxIDs+1), "", "messageIds"},
		// A body that is not an object names nothing: it is refused, never
		// read as "everything".
		{route, "", `null`, ""},
		{route, "", ` null `, ""},
		{route, "", `"messageIds"`, ""},
		{route, "", `[]`, ""},
		// A value that takes one value, given twice, is ambiguous.
		{route, "count=1", `{"count": 1000}`, "count"},
		{route, "count=1&count=2", "", "count"},
		{route, "cursor=" + id1, `{"cursor": "` + id2 + `"}`, "cursor"},
		{route, "fromDate=1", `{"fromDate": 2}`, "fromDate"},
		{route, "actor=a", `{"actor": "b"}`, "actor"},
		// Numbers are numbers.
		{route, "", `{"count": "5"}`, "count"},
		{route, "", `{"fromDate": "1700000000000"}`, "fromDate"},
		{route, "", `{"responseStatus": "500"}`, "responseStatus"},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, err := Parse(tc.rt, q, []byte(tc.body))
		var e *Error
		if !errors.As(err, &e) || e.Field != tc.field || e.Message == "" {
			t.Errorf("%q %q: %v, want an error on %q", tc.query, tc.body, err, tc.field)
		}
	}
}

func TestCountDefaultsAndCaps(t *testing.T) {
	t.Parallel()
	s, err := Parse(route, url.Values{}, nil)
	if err != nil || s.Count != 100 || !s.All() {
		t.Fatalf("nothing named: %+v %v, want all with count 100", s, err)
	}
	s, err = Parse(route, url.Values{"count": {"7"}, "actor": {"alice"}, "cursor": {id1}}, []byte(`{"label": ["a", "b"], "responseStatus": 500}`))
	if err != nil || s.Count != 7 || s.Cursor != id1 || s.Params["actor"] != "alice" || strings.Join(s.Values[Label], ",") != "a,b" || s.Values[ResponseStatus][0] != "500" {
		t.Fatalf("got %+v %v", s, err)
	}
}

// FuzzSelection: whatever a call sends, a selection never matches more
// than its filter says. Each matched request satisfies every filter key on
// its own, one of the named ids when ids are named, and the date bounds;
// a call naming nothing is All only when it really named nothing.
func FuzzSelection(f *testing.F) {
	for _, seed := range []string{"", "label=nightly", "labeel=x", "messageIds=" + id1, "host=api.e.com:8443&label=a", "fromDate=1&toDate=2",
		"count=1", "url=https://api.e.com:8443/hooks/a?x=1", "responseStatus=410&failureClass=CLIENT_ERROR", "urlGroup=x", "messageId=" + id1} {
		f.Add(seed, "")
	}
	f.Add("", `{"messageIds":["`+id1+`"]}`)
	f.Add("", `{"label":"nightly","count":2}`)
	records := []*record.Request{sample(), {ID: id2, URL: "http://other.e.com/x", Host: "other.e.com", CreatedAt: time.UnixMilli(5)}}
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		s, err := Parse(route, q, []byte(body))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of another type: %v", err)
			}
			return
		}
		if !s.Named && (s.Count < 1 || s.Count > route.MaxCount) {
			t.Fatalf("count %d outside 1..%d", s.Count, route.MaxCount)
		}
		for _, r := range records {
			if !s.Match(r) {
				continue
			}
			if s.Named {
				if !slices.Contains(s.IDs, r.ID) {
					t.Fatalf("%s matched, not among the ids %v", r.ID, s.IDs)
				}
				continue
			}
			for k, want := range s.Values {
				one := Selection{Values: map[string][]string{k: want}}
				if !one.Match(r) {
					t.Fatalf("%s matched the selection but not its filter %s=%v", r.ID, k, want)
				}
				if len(want) == 0 {
					t.Fatalf("filter %s with no value", k)
				}
			}
			created := r.CreatedAt.UnixMilli()
			if (s.From != 0 && created < s.From) || (s.To != 0 && created > s.To) {
				t.Fatalf("%s created %d outside [%d, %d]", r.ID, created, s.From, s.To)
			}
		}
		if s.All() && (len(s.Values) > 0 || s.Named) {
			t.Fatalf("All with a filter: %+v", s)
		}
		if !s.Named && len(s.Values) == 0 && s.From == 0 && s.To == 0 {
			for k := range q {
				if slices.Contains(every, k) && q.Get(k) != "" && k != FromDate && k != ToDate {
					t.Fatalf("filter %s=%q was dropped", k, q.Get(k))
				}
			}
		}
	})
}
