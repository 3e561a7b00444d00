package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/workflow"
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

// queued is a Queue that remembers what it was handed.
type queued struct{ ids []string }

func (q *queued) Enqueue(_ context.Context, id string, _ time.Time, _ time.Duration, _ int) error {
	q.ids = append(q.ids, id)
	return nil
}

// A child's result is one message of its parent run, made once: a second
// return (the API's end after the worker's failure, a retry) makes
// nothing; a parent that ended gets nothing; a run nothing invoked
// returns nothing.
func TestReturnMakesOneResultPerChild(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx, now := context.Background(), time.UnixMilli(1_765_000_000_000)
	runs, q := workflow.New(rdb, time.Hour), &queued{}
	rt := &Returner{Store: record.NewStore(rdb, time.Hour), Queue: q, Runs: runs, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
	start := func(run, url string, invoker []byte) {
		t.Helper()
		if _, err := runs.Publish(ctx, workflow.Message{Run: run, Init: true, URL: url, ID: run + "-init", Invoker: invoker}, now); err != nil {
			t.Fatal(err)
		}
	}
	inv, _ := json.Marshal(Invoker{Run: "parent", URL: "https://app/parent", Spec: map[string]any{"url": "https://app/parent", "method": "POST"},
		Step: json.RawMessage(`{"stepId":1,"stepName":"invoke","stepType":"Invoke","concurrent":1}`)})
	start("parent", "https://app/parent", nil)
	start("child", "https://app/child", inv)
	start("plain", "https://app/plain", nil)

	if ok, err := rt.Return(ctx, "", "plain", Outcome{}); ok || err != nil {
		t.Errorf("a run nothing invoked: %v, %v", ok, err)
	}
	if ok, err := rt.Return(ctx, "", "child", Outcome{Failed: true}); !ok || err != nil || len(q.ids) != 1 {
		t.Fatalf("the child's failure: %v, %v, %d enqueued", ok, err, len(q.ids))
	}
	if ok, err := rt.Return(ctx, "", "child", Outcome{Body: []byte(`"late"`)}); !ok || err != nil || len(q.ids) != 1 {
		t.Errorf("a second return: %v, %v, %d enqueued; want nothing more", ok, err, len(q.ids))
	}
	r, err := rt.Store.(*record.Store).Get(ctx, q.ids[0])
	if err != nil || r.QStash == nil || r.QStash.WorkflowRun != "parent" || !strings.Contains(r.Body, `isFailed\":true`) {
		t.Errorf("the parent's message: %+v, %v", r, err)
	}

	start("orphan", "https://app/child", inv)
	if _, _, err := runs.End(ctx, "", "parent", workflow.Ending{State: workflow.EndedCanceled, At: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Return(ctx, "", "orphan", Outcome{Body: []byte(`1`)}); !errors.Is(err, ErrParentEnded) || len(q.ids) != 1 {
		t.Errorf("a child whose parent ended: %v, %d enqueued", err, len(q.ids))
	}
}
