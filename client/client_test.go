package client

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/openapi"
)

type spec struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	var s spec
	if err := json.Unmarshal(openapi.Document, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// jsonNames are the JSON member names of a struct type.
func jsonNames(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// The client's types have exactly the members of the schemas of
// /openapi.json: a field added to the API without the client (or the
// other way round) fails here.
func TestTypesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	for schema, v := range map[string]any{
		"Submission": Submission{}, "FlowControl": FlowControl{}, "Accepted": Accepted{}, "Request": Request{},
		"Attempt": Attempt{}, "Redrive": Redrive{}, "Callback": Callback{}, "Page": Page{},
		"RedriveBody": RedriveInput{}, "ExpungeBody": ExpungeInput{}, "BulkRedriveBody": BulkRedriveInput{}, "BulkRedriveResult": BulkRedriveResult{},
		"Schedule": Schedule{}, "SchedulePage": SchedulePage{}, "Flow": Flow{}, "FlowInfo": FlowInfo{},
		"TenantRetention": Retention{}, "TenantRetentionSettings": RetentionSettings{},
		"Endpoint": Endpoint{}, "Endpoints": Endpoints{}, "Topic": Topic{}, "TopicList": TopicList{}, "Publication": Publication{},
	} {
		sc, ok := s.Components.Schemas[schema]
		if !ok {
			t.Errorf("no schema %s in /openapi.json", schema)
			continue
		}
		var want []string
		for name := range sc.Properties {
			want = append(want, name)
		}
		slices.Sort(want)
		if got := jsonNames(v); !slices.Equal(got, want) {
			t.Errorf("%T has members %v; schema %s has %v", v, got, schema, want)
		}
	}
}

// Every route the client calls is in /openapi.json.
func TestRoutesAreInTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	for _, r := range []struct{ method, path string }{
		{"post", PathRequests}, {"get", PathRequests}, {"get", PathRequests + "/{id}"}, {"delete", PathRequests + "/{id}"},
		{"get", PathDLQ}, {"post", PathDLQ + "/{id}/redrive"}, {"post", PathRequests + "/{id}/resend"}, {"delete", PathRequests + "/{id}/payload"}, {"post", PathDLQ + "/redrive"},
		{"get", PathSchedules}, {"get", PathSchedules + "/{id}"}, {"get", PathFlows}, {"get", PathFlows + "/{key}"}, {"post", PathFlows + "/{key}/{action}"},
		{"get", PathTenants + "/{tenant}/retention"}, {"put", PathTenants + "/{tenant}/retention"}, {"delete", PathTenants + "/{tenant}/retention"},
		{"get", PathEndpoints}, {"post", PathEndpoints + "/{endpoint}/open"}, {"post", PathEndpoints + "/{endpoint}/close"},
	} {
		if _, ok := s.Paths[r.path][r.method]; !ok {
			t.Errorf("%s %s is not in /openapi.json", strings.ToUpper(r.method), r.path)
		}
	}
}

// Every surface words attempt numbers alike: a redriven request's life,
// its run and that run's budget, never asynq's retry count.
func TestCountsAndWaitingWording(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ got, want string }{
		{Counts(4, 2, 1, 1), "4 attempts · run 2: 2 of 2 allowed"},
		{Counts(1, 1, 5, 0), "1 attempt · run 1: 1 of 6 allowed"},
		{Counts(0, 0, 0, 0), "0 attempts · run 1: 0 of 1 allowed"},
		{Waiting("paused", nil), "waiting for paused · starts when its flow-control key is resumed"},
		{Waiting("rate", func() *time.Time { at := time.Date(2026, 1, 2, 7, 6, 11, 152e6, time.UTC); return &at }()),
			"waiting for rate · starts 2026-01-02T07:06:11.152Z"},
		{Waiting("endpoint_open", func() *time.Time { at := time.Date(2026, 1, 2, 7, 6, 11, 0, time.UTC); return &at }()),
			"waiting for endpoint_open · next probe 2026-01-02T07:06:11.000Z"},
		{Waiting("endpoint_open", nil), "waiting for endpoint_open · starts when its endpoint answers a probe"},
		{Waiting("", nil), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
