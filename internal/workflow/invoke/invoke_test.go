package invoke

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
)

// The parent's message is the invoking step with the outcome as its
// "out", a JSON string the SDK parses into {body, isFailed, isCanceled}.
func TestBodyIsTheStepWithItsOutcome(t *testing.T) {
	inv := Invoker{Step: json.RawMessage(`{"stepId":3,"stepName":"invoke child","stepType":"Invoke","concurrent":1}`)}
	for _, c := range []struct {
		o    Outcome
		want string
	}{
		{Outcome{Body: []byte(`{"doubled":42}`)}, `{"body":"{\"doubled\":42}","isFailed":false,"isCanceled":false}`},
		{Outcome{Failed: true}, `{"isFailed":true,"isCanceled":false}`},
		{Outcome{Canceled: true}, `{"isFailed":false,"isCanceled":true}`},
	} {
		b, err := inv.Body(c.o)
		if err != nil {
			t.Fatal(err)
		}
		var step map[string]any
		if err := json.Unmarshal(b, &step); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if step["out"] != c.want || step["stepName"] != "invoke child" || step["stepId"] != float64(3) {
			t.Errorf("outcome %+v: %s; want out %s and the step's fields", c.o, b, c.want)
		}
	}
	if _, err := (&Invoker{Step: json.RawMessage(`"no"`)}).Body(Outcome{}); err == nil {
		t.Error("a step that is not an object made a body")
	}
}

// The parent's message is a step of the parent run, with the body given
// and what the invoke's headers set.
func TestRequestIsAStepOfTheParent(t *testing.T) {
	inv := Invoker{Run: "wfr_parent", URL: "https://example.com/wf", Spec: map[string]any{"url": "https://example.com/wf", "method": "POST", "maxRetries": 2},
		QStash: &record.QStash{FailureCallback: "https://example.com/wf"}}
	r, raw, err := inv.Request([]byte(`{"out":"x"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != inv.URL || r.Body != `{"out":"x"}` || r.MaxRetries != 2 || r.Dialect != record.DialectQStash ||
		r.QStash.WorkflowRun != "wfr_parent" || r.QStash.FailureCallback != inv.URL {
		t.Errorf("the parent's message: %+v %+v", r, r.QStash)
	}
	if inv.Spec["body"] != nil {
		t.Error("Request changed the invoker's spec")
	}
	var spec map[string]any
	if json.Unmarshal(raw, &spec) != nil || spec["body"] != `{"out":"x"}` {
		t.Errorf("the submission: %s", raw)
	}
	if _, _, err := (&Invoker{Spec: map[string]any{"url": "ftp://x"}}).Request(nil, time.Now()); err == nil {
		t.Error("a spec retryd refuses made a request")
	}
}
