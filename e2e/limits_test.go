package e2e

import (
	"testing"
)

// The official @upstash/qstash client meets retryd's limits as QStash's
// own errors (e2e/oracles/qstash-limits.test.js): the rate limit counts
// the requests a batch makes, queues stop at QUEUE_LIMIT, an unknown logs
// state is refused. Here, through retryd's own API: what the refused
// calls made, which is nothing.
func TestLimitsWithTheOfficialClient(t *testing.T) {
	t.Parallel()
	const key, admin = "acme-key", "admin-key"
	s := startStack(t, 0, "API_KEYS=acme:"+key, "ADMIN_KEYS="+admin, "RATE_LIMIT_RPS=100", "QUEUE_LIMIT=3")
	nodeTest(t, "qstash-limits.test.js", "RETRYD_URL="+s.api, "KEY="+key, "DEST=http://127.0.0.1:1")
	// The admin's key is another tenant's budget.
	a := call(t, "GET", s.api+"/requests?limit=500", "", "Authorization", "Bearer "+admin)
	data, _ := a.body["data"].([]any)
	if a.status != 200 || len(data) != 75 {
		t.Errorf("requests made: %d (%d %.200s), want the 75 of the one batch that passed", len(data), a.status, a.raw)
	}
	q := call(t, "GET", s.api+"/v2/queues/q4", "", "Authorization", "Bearer "+key)
	if q.status != 404 {
		t.Errorf("the queue an enqueue past the limit named: %d %s, want 404", q.status, q.raw)
	}
}
