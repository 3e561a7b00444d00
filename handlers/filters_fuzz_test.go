package handlers

import (
	"errors"
	"net/url"
	"testing"

	"github.com/retryd/retryd/internal/record"
)

// The filter parser never panics, accepts only what Find can serve, and
// refuses everything else with a 400 naming a field or the remedy. The
// seeds run in the normal suite; `go test -fuzz FuzzFilterQuery
// ./handlers/` explores further.
func FuzzFilterQuery(f *testing.F) {
	for _, seed := range []struct{ query, body string }{
		{"host=api.example.com&status=failed&limit=10", ""},
		{"host=[::1]:8443&method=post&createdFrom=2025-06-01T00:00:00Z", ""},
		{"finishedFrom=2025-06-01T00:00:00.123+02:00&finishedTo=2025-06-02T00:00:00Z&cursor=01m8mhyychtfy2pdj6g7.1718000000000", ""},
		{"urlContains=%2Forders&label=billing&statusCode=503&failureClass=server_error", ""},
		{"tenant=team-a&createdTo=9999-12-31T23:59:59Z", ""},
		{"method=POST", ""},
		{"colour=red&host=a&host=b", ""},
		{"", `{"host":"a.com","dryRun":true,"limit":5,"actor":"x"}`},
		{"host=a.com", `{"host":"b.com"}`},
		{"", `{"statusCode":503.5,"label":["a"]}`},
		{"", `null`},
	} {
		f.Add(seed.query, seed.body)
	}
	rt := filterRoute{Params: []string{"dryRun", "actor"}, DefaultLimit: 100, MaxLimit: 1000}
	f.Fuzz(func(t *testing.T, query, body string) {
		values, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		q, err := parseFilterQuery(rt, values, []byte(body))
		if err != nil {
			var apiErr *Error
			var filterErr *record.FilterError
			switch {
			case errors.As(err, &apiErr):
				if apiErr.Code != CodeInvalid || apiErr.Message == "" {
					t.Fatalf("%q %q: refused with %+v", query, body, apiErr)
				}
			case errors.As(err, &filterErr):
				if filterErr.Message == "" || filterErr.Field == "" {
					t.Fatalf("%q %q: refused with %+v", query, body, filterErr)
				}
			default:
				t.Fatalf("%q %q: refused with %T %v, not a 400", query, body, err, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > rt.MaxLimit {
			t.Fatalf("%q %q: limit %d accepted", query, body, q.Limit)
		}
		if err := q.Filter.Check(); err != nil {
			t.Fatalf("%q %q: accepted a filter Find refuses: %v", query, body, err)
		}
		if q.Filter.Statuses.List() == nil && q.Filter.Statuses != 0 {
			t.Fatalf("%q %q: status %v accepted", query, body, q.Filter.Statuses)
		}
	})
}
