// Package invoke returns a workflow run's result to the run that invoked
// it (the SDKs' context.invoke). The invoking step's result is one more
// message of the parent run, made when the child ends: by the API when
// the child's last step ends it or a cancel does, by the worker when a
// step of the child fails for good. Both make it through Returner, under
// one idempotency key per child run, so whichever comes first is the
// result and a second is a replay.
package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/workflow"
)

// Invoker is what a child run keeps of the step that invoked it: the
// message that returns the child's result to the parent run, all but its
// body, which is the step with the result as its "out".
type Invoker struct {
	// Run, URL and CreatedAt (ms) are the parent run's.
	Run       string `json:"run"`
	URL       string `json:"url"`
	CreatedAt int64  `json:"createdAt"`
	// Spec is the result message as a submission, without its body.
	Spec map[string]any `json:"spec"`
	// QStash is what the message carries as a QStash message.
	QStash *record.QStash `json:"qstash"`
	// Step is the invoking step, as the parent's SDK sent it.
	Step json.RawMessage `json:"step"`
}

// Outcome is how a child run ended.
type Outcome struct {
	// Body is the result the child's last step sent (JSON text); nil
	// when it sent none, or the run failed or was canceled.
	Body             []byte
	Failed, Canceled bool
}

// result is the invoking step's "out", as the SDKs parse it.
type result struct {
	Body       *string `json:"body,omitempty"`
	IsFailed   bool    `json:"isFailed"`
	IsCanceled bool    `json:"isCanceled"`
}

// Body is the parent's message that carries outcome o of step: the step
// with o as its "out".
func (inv *Invoker) Body(o Outcome) ([]byte, error) {
	r := result{IsFailed: o.Failed, IsCanceled: o.Canceled}
	if o.Body != nil {
		s := string(o.Body)
		r.Body = &s
	}
	out, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode an invoke's result: %w", err)
	}
	var step map[string]json.RawMessage
	if err := json.Unmarshal(inv.Step, &step); err != nil {
		return nil, fmt.Errorf("the invoking step is not a JSON object: %w", err)
	}
	if step == nil {
		return nil, errors.New("the invoking step is not a JSON object: null")
	}
	if step["out"], err = json.Marshal(string(out)); err != nil {
		return nil, fmt.Errorf("encode an invoke's result: %w", err)
	}
	return json.Marshal(step)
}

// Request is the parent's message that carries body, parsed as a
// submission at now, with its submission's JSON.
func (inv *Invoker) Request(body []byte, now time.Time) (*record.Request, []byte, error) {
	spec := make(map[string]any, len(inv.Spec)+1)
	for k, v := range inv.Spec {
		spec[k] = v
	}
	spec["body"] = string(body)
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the result message of an invoke: %w", err)
	}
	r, err := submit.Parse(raw, now)
	if err != nil {
		return nil, nil, fmt.Errorf("the result message of an invoke: %w", err)
	}
	q := record.QStash{}
	if inv.QStash != nil {
		q = *inv.QStash
	}
	q.WorkflowRun = inv.Run
	r.Dialect, r.QStash = record.DialectQStash, &q
	return r, raw, nil
}

// Store is what a Returner needs of the record store.
type Store interface {
	Create(ctx context.Context, r *record.Request, idemKey string, body []byte, opts record.CreateOptions) (*record.Replay, error)
	Partitions() partition.Set
}

// Queue hands a new request to the workers.
type Queue interface {
	Enqueue(ctx context.Context, id string, due time.Time, attemptTimeout time.Duration, maxRetries int) error
}

// Runs are the workflow runs (workflow.Store).
type Runs interface {
	Info(ctx context.Context, t, run string) (workflow.Run, error)
	Publish(ctx context.Context, m workflow.Message, now time.Time) (workflow.Published, error)
	Forget(ctx context.Context, m workflow.Message) error
	MarkReturned(ctx context.Context, t, run string) error
}

// ErrParentEnded is a result whose parent run has ended: nobody waits
// for it.
var ErrParentEnded = errors.New("the run that invoked it has ended")

// Returner makes the messages that return child runs' results.
type Returner struct {
	Store Store
	Queue Queue
	Runs  Runs
	Log   *slog.Logger
	Now   func() time.Time
}

// Key is the idempotency key of child's result message: one per run of
// that id (a run id may be started again once its run has ended). With
// the run's returned mark, it makes one result per child run.
func Key(child workflow.Run, id string) string {
	return "workflow-invoke:" + strconv.FormatInt(child.CreatedAt.UnixMilli(), 10) + ":" + id
}

// Return returns the outcome of child run id of tenant t to the run that
// invoked it. It reports false when no run invoked child (or it has
// ended), ErrParentEnded when the parent has.
func (rt *Returner) Return(ctx context.Context, t, id string, o Outcome) (bool, error) {
	child, err := rt.Runs.Info(ctx, t, id)
	if err != nil || child.Invoker == nil {
		return false, err
	}
	if child.Returned {
		// Returned before (a child resumed after it failed, say): the
		// parent has its result.
		return true, nil
	}
	var inv Invoker
	if err := json.Unmarshal(child.Invoker, &inv); err != nil {
		return false, fmt.Errorf("read what invoked workflow run %s: %w", id, err)
	}
	body, err := inv.Body(o)
	if err != nil {
		return false, err
	}
	now := rt.Now()
	r, raw, err := inv.Request(body, now)
	if err != nil {
		return false, err
	}
	key := Key(child, id)
	r.Tenant, r.IdempotencyKey = t, key
	// Whichever process returns first makes the message, in the
	// partition its key picks, where a second finds the claim.
	r.ID = rt.Store.Partitions().NewID(now, key)
	msg := workflow.Message{Tenant: t, Run: inv.Run, URL: inv.URL, ID: r.ID, Body: body}
	if _, err := rt.Runs.Publish(ctx, msg, now); err != nil {
		if errors.Is(err, workflow.ErrNoRun) {
			return true, fmt.Errorf("return workflow run %s's result to %s: %w", id, inv.Run, ErrParentEnded)
		}
		return true, fmt.Errorf("return workflow run %s's result to %s: %w", id, inv.Run, err)
	}
	// Invoked runs count against no owner, as a schedule's ticks: the
	// invoke was the parent's accepted message.
	replay, err := rt.Store.Create(ctx, r, key, raw, record.CreateOptions{})
	if err != nil || replay != nil {
		// Refused, or returned before: not the parent's message.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if ferr := rt.Runs.Forget(fctx, msg); ferr != nil {
			rt.Log.Warn("could not take an invoke's result back from its run", "run", inv.Run, "err", ferr)
		}
		if err != nil {
			return true, fmt.Errorf("return workflow run %s's result to %s: %w", id, inv.Run, err)
		}
		if err := rt.Runs.MarkReturned(ctx, t, id); err != nil {
			rt.Log.Warn("could not mark an invoked run returned", "run", id, "err", err)
		}
		return true, nil
	}
	// Marked within the idempotency claim's window, which a second
	// return meets until then.
	if err := rt.Runs.MarkReturned(ctx, t, id); err != nil {
		rt.Log.Warn("could not mark an invoked run returned; a later end within a day is still returned once", "run", id, "err", err)
	}
	// A failed enqueue leaves a record without a task: the sweeper
	// enqueues it.
	if err := rt.Queue.Enqueue(ctx, r.ID, r.NextAttemptAt, time.Duration(r.TimeoutMs)*time.Millisecond, r.MaxRetries); err != nil {
		rt.Log.Warn("could not enqueue an invoke's result; the sweeper will", "requestId", r.ID, "err", err)
	}
	rt.Log.Info("workflow run returned its result", "run", id, "to", inv.Run, "requestId", r.ID, "failed", o.Failed, "canceled", o.Canceled)
	return true, nil
}
