package e2e

import (
	"strings"
	"testing"
	"time"
)

// Bad invokes (a publish with Upstash-Workflow-Invoke: true) get a clear
// error and start no run; a run's later steps inherit what its start set;
// bad queries of the workflow logs and DLQ are refused, and a workflow DLQ
// action leaves other messages alone.
func TestWorkflowRoutesInput(t *testing.T) {
	t.Parallel()
	const token, other = "workflow-invoke-token", "workflow-invoke-other"
	s := startStack(t, 1, "API_KEYS=team-a:"+token+",team-b:"+other)
	auth := []string{"Authorization", "Bearer " + token}
	parentURL, childURL := "http://127.0.0.1:9/wf/parent", "http://127.0.0.1:9/wf/child"
	publish := func(dest, body string, headers ...string) answer {
		t.Helper()
		return call(t, "POST", s.api+"/v2/publish/"+dest, body, append(append([]string{}, auth...), headers...)...)
	}
	want := func(a answer, status int, what, says string) { t.Helper(); wantSays(t, a, status, what, says) }
	start := func(run string) []string {
		return []string{"Upstash-Workflow-RunId", run, "Upstash-Workflow-Url", childURL, "Upstash-Workflow-Init", "true", "Upstash-Workflow-Invoke", "true"}
	}
	// invokeBody is what the SDK sends: the child's payload, and the
	// headers of a step of the parent, to return the result with.
	invokeBody := func(parent, url, stepRun string, extra ...string) string {
		h := `"Upstash-Workflow-RunId":["` + stepRun + `"],"Upstash-Workflow-Init":["false"],"Upstash-Workflow-Url":["` + url + `"]`
		for i := 0; i+1 < len(extra); i += 2 {
			h += `,"` + extra[i] + `":["` + extra[i+1] + `"]`
		}
		return `{"body":"{\"n\":1}","headers":{` + h + `},"workflowRunId":"` + parent + `","workflowRunCreatedAt":1,"workflowUrl":"` + url +
			`","step":{"stepId":1,"stepName":"invoke","stepType":"Invoke","concurrent":1}}`
	}

	// The parent runs (its deliveries fail: nothing listens; it is
	// canceled below).
	want(publish(parentURL, "p", "Upstash-Workflow-RunId", "wfr_parent", "Upstash-Workflow-Url", parentURL, "Upstash-Workflow-Init", "true", "Upstash-Delay", "1h"),
		201, "the parent's start", "messageId")

	good := invokeBody("wfr_parent", parentURL, "wfr_parent")
	want(publish(childURL, good, "Upstash-Workflow-RunId", "wfr_c0", "Upstash-Workflow-Url", childURL, "Upstash-Workflow-Invoke", "true"),
		400, "an invoke that does not start a run", "needs Upstash-Workflow-Init: true")
	want(publish(childURL, good, append(start("wfr_c0"), "Upstash-Workflow-Invoke", "maybe")...), 400, "Invoke neither true nor false", "Upstash-Workflow-Invoke must be true or false")
	want(publish(childURL, "not json", start("wfr_c0")...), 400, "an invoke whose body is not the SDK's", "{workflowUrl, workflowRunId, headers, step, body}")
	want(publish(childURL, strings.Replace(good, `"step":{`, `"step":"x","s":{`, 1), start("wfr_c0")...), 400, "an invoke without its step", "step must be the invoking step")
	want(publish(childURL, strings.Replace(good, `"workflowRunId":"wfr_parent"`, `"workflowRunId":""`, 1), start("wfr_c0")...), 400, "an invoke naming no parent", "name the invoking run")
	want(publish(childURL, invokeBody("wfr_never", parentURL, "wfr_never"), start("wfr_c0")...), 404, "an invoke by a run never started", "only a running workflow can invoke")
	want(publish(childURL, invokeBody("wfr_parent", childURL, "wfr_parent"), start("wfr_c0")...), 400, "an invoke by a run at another URL", "runs at another URL than workflowUrl")
	want(publish(childURL, invokeBody("wfr_parent", parentURL, "wfr_someone"), start("wfr_c0")...), 400, "an invoke whose headers are another run's", "headers are those of a step of the invoking run")
	want(publish(childURL, invokeBody("wfr_parent", parentURL, "wfr_parent", "Upstash-Retries", "many"), start("wfr_c0")...), 400, "an invoke whose result would be refused", "the invoke's headers: Upstash-Retries")
	want(call(t, "POST", s.api+"/v2/publish/"+childURL, good, append([]string{"Authorization", "Bearer " + other}, start("wfr_c0")...)...),
		404, "another tenant's invoke of the run", "only a running workflow can invoke")
	want(call(t, "GET", s.api+"/v2/workflows/runs/wfr_c0", "", auth...), 404, "the child after the refused invokes", "not found")

	// A good invoke starts the child on the body's payload.
	want(publish(childURL, good, append(start("wfr_c1"), "Upstash-Delay", "1h")...), 201, "an invoke", "messageId")
	if a := call(t, "GET", s.api+"/v2/workflows/runs/wfr_c1", "", auth...); a.status != 200 {
		t.Errorf("the invoked run: %d %s", a.status, a.raw)
	}
	// A result past the limit is refused and leaves the child running.
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_c1?cancel=false", strings.Repeat("r", 300<<10), auth...), 413, "a run's result of 300 KiB", "256 KiB")
	want(call(t, "GET", s.api+"/v2/workflows/runs/wfr_c1", "", auth...), 200, "the child after its refused end", "")

	// A later step inherits its run's retries and headers; its own win.
	want(publish(parentURL, "p", "Upstash-Workflow-RunId", "wfr_inherit", "Upstash-Workflow-Url", parentURL, "Upstash-Workflow-Init", "true",
		"Upstash-Delay", "1h", "Upstash-Retries", "0", "Upstash-Forward-X-Kept", "kept", "Upstash-Forward-X-Own", "start's"), 201, "a run's start with settings", "messageId")
	step := publish(parentURL, "s", "Upstash-Workflow-RunId", "wfr_inherit", "Upstash-Workflow-Url", parentURL, "Upstash-Workflow-Init", "false",
		"Upstash-Delay", "1h", "Upstash-Forward-X-Own", "step's")
	want(step, 201, "a later step", "messageId")
	id, _ := step.body["messageId"].(string)
	r := call(t, "GET", s.api+"/requests/"+id, "", auth...)
	if r.status != 200 || r.body["maxRetries"] != float64(0) || !strings.Contains(r.raw, `"X-Kept":"kept"`) || !strings.Contains(r.raw, `"X-Own":"step's"`) {
		t.Errorf("the later step's request: %d %s; want maxRetries 0, X-Kept from the start and its own X-Own", r.status, r.raw)
	}

	// The parent ends first: the child's cancel returns to nobody, and
	// is done.
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_parent?cancel=true", "", auth...), 200, "the parent's cancel", "wfr_parent")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_c1?cancel=true", "", auth...), 200, "the child's cancel after its parent's", "wfr_c1")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_inherit?cancel=true", "", auth...), 200, "the last run's cancel", "wfr_inherit")
	s.noneLeftToDeliver(t, token)

	// The logs: each tenant sees its own runs; a bad query is refused.
	logs := call(t, "GET", s.api+"/v2/workflows/events?groupBy=workflowRunId&count=2", "", auth...)
	if runs, _ := logs.body["runs"].([]any); logs.status != 200 || len(runs) != 2 || logs.body["cursor"] == nil {
		t.Errorf("a page of the logs: %d %.500s", logs.status, logs.raw)
	}
	if a := call(t, "GET", s.api+"/v2/workflows/events?state=RUN_CANCELED", "", auth...); !strings.Contains(a.raw, `"wfr_parent"`) || strings.Contains(a.raw, "RUN_STARTED") {
		t.Errorf("the canceled runs: %d %.500s", a.status, a.raw)
	}
	if a := call(t, "GET", s.api+"/v2/workflows/events?workflowRunId=wfr_c1", "", auth...); !strings.Contains(a.raw, `"invoker":{"workflowRunId":"wfr_parent"`) {
		t.Errorf("the invoked run's log: %d %.500s", a.status, a.raw)
	}
	if a := call(t, "GET", s.api+"/v2/workflows/events", "", "Authorization", "Bearer "+other); a.status != 200 || !strings.Contains(a.raw, `"runs":[]`) {
		t.Errorf("another tenant's logs: %d %.300s", a.status, a.raw)
	}
	want(call(t, "GET", s.api+"/v2/workflows/events?label=x", "", auth...), 400, "a logs filter not served", `the workflow logs take groupBy`)
	want(call(t, "GET", s.api+"/v2/workflows/events?state=DONE", "", auth...), 400, "an unknown state", "RUN_STARTED")
	want(call(t, "GET", s.api+"/v2/workflows/events?count=1000", "", auth...), 400, "a count past the limit", "count is 1 to 100")
	want(call(t, "GET", s.api+"/v2/workflows/events?cursor=abc", "", auth...), 400, "a cursor never given", "cursor")
	want(call(t, "GET", s.api+"/v2/workflows/events?groupBy=messageId", "", auth...), 400, "another grouping", "grouped by workflowRunId")
	want(call(t, "GET", s.api+"/v2/workflows/events?fromDate=yesterday", "", auth...), 400, "a date that is none", "fromDate is a Unix time")

	want(call(t, "DELETE", s.api+"/v2/workflows/runs?label=x", "", auth...), 400, "a cancel by a filter not served", "a cancel of workflow runs takes workflowRunIds")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs?workflowUrl=x&workflowUrlExactMatch=maybe", "", auth...), 400, "exact match neither true nor false", "workflowUrlExactMatch must be true or false")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs?count=0", "", auth...), 400, "a cancel of no run", "count is 1 to")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs?count=5&workflowUrl=http://127.0.0.1:9/none", "", auth...), 200, "a cancel selecting nothing", `"cancelled":0`)

	// A webhook takes no key; one nobody waits for, or of a name that is
	// no tenant's, is not found; a call past the limit is refused.
	want(call(t, "POST", s.api+"/v2/workflows/hooks/team-a/wfr_parent/evt_x", "x"), 404, "a webhook nobody waits for", "no workflow run waits for this webhook")
	want(call(t, "GET", s.api+"/v2/workflows/hooks/Not%20A%20Tenant/wfr_parent/evt_x", ""), 404, "a webhook of no tenant", "no such webhook")
	want(call(t, "PUT", s.api+"/v2/workflows/hooks/team-a/wfr_parent/evt_x", strings.Repeat("w", 300<<10)), 413, "a webhook's call of 300 KiB", "256 KiB")
	want(call(t, "POST", s.api+"/v2/workflows/hooks/team-a/"+strings.Repeat("r", 200)+"/evt_x", ""), 400, "a webhook of a run id of 200 bytes", "128")

	// The workflow DLQ.
	plain := publish("http://127.0.0.1:9/plain", "x", "Upstash-Retries", "0")
	want(plain, 201, "a message that is no workflow's", "messageId")
	plainID, _ := plain.body["messageId"].(string)
	waitFor(t, time.Minute, "the plain message in the DLQ", func() bool {
		return call(t, "GET", s.api+"/v2/dlq/"+plainID, "", auth...).status == 200
	})
	if a := call(t, "GET", s.api+"/v2/dlq?source=workflow", "", auth...); a.status != 200 || strings.Contains(a.raw, plainID) {
		t.Errorf("the workflow DLQ lists a plain message: %d %.300s", a.status, a.raw)
	}
	want(call(t, "POST", s.api+"/v2/workflows/dlq/resume?dlqIds="+plainID, "", auth...), 409, "a workflow resume of a plain message", "not a workflow run's step")
	resumed := call(t, "POST", s.api+"/v2/workflows/dlq/resume?dlqIds="+plainID+"&dlqIds=01m95vxysye26cs5bm8q", "", auth...)
	if resumed.status != 200 || !strings.Contains(resumed.raw, `"workflowRuns":[]`) || !strings.Contains(resumed.raw, "not a workflow run's step") {
		t.Errorf("a workflow resume of a plain message and another: %d %s", resumed.status, resumed.raw)
	}
	if a := call(t, "GET", s.api+"/v2/dlq/"+plainID, "", auth...); a.status != 200 {
		t.Errorf("the plain message after a workflow resume: %d %s", a.status, a.raw)
	}
	want(call(t, "GET", s.api+"/v2/dlq?source=queue", "", auth...), 400, "a DLQ source not served", "source is workflow")
	want(call(t, "GET", s.api+"/v2/dlq?workflowRunId=wfr_a", "", auth...), 400, "a run's DLQ without source=workflow", "add source=workflow")
	want(call(t, "POST", s.api+"/v2/workflows/dlq/resume?dlqIds="+plainID, "", append([]string{"Upstash-Retries", "5"}, auth...)...), 400,
		"a resume with other retries", "not served")
	want(call(t, "POST", s.api+"/v2/workflows/dlq/callback/"+plainID, "", auth...), 400, "a failure function's retry", "not served")
	want(call(t, "DELETE", s.api+"/v2/workflows/dlq?dlqIds="+plainID, "", auth...), 409, "a workflow delete of a plain message", "not a workflow run's step")
	want(call(t, "POST", s.api+"/v2/workflows/dlq/restart?dlqIds="+plainID, "", auth...), 409, "a workflow restart of a plain message", "not a workflow run's step")
}
