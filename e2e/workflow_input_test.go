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
	const token, other = "workflow-input-token", "workflow-input-other"
	s := startStack(t, 1, "API_KEYS=team-a:"+token+",team-b:"+other)
	auth := []string{"Authorization", "Bearer " + token}
	dest := "http://127.0.0.1:9/wf" // never delivered to: the runs are canceled below
	publish := func(body string, headers ...string) answer {
		t.Helper()
		return call(t, "POST", s.api+"/v2/publish/"+dest, body, append(append([]string{}, auth...), headers...)...)
	}
	want := func(a answer, status int, what, says string) { t.Helper(); wantSays(t, a, status, what, says) }
	run := func(id string) []string { return []string{"Upstash-Workflow-RunId", id, "Upstash-Workflow-Url", dest} }

	want(publish("x", "Upstash-Workflow-Init", "true"), 400, "an init without a run id", "Upstash-Workflow-RunId")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-Init", "maybe")...), 400, "Init neither true nor false", "Upstash-Workflow-Init must be true or false")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-CallType", "sideways")...), 400, "an unknown call type", "Upstash-Workflow-CallType")
	want(publish("x", "Upstash-Workflow-RunId", strings.Repeat("r", 200), "Upstash-Workflow-Init", "true"), 400, "a run id of 200 bytes", "128")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-Init", "true", "Upstash-Workflow-Url", "ftp://x")...), 400, "a run URL that is not http(s)", "Upstash-Workflow-Url")
	want(publish("x", append(run("wfr_a"), "Upstash-Workflow-Init", "true", "Upstash-Workflow-CallType", "toCallback")...), 400, "a start that is a call to a third party", "starts with a message to the workflow")
	want(publish("x", "Upstash-Callback-Workflow-RunId", strings.Repeat("r", 200), "Upstash-Callback", dest), 400, "a callback's run id of 200 bytes", "Upstash-Callback-Workflow-RunId")
	want(publish("x", "Upstash-Callback", dest, "Upstash-Callback-Forward-Host", "x", "Upstash-Callback-Forward-X-A", strings.Repeat("v", 17<<10)), 400, "callback headers past their limit", "Upstash-Callback-Forward-*")
	want(call(t, "POST", s.api+"/v2/publish/http://127.0.0.1:9/elsewhere", "x", append(append([]string{}, auth...), run("wfr_a")...)...), 400, "a step sent elsewhere than its run's URL", "published to its Upstash-Workflow-Url")
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
	want(wait("ev", `{"timeout":"1h",`+step+`}`, "Upstash-Workflow-RunId", "wfr_a"), 400, "a wait without its url", "names the workflow's url")
	want(wait("ev", `{"url":"http://127.0.0.1:9/elsewhere","timeout":"1h",`+step+`}`, "Upstash-Workflow-RunId", "wfr_a"), 409, "a wait whose data would go to another URL", "runs at another URL")
	want(wait(strings.Repeat("e", 300), `{"url":"`+dest+`",`+step+`}`, "Upstash-Workflow-RunId", "wfr_a"), 400, "an event id of 300 bytes", "256")

	// Nobody waits for this event: an empty list, as the SDKs expect.
	none := call(t, "POST", s.api+"/v2/notify/unknown-event", `"data"`, auth...)
	if none.status != 200 || strings.TrimSpace(none.raw) != "[]" {
		t.Errorf("a notify nobody waits for: %d %s; want 200 []", none.status, none.raw)
	}
	want(call(t, "POST", s.api+"/v2/notify/unknown-event", strings.Repeat("d", 300<<10), auth...), 413, "event data of 300 KiB", "256 KiB")
	want(call(t, "POST", s.api+"/v2/notify/"+strings.Repeat("r", 200)+"/ev", "", auth...), 400, "a notify of a run id of 200 bytes", "128")
	want(wait("ev", `{"url":"`+dest+`","timeout":"1h",`+step+`}`, "Upstash-Workflow-RunId", "wfr_a", "Upstash-Forward-Authorization", "Bearer s3cret"), 200, "a wait", "messageId")
	waiters := call(t, "GET", s.api+"/v2/waiters/ev", "", auth...)
	var ws []map[string]any
	if err := json.Unmarshal([]byte(waiters.raw), &ws); err != nil || len(ws) != 1 || ws[0]["url"] != dest {
		t.Errorf("the event's waiters: %d %s", waiters.status, waiters.raw)
	}
	if strings.Contains(waiters.raw, "s3cret") {
		t.Errorf("the waiters show a secret header: %s", waiters.raw)
	}

	// A notify whose result cannot be published (the run's log is too
	// full for the event's data) leaves the run waiting, with a timeout.
	want(publish("payload", append(run("wfr_b"), "Upstash-Workflow-Init", "true", "Upstash-Delay", "1h")...), 201, "a second run's start", "messageId")
	want(wait("evb", `{"url":"`+dest+`","timeout":"1h",`+step+`}`, "Upstash-Workflow-RunId", "wfr_b"), 200, "the second run's wait", "messageId")
	for _, size := range []int{250 << 10, 16 << 10} {
		for i := 0; i < 40; i++ {
			if a := publish(strings.Repeat("f", size), append(run("wfr_b"), "Upstash-Delay", "1h")...); a.status != 201 {
				break
			}
		}
	}
	refused := call(t, "POST", s.api+"/v2/notify/evb", `"`+strings.Repeat("d", 100<<10)+`"`, auth...)
	if refused.status != 200 || !strings.Contains(refused.raw, "its whole log") {
		t.Errorf("a notify whose result does not fit: %d %.300s", refused.status, refused.raw)
	}
	if a := call(t, "GET", s.api+"/v2/waiters/evb", "", auth...); !strings.Contains(a.raw, dest) {
		t.Errorf("the run no longer waits after a notify that could not reach it: %s", a.raw)
	}

	// Another tenant sees none of team-a's run, and cannot end or notify it.
	theirs := []string{"Authorization", "Bearer " + other}
	want(call(t, "GET", s.api+"/v2/workflows/runs/wfr_a", "", theirs...), 404, "another tenant's read of the run", "not found")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_a?cancel=true", "", theirs...), 404, "another tenant's cancel of the run", "not found")
	if a := call(t, "POST", s.api+"/v2/notify/ev", `"x"`, theirs...); a.status != 200 || strings.TrimSpace(a.raw) != "[]" {
		t.Errorf("another tenant's notify of the event: %d %s; want 200 []", a.status, a.raw)
	}
	if a := call(t, "GET", s.api+"/v2/waiters/ev", "", theirs...); strings.TrimSpace(a.raw) != "[]" {
		t.Errorf("another tenant sees the event's waiters: %s", a.raw)
	}
	if a := call(t, "GET", s.api+"/v2/workflows/runs/wfr_a", "", auth...); a.status != 200 {
		t.Errorf("the run after another tenant's tries: %d %s", a.status, a.raw)
	}

	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_a?cancel=maybe", "", auth...), 400, "cancel neither true nor false", "cancel must be true or false")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_never?cancel=true", "", auth...), 404, "a cancel of a run never started", "not found")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs", "", auth...), 400, "a bulk cancel naming no run", "workflowRunIds")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs?workflowRunIds="+strings.Repeat("r,", 101)+"r", "", auth...), 400, "a bulk cancel of 102 runs", "1 to 100 runs")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs?workflowRunIds="+strings.Repeat("r", 200), "", auth...), 400, "a bulk cancel of a run id of 200 bytes", "128")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs/wfr_a?cancel=true", "", auth...), 200, "the run's cancel", "wfr_a")
	want(call(t, "DELETE", s.api+"/v2/workflows/runs?workflowRunIds=wfr_b,wfr_gone", "", auth...), 200, "a bulk cancel", `"cancelled":1`)
	want(call(t, "GET", s.api+"/v2/workflows/runs/wfr_a", "", auth...), 404, "the canceled run's log", "not found")
	// Its messages, the wait's timeout among them, were canceled with it.
	s.noneLeftToDeliver(t, token)
	if a := call(t, "GET", s.api+"/v2/workflows/runs/wfr_a", "", "Authorization", "Bearer nope"); a.status != http.StatusUnauthorized {
		t.Errorf("a run's log without the token: %d", a.status)
	}
}

// wantSays checks that a is status, saying says.
func wantSays(t *testing.T, a answer, status int, what, says string) {
	t.Helper()
	if a.status != status || !strings.Contains(a.raw, says) {
		t.Errorf("%s: %d %s; want %d saying %q", what, a.status, a.raw, status, says)
	}
}
