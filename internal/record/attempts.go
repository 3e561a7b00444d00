package record

// Attempts: starting one (Begin) and recording how it ended (Finish).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/retryd/retryd/internal/batch"
)

// BeginState says whether an attempt may start.
type BeginState int

// The answers of Begin.
const (
	// Started: the attempt is recorded as in flight; perform it.
	Started BeginState = iota
	// NotDue: the next attempt is due later (Due); do nothing yet.
	NotDue
	// Finished: the request is terminal (Status); no attempt.
	Finished
	// Missing: no such record (expired or never stored).
	Missing
	// Poisoned: the attempt left in flight (N, begun at StartedAt) was the
	// request's MaxInterruptions-th interrupted one: no attempt starts, and
	// the caller ends the request failed (Finish with that attempt).
	Poisoned
)

// MaxInterruptions is how many attempts of one run (since submission or
// the last redrive) a crash may interrupt; the last of them ends the
// request failed with FailureClass "interrupted", so a request whose
// answer kills workers (an OOM kill, say) does not loop forever.
const MaxInterruptions = 3

// Begin is Store.Begin's answer.
type Begin struct {
	State  BeginState
	Due    time.Time
	Status Status
	N      int // the attempt's number, when Started
	// FailedRun is the asynq retry count of the run that failed the
	// request, when Finished as failed (-1 when unknown).
	FailedRun int
	Request   *Request // the record as of the start, when Started or Poisoned
	// WaitedFor is what the request waited for since its last attempt
	// (one of WaitingReasons; "" for nothing), when Started, and
	// WaitedUntil the time it was shown to wait until (zero: none).
	WaitedFor   string
	WaitedUntil time.Time
	// StartedAt is when the interrupted attempt began, when Poisoned.
	StartedAt time.Time
}

// beginScript: scripts/begin.lua.
var beginScript = script("begin")

// InterruptedError is the error recorded on an attempt cut short by a crash.
const InterruptedError = "worker stopped during the attempt; attempt repeated"

// beginFields are the hash fields an attempt reads of its record (the
// worker's call, its flow control and the judgement of its outcome; none
// begin.lua writes), which begin.lua returns with the spec. Begin.Request
// holds these and what the spec says; its other fields are left zero.
var beginFields = []string{fStatus, fTenant, fMaxRetries, fBackoff, fMaxBackoff, fTimeout, fBudgetUsed, fNextAttemptAt, fCreatedAt}

// Begin starts an attempt of request id at now, if it is due. One script
// decides, writes and returns what the attempt reads, so the batch it
// goes in needs no transaction.
func (s *Store) Begin(ctx context.Context, id string, now time.Time) (*Begin, error) {
	k := s.k(id)
	keys := []string{k.req(id), k.attempts(id), k.stats(), k.spec(id)}
	args := make([]any, 0, 3+len(beginFields))
	args = append(args, now.UnixMilli(), InterruptedError, MaxInterruptions)
	for _, f := range beginFields {
		args = append(args, f)
	}
	v, err := batch.Run(ctx, s.batcher(id), beginScript, keys, args...).Slice()
	if err != nil {
		return nil, wrap(err)
	}
	return parseBegin(id, v)
}

// unbeginScript: scripts/unbegin.lua.
var unbeginScript = script("unbegin")

// Unbegin takes back attempt n of request id, begun but not sent because
// the request must wait (for a flow-control slot): the attempt is not
// counted, and the request shows what it waits for (one of
// WaitingReasons, or "" for no reason to show) and until when (zero: until
// an event starts it).
func (s *Store) Unbegin(ctx context.Context, id string, n int, waitingFor string, until time.Time) error {
	var untilMs int64
	if !until.IsZero() {
		untilMs = until.UnixMilli()
	}
	return wrap(unbeginScript.Run(ctx, s.rdb, []string{s.k(id).req(id)}, n, waitingFor, untilMs).Err())
}

// errReply is a script reply of an unexpected shape: an error, never a
// guess.
func errReply(script string, reply any) error {
	return fmt.Errorf("%s script: unexpected reply %v", script, reply)
}

// replyStrings reads a script's reply of n or more strings.
func replyStrings(script string, res []any, n int) ([]string, error) {
	if len(res) < n {
		return nil, errReply(script, res)
	}
	out := make([]string, len(res))
	for i, v := range res {
		s, ok := v.(string)
		if !ok {
			return nil, errReply(script, res)
		}
		out[i] = s
	}
	return out, nil
}

// replyInt reads a decimal number of a script's reply.
func replyInt(script, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errReply(script, v)
	}
	return n, nil
}

func parseBegin(id string, res []any) (*Begin, error) {
	v, err := replyStrings("begin", res, 1)
	if err != nil {
		return nil, err
	}
	if v[0] == "missing" {
		return &Begin{State: Missing}, nil
	}
	if len(v) < 2 {
		return nil, errReply("begin", res)
	}
	n, err := replyInt("begin", v[1])
	if err != nil {
		return nil, err
	}
	switch Status(v[0]) {
	case "notdue":
		return &Begin{State: NotDue, Due: time.UnixMilli(n)}, nil
	case "ok":
		if len(v) != 5+len(beginFields) {
			return nil, errReply("begin", res)
		}
		b := &Begin{State: Started, N: int(n), Request: beginRecord(id, v[1], v[4:]), WaitedFor: v[2]}
		if v[3] != "" {
			until, err := replyInt("begin", v[3])
			if err != nil {
				return nil, err
			}
			b.WaitedUntil = time.UnixMilli(until)
		}
		return b, nil
	case "poison":
		if len(v) != 4+len(beginFields) {
			return nil, errReply("begin", res)
		}
		at, err := replyInt("begin", v[2])
		if err != nil {
			return nil, err
		}
		return &Begin{State: Poisoned, N: int(n), StartedAt: time.UnixMilli(at), Request: beginRecord(id, v[1], v[3:])}, nil
	case Completed, Failed, Canceled:
		return &Begin{State: Finished, Status: Status(v[0]), FailedRun: int(n)}, nil
	}
	return nil, errReply("begin", res)
}

// beginRecord decodes the record of attempt n that begin.lua returned: the
// spec, then the values of beginFields.
func beginRecord(id, n string, rec []string) *Request {
	h := make(map[string]string, len(beginFields)+2)
	for i, f := range beginFields {
		h[f] = rec[1+i]
	}
	h[fAttemptCount], h[fInflightN] = n, n
	return decode(id, h, rec[0])
}

// Outcome is the result of a finished attempt and the state it leads to.
type Outcome struct {
	Attempt Attempt
	// Due is when the attempt was owed a start: its due time (the first
	// attempt's, a retry's), or the later end of a wait retryd set it (a
	// rate or cut turn). Its lateness is how long after Due it started:
	// the delay the workers caused. Zero when an event (a resume, a free
	// slot, a probe) released it from a wait: when is not known here, and
	// the time it waited is no lateness, so none is observed.
	Due             time.Time
	Status          Status    // the request's next status
	NextAttemptAt   time.Time // when Status is Retrying
	Result          *string   // the response body, when Status is Completed
	ResultTruncated bool
	// Run is asynq's retry count of the task run (-1 when unknown),
	// remembered when the request fails.
	Run int
	// Host is the request's destination host name, indexed when the
	// request fails (the DLQ's host filter).
	Host string
	// Tenant is the request's: its indexes are the ones moved.
	Tenant string
	// Labels are the request's (Request.Labels), named by its finished
	// entry so that they go when it expires.
	Labels []string
}

// Where a request's result is kept (its fHasResult).
const (
	resultInKey  = "1"
	resultInline = "2"
)

// inlineResultMax is the longest result kept in the request's hash rather
// than a key of its own. Most destinations answer a short body or none;
// kept inline it costs no key and no command. A longer value would turn
// the hash from Redis's compact listpack (values up to 64 bytes,
// hash-max-listpack-value's default) into a hashtable three times its
// size.
const inlineResultMax = 64

// FinishResult says what Finish did.
type FinishResult int

// The answers of Finish.
const (
	// Recorded: the attempt and the new status are stored.
	Recorded FinishResult = iota
	// RecordedCallback: as Recorded, and the request's outcome callback is
	// now due.
	RecordedCallback
	// Stale: another run took the request over; nothing was stored.
	Stale
	// CanceledMeanwhile: the attempt is stored, the request stays canceled.
	CanceledMeanwhile
)

// finishScript: scripts/finish.lua.
var finishScript = script("finish")

// Finish records attempt o.Attempt of request id and applies o.
func (s *Store) Finish(ctx context.Context, id string, o Outcome, now time.Time) (FinishResult, error) {
	a := o.Attempt
	a.StartedAtMs = a.StartedAt.UnixMilli()
	aj, err := json.Marshal(a)
	if err != nil {
		return 0, err
	}
	code := ""
	if a.StatusCode != 0 {
		code = strconv.Itoa(a.StatusCode)
	}
	fields := []any{fLastError, clip(a.Error), fLastStatusCode, code, fFailureClass, a.FailureClass}
	if o.Status == Retrying {
		fields = append(fields, fNextAttemptAt, ms(o.NextAttemptAt))
	}
	hasResult, result := "0", ""
	if o.Result != nil {
		trunc := "0"
		if o.ResultTruncated {
			trunc = "1"
		}
		hasResult, result = resultInKey, *o.Result
		if len(result) <= inlineResultMax {
			hasResult = resultInline
		}
		fields = append(fields, fResultTrunc, trunc)
	}
	if o.Status == Failed {
		fields = append(fields, fFailedRun, o.Run)
	}
	ret, err := s.retentionOf(ctx, o.Tenant, now)
	if err != nil {
		return 0, err
	}
	k := s.k(id)
	tk := k.of(o.Tenant)
	class, codeIdx := failIndexes(a.FailureClass, a.StatusCode)
	classKey, codeKey := k.req(id), k.req(id) // unused without a failure; name the slot
	if class != "" {
		classKey = tk.failClass(class)
	}
	if codeIdx != "" {
		codeKey = tk.failCode(a.StatusCode)
	}
	keys := append(append([]string{k.req(id), k.attempts(id), k.redrives(id)}, tk.statusIndexes()...), k.callbackDue(),
		k.result(id), tk.failedHost(o.Host), tk.finished(), classKey, codeKey)
	if ret.Payload > 0 {
		keys = append(keys, tk.payloadDue())
	}
	noCall := "0"
	switch {
	case a.NotCalled && (a.Outcome == "retryable" || a.Outcome == "exhausted"):
		// Stopped before the call by something that may pass (a token
		// endpoint down, a proxy unreachable): no call, but a try, or it
		// would be retried forever at the first backoff.
		noCall = "2"
	case a.NotCalled:
		noCall = "1"
	}
	args := append([]any{id, a.N, string(aj), string(o.Status), now.UnixMilli(), ret.Records.Milliseconds(),
		hasResult, result,
		class, codeIdx, finishedMember(id, o.Host, class, codeIdx, o.Labels), tk.failClassPrefix(), tk.failCodePrefix(), noCall}, fields...)
	res, err := batch.Run(ctx, s.batcher(id), finishScript, keys, args...).Text()
	if err != nil {
		return 0, wrap(err)
	}
	if res != "stale" && !a.NotCalled {
		var dur time.Duration
		if a.DurationMs != nil {
			dur = time.Duration(*a.DurationMs) * time.Millisecond
		}
		late := time.Duration(-1) // unknown: not observed
		if !o.Due.IsZero() {
			late = max(a.StartedAt.Sub(o.Due), 0)
		}
		s.countAttempt(a.Outcome, a.FailureClass, dur, late)
		if s.counts.due() {
			// Not added now, they are kept for RunCounts: the attempt
			// is recorded either way.
			_ = s.FlushCounts(ctx)
		}
	}
	switch res {
	case "stale":
		return Stale, nil
	case "canceled":
		return CanceledMeanwhile, nil
	case "callback":
		return RecordedCallback, nil
	case "ok":
		return Recorded, nil
	}
	return 0, errReply("finish", res)
}
