package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Bad input to the workflow routes gets a clear error and changes no run:
// malformed headers, a step of a run never started, a run id reused at
// another URL, a log past its limits, a bad wait; and the answers the SDKs
// count on: a run started twice is deduplicated, a notify nobody waits for
// is an empty list.
func TestWorkflowBadInput(t *testing.T) {
	t.Parallel()
	const token = "workflow-input-token"
	s := startStack(t, 1, "API_KEYS="+token)
	auth := []string{"Authorization", "Bearer " + token}
	dest := "http://127.0.0.1:9/wf" // never delivered to: the runs are canceled below
	publish := func(body string, headers ...string) answer {
		t.Helper()
		return call(t, "POST", s.api+"/v2/publish/"+dest, body, append(append([]string{}, auth...), headers...)...)
	}
	want := func(a answer, status int, what, says string) {
		t.Helper()
		if a.status != status || !strings.Contains(a.raw, says) {
			t.Errorf("%s: %d %s; want %d saying %q", what, a.status, a.raw, status, says)
		}
	}
	run := func(id string) []string { return []string{"Upstash-Workflow-RunId", id, "Upstash-Workflow-Url", dest} }

	want(publish("x", "Upstash-Workflow-Init", "true"), 400, "an init without a run id", "Upstash-Workflow-RunId")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-Init", "maybe")...), 400, "Init neither true nor false", "Upstash-Workflow-Init must be true or false")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-CallType", "sideways")...), 400, "an unknown call type", "Upstash-Workflow-CallType")
	want(publish("x", "Upstash-Workflow-RunId", strings.Repeat("r", 200), "Upstash-Workflow-Init", "true"), 400, "a run id of 200 bytes", "128")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-Init", "true", "Upstash-Workflow-Url", "ftp://x")...), 400, "a run URL that is not http(s)", "Upstash-Workflow-Url")
	want(publish("x", append(run("wfr_child"), "Upstash-Workflow-Init", "true", "Upstash-Workflow-Invoke", "true")...), 400, "an invoke", "context.invoke")
	want(publish("step", append(run("wfr_never"), "Upstash-Workflow-Init", "false")...), 404, "a step of a run never started", "start it with Upstash-Workflow-Init: true")

	first := publish("payload", append(run("wfr_a"), "Upstash-Workflow-Init", "true", "Upstash-Delay", "1h")...)
	want(first, 201, "a run's start", "messageId")
	again := publish("payload", append(run("wfr_a"), "Upstash-Workflow-Init", "true", "Upstash-Delay", "1h")...)
	want(again, 202, "the same run started again", "deduplicated")
	if again.body["messageId"] != first.body["messageId"] {
		t.Errorf("the second start answers %v, want the first's message %v", again.body["messageId"], first.body["messageId"])
	}
	elsewhere := call(t, "POST", s.api+"/v2/publish/http://127.0.0.1:9/other", "payload", append(append([]string{}, auth...),
		"Upstash-Workflow-RunId", "wfr_a", "Upstash-Workflow-Init", "true")...)
	want(elsewhere, 409, "the run id reused at another URL", "runs at another URL")

	// A log past its limits: each delivery of a run carries its whole log.
	big := strings.Repeat("b", 250<<10)
	var last answer
	for i := 0; i < 40; i++ {
		last = publish(big, append(run("wfr_a"), "Upstash-Delay", "1h")...)
		if last.status != 201 {
			break
		}
	}
	want(last, 413, "a step past the log's limits", "its whole log")

	// A wait names a run that exists, and a timeout that is one.
	wait := func(event, body string, headers ...string) answer {
		t.Helper()
		return call(t, "POST", s.api+"/v2/wait/"+event, body, append(append([]string{}, auth...), headers...)...)
	}
	step := `"step":{"stepId":2,"stepName":"w","stepType":"Wait","concurrent":1}`
	want(wait("ev", `{"url":"`+dest+`",`+step+`}`), 400, "a wait without its run", "Upstash-Workflow-RunId")
	want(wait("ev", `{"url":"`+dest+`","timeout":"soon",`+step+`}`, "Upstash-Workflow-RunId", "wfr_a"), 400, "a wait with a bad timeout", "timeout must be a duration")
	want(wait("ev", `{"url":"`+dest+`","timeout":"5s",`+step+`}`, "Upstash-Workflow-RunId", "wfr_never"), 404, "a wait of a run never started", "not found")
	want(wait("ev", `[1]`, "Upstash-Workflow-RunId", "wfr_a"), 400, "a wait that is not an object", "a wait is a JSON object")
	want(wait("ev", `{"url":"`+dest+`","timeout":"1h","step":"nope"}`, "Upstash-Workflow-RunId", "wfr_a"), 400, "a wait without its step", "step must be the waiting step")

	// Nobody waits for this event: an empty list, as the SDKs expect.
	none := call(t, "POST", s.api+"/v2/notify/unknown-event", `"data"`, auth...)
	if none.status != 200 || strings.TrimSpace(none.raw) != "[]" {
		t.Errorf("a notify nobody waits for: %d %s; want 200 []", none.status, none.raw)
	}
	want(wait("ev", `{"url":"`+dest+`","timeout":"1h",`+step+`}`, "Upstash-Workflow-RunId", "wfr_a"), 200, "a wait", "messageId")
	waiters := call(t, "GET", s.api+"/v2/waiters/ev", "", auth...)
	var ws []map[string]any
	if err := json.Unmarshal([]byte(waiters.raw), &ws); err != nil || len(ws) != 1 || ws[0]["url"] != dest {
		t.Errorf("the event's waiters: %d %s", waiters.status, waiters.raw)
	}

	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_a?cancel=maybe", "", auth...), 400, "cancel neither true nor false", "cancel must be true or false")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_never?cancel=true", "", auth...), 404, "a cancel of a run never started", "not found")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs", "", auth...), 400, "a bulk cancel naming no run", "workflowRunIds")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_a?cancel=true", "", auth...), 200, "the run's cancel", "wfr_a")
	want(call(t, "GET", s.api+"/v2/workflows/runs/wfr_a", "", auth...), 404, "the canceled run's log", "not found")
	// Its messages, the wait's timeout among them, were canceled with it.
	s.noneLeftToDeliver(t, token)
	if a := call(t, "GET", s.api+"/v2/workflows/runs/wfr_a", "", "Authorization", "Bearer nope"); a.status != http.StatusUnauthorized {
		t.Errorf("a run's log without the token: %d", a.status)
	}
}
