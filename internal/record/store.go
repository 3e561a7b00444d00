package record

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors the store returns; callers match them with errors.Is.
var (
	ErrNotFound = errors.New("request not found")
	// ErrConflict: the request is not in a state that allows the change.
	ErrConflict = errors.New("request state conflict")
	// ErrUnavailable: Redis could not be reached or did not answer.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrFull: Redis refused a write at its maxmemory.
	ErrFull = errors.New("redis out of memory")
)

// IdempotencyWindow is how long a submission's Idempotency-Key is remembered.
const IdempotencyWindow = 24 * time.Hour

// Key builders. The {retryd} hash tag keeps every key in one cluster slot.
func keyReq(id string) string          { return "{retryd}:req:" + id }
func keyAttempts(id string) string     { return "{retryd}:att:" + id }
func keyIndex(s Status) string         { return "{retryd}:idx:" + string(s) }
func keyIdem(key string) string        { return "{retryd}:idem:" + hashHex(key) }
func keyRedrives(id string) string     { return "{retryd}:rdr:" + id }
func keyRedriveIdem(key string) string { return "{retryd}:idem-redrive:" + hashHex(key) }
func keySpec(id string) string         { return "{retryd}:spec:" + id }
func keyResult(id string) string       { return "{retryd}:res:" + id }

const keyAll = "{retryd}:idx:all"

// keyCallbackDue indexes requests whose callback is due but not finished,
// so the sweeper can find callbacks whose task went missing.
const keyCallbackDue = "{retryd}:idx:callback-due"

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// statusKeys are the index keys in Statuses order; scripts that move a
// request between indexes get all of them.
func statusKeys() []string {
	k := make([]string, len(Statuses))
	for i, s := range Statuses {
		k[i] = keyIndex(s)
	}
	return k
}

// Store reads and writes request records.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	// replicas > 0 makes Create wait until that many replicas hold the new
	// record (Redis WAIT) before it reports success.
	replicas    int
	replicaWait time.Duration
}

// RequireReplicas makes Create confirm a new request only once n replicas
// acknowledged it (waiting at most wait), so a failover cannot lose a
// request that got a 202. Its asynq task needs no such wait: the sweeper
// re-creates a task that a failover lost.
func (s *Store) RequireReplicas(n int, wait time.Duration) {
	s.replicas, s.replicaWait = n, wait
}

// ErrNotReplicated: the record was written but too few replicas confirmed
// it in time; it wraps ErrUnavailable (the API answers 503).
var ErrNotReplicated = fmt.Errorf("%w: too few replicas confirmed the write", ErrUnavailable)

// NewStore returns a Store over rdb; finished records expire after retention.
func NewStore(rdb redis.UniversalClient, retention time.Duration) *Store {
	return &Store{rdb: rdb, retention: retention}
}

// wrap turns connectivity failures into ErrUnavailable. Errors Redis itself
// answered (a script bug, a wrong type) are left as they are: they are bugs,
// not outages.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, redis.Nil) {
		// OOM is the error prefix Redis answers a write with at its
		// maxmemory (with noeviction): an outage of capacity, not a bug.
		if strings.HasPrefix(rerr.Error(), "OOM ") {
			return fmt.Errorf("%w: %w", ErrFull, err)
		}
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap(s.rdb.Ping(ctx).Err())
}

// createScript stores a new request and its index entries, and claims the
// idempotency key, all at once. The request's task is enqueued afterwards
// through asynq's own client (the sweeper enqueues it if that never
// happens).
//
// KEYS[1] request hash, KEYS[2] all-index, KEYS[3] pending index,
// KEYS[4] idempotency key (unused when ARGV[2] is ""), KEYS[5] spec key.
// ARGV[1] id, ARGV[2] idempotency value "id bodyhash" or "", ARGV[3] its
// TTL in ms, ARGV[4] the spec JSON, ARGV[5..] HSET field/value pairs.
// Returns nil when stored, or the existing idempotency value when the key
// was claimed before (nothing is written then).
var createScript = redis.NewScript(`
if ARGV[2] ~= "" then
  local prev = redis.call("GET", KEYS[4])
  if prev then return prev end
  redis.call("SET", KEYS[4], ARGV[2], "PX", ARGV[3])
end
redis.call("SET", KEYS[5], ARGV[4])
redis.call("HSET", KEYS[1], unpack(ARGV, 5))
redis.call("ZADD", KEYS[2], 0, ARGV[1])
redis.call("ZADD", KEYS[3], 0, ARGV[1])
return false
`)

// Replay describes an earlier submission with the same Idempotency-Key.
type Replay struct {
	ID       string
	SameBody bool
}

// Create stores r as pending in one script. When idemKey is not empty and
// an earlier submission claimed it within IdempotencyWindow, nothing is
// stored and the earlier submission is returned.
func (s *Store) Create(ctx context.Context, r *Request, idemKey string, body []byte) (*Replay, error) {
	idemVal := ""
	if idemKey != "" {
		idemVal = r.ID + " " + hashHex(string(body))
	}
	keys := []string{keyReq(r.ID), keyAll, keyIndex(Pending), keyIdem(idemKey), keySpec(r.ID)}
	args := append([]any{r.ID, idemVal, IdempotencyWindow.Milliseconds(), r.spec()}, r.fields()...)
	var prev string
	var err error
	if s.replicas > 0 {
		prev, err = s.createReplicated(ctx, keys, args)
	} else {
		prev, err = createScript.Run(ctx, s.rdb, keys, args...).Text()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(err)
	}
	id, bodyHash, _ := cutSpace(prev)
	return &Replay{ID: id, SameBody: idemVal != "" && bodyHash == hashHex(string(body))}, nil
}

// createReplicated runs createScript and WAIT on one connection (WAIT
// covers the writes of its own connection).
func (s *Store) createReplicated(ctx context.Context, keys []string, args []any) (string, error) {
	pipe := s.rdb.Pipeline()
	create := createScript.Eval(ctx, pipe, keys, args...)
	wait := pipe.Do(ctx, "WAIT", s.replicas, s.replicaWait.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	if n, _ := wait.Int(); n < s.replicas {
		return "", ErrNotReplicated
	}
	return create.Text()
}

func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Remove deletes a request that was never handed to the queue (its enqueue
// failed), with its index entries and idempotency claim, so a 503 answer
// leaves nothing behind.
func (s *Store) Remove(ctx context.Context, id, idemKey string) error {
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, keyReq(id), keyAttempts(id), keyRedrives(id), keySpec(id), keyResult(id))
	pipe.ZRem(ctx, keyAll, id)
	for _, st := range Statuses {
		pipe.ZRem(ctx, keyIndex(st), id)
	}
	if idemKey != "" {
		pipe.Del(ctx, keyIdem(idemKey))
	}
	_, err := pipe.Exec(ctx)
	return wrap(err)
}

// Get returns the request with its attempts.
func (s *Store) Get(ctx context.Context, id string) (*Request, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, keyReq(id))
	att := pipe.LRange(ctx, keyAttempts(id), 0, -1)
	rdr := pipe.LRange(ctx, keyRedrives(id), 0, -1)
	sp := pipe.Get(ctx, keySpec(id))
	res := pipe.Get(ctx, keyResult(id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap(err)
	}
	if len(h.Val()) == 0 {
		return nil, ErrNotFound
	}
	r := decode(id, h.Val(), sp.Val())
	r.Result = res.Val()
	r.Attempts = decodeAttempts(att.Val())
	r.Redrives = decodeRedrives(rdr.Val())
	return r, nil
}

// Page is one page of a listing.
type Page struct {
	Requests   []*Request
	NextCursor string // empty on the last page
}

// List returns requests newest first, optionally of one status, starting
// after cursor (an id from a previous page's NextCursor). Attempts are not
// loaded.
func (s *Store) List(ctx context.Context, status Status, cursor string, limit int) (*Page, error) {
	key := keyAll
	if status != "" {
		key = keyIndex(status)
	}
	start := "+"
	if cursor != "" {
		start = "(" + cursor
	}
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: key, Start: start, Stop: "-", ByLex: true, Rev: true, Count: int64(limit) + 1,
	}).Result()
	if err != nil {
		return nil, wrap(err)
	}
	page := &Page{Requests: []*Request{}}
	if len(ids) > limit {
		ids = ids[:limit]
		page.NextCursor = ids[limit-1]
	}
	hs, specs, err := s.loadMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	var gone []any
	for i, id := range ids {
		h := hs[i]
		if len(h) == 0 {
			// The record expired after its retention; its index entry is
			// cleaned up lazily, here.
			gone = append(gone, id)
			continue
		}
		r := decode(id, h, specs[i])
		if status != "" && r.Status != status {
			continue // moved between the two reads
		}
		page.Requests = append(page.Requests, r)
	}
	if len(gone) > 0 {
		s.rdb.ZRem(ctx, key, gone...)
	}
	return page, nil
}

// loadMany reads the hashes and specs of ids in one round trip.
func (s *Store) loadMany(ctx context.Context, ids []string) ([]map[string]string, []string, error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	pipe := s.rdb.Pipeline()
	hcmds := make([]*redis.MapStringStringCmd, len(ids))
	scmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		hcmds[i] = pipe.HGetAll(ctx, keyReq(id))
		scmds[i] = pipe.Get(ctx, keySpec(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, wrap(err)
	}
	hs := make([]map[string]string, len(ids))
	specs := make([]string, len(ids))
	for i := range ids {
		hs[i], specs[i] = hcmds[i].Val(), scmds[i].Val()
	}
	return hs, specs, nil
}

// cancelScript moves a pending or retrying request to canceled, and marks
// its outcome callback due (canceled is a final outcome too).
//
// KEYS[1] request hash, KEYS[2] attempts list, KEYS[3] redrives list,
// KEYS[4..8] status indexes in Statuses order, KEYS[9] spec, KEYS[10]
// result, KEYS[11] the callback-due index. ARGV[1] id, ARGV[2] now (ms),
// ARGV[3] retention (ms).
// Returns "missing", the current status when it cannot be canceled,
// "callback" (canceled, callback due) or "ok".
var cancelScript = redis.NewScript(`
local st = redis.call("HGET", KEYS[1], "status")
if not st then return "missing" end
if st ~= "pending" and st ~= "retrying" then return st end
redis.call("ZREM", KEYS[4], ARGV[1])
redis.call("ZREM", KEYS[5], ARGV[1])
redis.call("ZADD", KEYS[8], 0, ARGV[1])
redis.call("HSET", KEYS[1], "status", "canceled", "updatedAt", ARGV[2], "completedAt", ARGV[2])
redis.call("HDEL", KEYS[1], "nextAttemptAt")
` + closeRedriveLua + `
for _, i in ipairs({1, 2, 3, 9, 10}) do redis.call("PEXPIRE", KEYS[i], ARGV[3]) end
if redis.call("HGET", KEYS[1], "cb") == "1" then
  redis.call("HSET", KEYS[1], "cbStatus", "pending")
  redis.call("ZADD", KEYS[11], 0, ARGV[1])
  return "callback"
end
return "ok"
`)

// closeRedriveLua fills the outcome of an open redrive with the request's
// new terminal status (the status is in the hash already). It expects the
// request hash in KEYS[1] and the redrives list in KEYS[3].
const closeRedriveLua = `
if redis.call("HGET", KEYS[1], "redriveOpen") then
  local e = cjson.decode(redis.call("LINDEX", KEYS[3], -1))
  e.outcome = redis.call("HGET", KEYS[1], "status")
  redis.call("LSET", KEYS[3], -1, cjson.encode(e))
  redis.call("HDEL", KEYS[1], "redriveOpen")
end
`

// Cancel moves a pending or retrying request to canceled. It returns
// ErrNotFound, or ErrConflict when the request already finished; on
// success, callbackDue says the request's outcome callback is now due.
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (callbackDue bool, err error) {
	keys := append(append([]string{keyReq(id), keyAttempts(id), keyRedrives(id)}, statusKeys()...), keySpec(id), keyResult(id),
		keyCallbackDue)
	res, err := cancelScript.Run(ctx, s.rdb, keys, id, now.UnixMilli(), s.retention.Milliseconds()).Text()
	if err != nil {
		return false, wrap(err)
	}
	switch res {
	case "ok":
		return false, nil
	case "callback":
		return true, nil
	case "missing":
		return false, ErrNotFound
	default:
		return false, fmt.Errorf("%w: request is %s", ErrConflict, res)
	}
}

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
)

// Begin is Store.Begin's answer.
type Begin struct {
	State  BeginState
	Due    time.Time
	Status Status
	N      int // the attempt's number, when Started
	// FailedRun is the asynq retry count of the run that failed the
	// request, when Finished as failed (-1 when unknown).
	FailedRun int
	Request   *Request // the record as of the start, when Started
}

// beginLua starts an attempt: it records an attempt left in flight by a
// crashed worker as "interrupted" (it does not count against the budget),
// numbers the new attempt and marks it in flight, and returns the record.
// It expects the locals kReq (request hash), kAtt (attempts list), kStats
// (the stats hash), kSpec (the spec), now (ms) and ierr (the error text of
// an interrupted attempt).
// Returns {"missing"}, {status, failedRun} when terminal, {"notdue", dueMs}, or
// {"ok", n, HGETALL..., spec}.
const beginLua = `
local st = redis.call("HGET", kReq, "status")
if not st then return {"missing"} end
if st ~= "pending" and st ~= "retrying" then return {st, redis.call("HGET", kReq, "failedRun") or "-1"} end
local due = tonumber(redis.call("HGET", kReq, "nextAttemptAt") or "0")
if due > tonumber(now) then return {"notdue", tostring(due)} end
local inN = redis.call("HGET", kReq, "inflightN")
if inN then
  local at = redis.call("HGET", kReq, "inflightAt")
  redis.call("RPUSH", kAtt, cjson.encode({n = tonumber(inN), startedAtMs = tonumber(at), outcome = "interrupted", error = ierr}))
  redis.call("HINCRBY", kStats, "att|interrupted|", 1)
end
local n = redis.call("HINCRBY", kReq, "attemptCount", 1)
redis.call("HSET", kReq, "inflightN", n, "inflightAt", now, "updatedAt", now)
return {"ok", tostring(n), redis.call("HGETALL", kReq), redis.call("GET", kSpec)}
`

// beginScript runs beginLua. KEYS[1] request hash, KEYS[2] attempts list,
// KEYS[3] the stats hash, KEYS[4] the spec. ARGV[1] now (ms), ARGV[2] the
// error text of an interrupted attempt.
var beginScript = redis.NewScript(`
local kReq, kAtt, kStats, kSpec = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, ierr = ARGV[1], ARGV[2]
` + beginLua)

// InterruptedError is the error recorded on an attempt cut short by a crash.
const InterruptedError = "worker stopped during the attempt; attempt repeated"

// Begin starts an attempt of request id at now, if it is due.
func (s *Store) Begin(ctx context.Context, id string, now time.Time) (*Begin, error) {
	res, err := beginScript.Run(ctx, s.rdb, []string{keyReq(id), keyAttempts(id), keyStats, keySpec(id)}, now.UnixMilli(), InterruptedError).Slice()
	if err != nil {
		return nil, wrap(err)
	}
	return parseBegin(id, res), nil
}

func parseBegin(id string, res []any) *Begin {
	head, _ := res[0].(string)
	switch head {
	case "missing":
		return &Begin{State: Missing}
	case "notdue":
		dueMs, _ := strconv.ParseInt(res[1].(string), 10, 64)
		return &Begin{State: NotDue, Due: time.UnixMilli(dueMs)}
	case "ok":
		n, _ := strconv.Atoi(res[1].(string))
		flat, _ := res[2].([]any)
		h := make(map[string]string, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			k, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			h[k] = v
		}
		sp, _ := res[3].(string)
		return &Begin{State: Started, N: n, Request: decode(id, h, sp)}
	default:
		failedRun, _ := strconv.Atoi(res[1].(string))
		return &Begin{State: Finished, Status: Status(head), FailedRun: failedRun}
	}
}

// Outcome is the result of a finished attempt and the state it leads to.
type Outcome struct {
	Attempt         Attempt
	Lateness        time.Duration // how long after its due time the attempt started
	Status          Status        // the request's next status
	NextAttemptAt   time.Time     // when Status is Retrying
	Result          *string       // the response body, when Status is Completed
	ResultTruncated bool
	// Run is asynq's retry count of the task run (-1 when unknown),
	// remembered when the request fails.
	Run int
}

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

// finishScript records a finished attempt and moves the request to its next
// status. An attempt whose in-flight mark is gone (a later run already
// recorded it as interrupted) is dropped; a request canceled meanwhile keeps
// its status and only gains the attempt. On a terminal status it fills the
// outcome of an open redrive, starts retention, and marks the callback due.
//
// KEYS[1] request hash, KEYS[2] attempts list, KEYS[3] redrives list,
// KEYS[4..8] status indexes in Statuses order, KEYS[9] the callback-due
// index, KEYS[10] the stats hash, KEYS[11] spec, KEYS[12] result. ARGV[1]
// id, ARGV[2] attempt n, ARGV[3] attempt JSON, ARGV[4] next status, ARGV[5]
// now (ms), ARGV[6] retention (ms), ARGV[7] the attempt's stats fields
// "counter,durBucket,lateBucket", ARGV[8] duration (ms), ARGV[9] lateness
// (ms), ARGV[10] "1" when ARGV[11] is a response body to keep as the
// result, ARGV[12..] HSET field/value pairs for the next state.
// Returns "stale", "canceled", "callback" or "ok".
var finishScript = redis.NewScript(`
if redis.call("HGET", KEYS[1], "inflightN") ~= ARGV[2] then return "stale" end
local c, d, l = string.match(ARGV[7], "([^,]+),([^,]+),([^,]+)")
redis.call("HINCRBY", KEYS[10], c, 1)
redis.call("HINCRBY", KEYS[10], d, 1)
redis.call("HINCRBY", KEYS[10], "dur_sum_ms", ARGV[8])
redis.call("HINCRBY", KEYS[10], l, 1)
redis.call("HINCRBY", KEYS[10], "late_sum_ms", ARGV[9])
redis.call("RPUSH", KEYS[2], ARGV[3])
redis.call("HDEL", KEYS[1], "inflightN", "inflightAt")
redis.call("HINCRBY", KEYS[1], "budgetUsed", 1)
local st = redis.call("HGET", KEYS[1], "status")
if st == "canceled" then return "canceled" end
local idx = {pending = KEYS[4], retrying = KEYS[5], completed = KEYS[6], failed = KEYS[7], canceled = KEYS[8]}
if st ~= ARGV[4] then
  redis.call("ZREM", idx[st], ARGV[1])
  redis.call("ZADD", idx[ARGV[4]], 0, ARGV[1])
end
redis.call("HSET", KEYS[1], "status", ARGV[4], "updatedAt", ARGV[5], unpack(ARGV, 12))
if ARGV[10] == "1" then
  redis.call("SET", KEYS[12], ARGV[11])
  redis.call("HSET", KEYS[1], "hasResult", "1")
end
if ARGV[4] == "pending" or ARGV[4] == "retrying" then return "ok" end
redis.call("HDEL", KEYS[1], "nextAttemptAt")
redis.call("HSET", KEYS[1], "completedAt", ARGV[5])
` + closeRedriveLua + `
for _, i in ipairs({1, 2, 3, 11, 12}) do redis.call("PEXPIRE", KEYS[i], ARGV[6]) end
if redis.call("HGET", KEYS[1], "cb") == "1" then
  redis.call("HSET", KEYS[1], "cbStatus", "pending")
  redis.call("ZADD", KEYS[9], 0, ARGV[1])
  return "callback"
end
return "ok"
`)

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
		hasResult, result = "1", *o.Result
		fields = append(fields, fResultTrunc, trunc)
	}
	if o.Status == Failed {
		fields = append(fields, fFailedRun, o.Run)
	}
	keys := append(append([]string{keyReq(id), keyAttempts(id), keyRedrives(id)}, statusKeys()...), keyCallbackDue, keyStats,
		keySpec(id), keyResult(id))
	var durMs int64
	if a.DurationMs != nil {
		durMs = *a.DurationMs
	}
	late := max(o.Lateness, 0)
	stats := fmt.Sprintf("att|%s|%s,dur|%d,late|%d", a.Outcome, a.FailureClass,
		bucket(DurationBuckets, float64(durMs)/1000), bucket(LatenessBuckets, late.Seconds()))
	args := append([]any{id, a.N, string(aj), string(o.Status), now.UnixMilli(), s.retention.Milliseconds(),
		stats, durMs, late.Milliseconds(), hasResult, result}, fields...)
	res, err := finishScript.Run(ctx, s.rdb, keys, args...).Text()
	if err != nil {
		return 0, wrap(err)
	}
	switch res {
	case "stale":
		return Stale, nil
	case "canceled":
		return CanceledMeanwhile, nil
	case "callback":
		return RecordedCallback, nil
	}
	return Recorded, nil
}
