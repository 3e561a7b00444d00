package dashboard

import (
	"testing"

	"github.com/retryd/retryd/internal/record"
)

func TestSummaryShowsTheRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    record.Request
		want string
	}{
		{record.Request{Method: "POST", URL: "https://api.e.com/v1/hook?token=abc&x=1", Status: record.Retrying, AttemptCount: 2, BudgetUsed: 2, MaxRetries: 5, LastStatusCode: 503},
			"retrying · attempt 2/6 · POST api.e.com/v1/hook?token=[REDACTED]&x=1 · last 503"},
		{record.Request{Method: "GET", URL: "http://e.com/", Status: record.Pending, MaxRetries: 0, WaitingFor: record.WaitingForFlowControl},
			"pending · attempt 0/1 · GET e.com/ · no answer yet · waiting for flow_control"},
		{record.Request{Method: "PUT", URL: "http://e.com/x", Status: record.Failed, AttemptCount: 6, BudgetUsed: 3, MaxRetries: 2, FailureClass: "timeout", RedriveCount: 1},
			"failed · attempt 3/3 · PUT e.com/x · last timeout · redriven 1"},
		{record.Request{Tenant: "team-a", Method: "GET", URL: "http://e.com/", Status: record.Completed, BudgetUsed: 1, LastStatusCode: 200},
			"completed · attempt 1/1 · GET e.com/ · last 200 · tenant team-a"},
		{record.Request{Tenant: "default", Method: "GET", URL: "http://e.com/", Status: record.Completed, BudgetUsed: 1, LastStatusCode: 200},
			"completed · attempt 1/1 · GET e.com/ · last 200"},
	} {
		if got := Summary(&c.r); got != c.want {
			t.Errorf("Summary = %q\\n want %q", got, c.want)
		}
	}
}
