package record

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/batch"
	rediskeys "github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/tenant"
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

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Store reads and writes request records.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	parts     partition.Set
	// replicas > 0 makes Create wait until that many replicas hold the new
	// record (Redis WAIT) before it reports success.
	replicas    int
	replicaWait time.Duration
	// hostIndexReady: every partition's failed requests are indexed by
	// host (backfillHostIndex ran).
	hostIndexReady atomic.Bool
	// registered are the tenants this process saw listed in rediskeys.Tenants.
	registered sync.Map
	// ret is the default payload retention and the tenants' retention.
	ret retentionState
	// counts are the attempts' counters not yet in Redis (RunCounts).
	counts counts
	// batched sends the creates, begins and finishes of concurrent
	// requests together, one batcher per partition: a batch may be a
	// transaction, and a transaction must stay in one cluster slot.
	batched []*batch.Batcher
}

// RingsOnCreate says whether Create rings the workers' doorbell itself
// (CreateOptions.Ring): with one partition the doorbell list (rediskeys.Bell)
// shares the record's cluster slot, so the script that stores a request
// rings too, and its enqueue need not (waiting.WithoutRing). With several,
// the workers share the first partition's doorbell, which another
// partition's script cannot reach on a cluster.
func (s *Store) RingsOnCreate() bool { return s.parts.Len() == 1 }

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

// NewStore returns a Store over rdb with one partition; finished records
// are kept for retention (the sweeper's TrimIndexes deletes them then).
func NewStore(rdb redis.UniversalClient, retention time.Duration) *Store {
	return NewPartitioned(rdb, retention, partition.One())
}

// NewPartitioned returns a Store whose requests spread over parts.
func NewPartitioned(rdb redis.UniversalClient, retention time.Duration, parts partition.Set) *Store {
	s := &Store{rdb: rdb, retention: retention, parts: parts}
	for range max(parts.Len(), 1) {
		s.batched = append(s.batched, batch.New(rdb))
	}
	return s
}

// batcher is the batcher of request id's partition.
func (s *Store) batcher(id string) *batch.Batcher { return s.batched[s.parts.OfID(id)] }

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
		if transient(rerr.Error()) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// transientPrefixes start the errors a node answers while a failover or a
// resync is under way: the write may succeed on the next try.
var transientPrefixes = []string{"READONLY ", "NOREPLICAS ", "LOADING ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN "}

func transient(msg string) bool {
	for _, p := range transientPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap(s.rdb.Ping(ctx).Err())
}

// createScript: scripts/create.lua.
var createScript = script("create")

// Replay describes an earlier submission with the same Idempotency-Key.
type Replay struct {
	ID       string
	SameBody bool
}

// Owner is who a request counts against, and how many unfinished requests
// it may have (Limit 0: no limit, and nothing is counted).
type Owner struct {
	ID    string
	Limit int
}

// CreateOptions are the optional parts of Create.
type CreateOptions struct {
	Owner Owner
	// Ring rings the workers' doorbell in the same script when the store
	// can (RingsOnCreate): set it when the request's task will be pending
	// at once. Ringing here saves the round trip of ringing after the
	// enqueue.
	Ring bool
	// Task, when set, is the request's task, pending at once, written in
	// the same script (EnqueuesOnCreate must hold): the caller then
	// enqueues nothing.
	Task *Task
}

// Task is a queue's task as its owner (internal/waiting) lays it out:
// HSET Key Fields, then LPUSH List with the request's id.
type Task struct {
	Key, List string
	Fields    []any
}

// EnqueuesOnCreate says whether Create may write the request's task
// (CreateOptions.Task). Not while submissions wait for replicas: a task
// reaches the workers only once the replicas hold its record, so it is
// enqueued after the WAIT.
func (s *Store) EnqueuesOnCreate() bool { return s.replicas == 0 }

// Create stores r as pending in one script. When idemKey is not empty and
// an earlier submission claimed it within IdempotencyWindow, nothing is
// stored and the earlier submission is returned. When owner is at its limit
// of unfinished requests, the entries of its requests that finished since
// are pruned; if none did, nothing is stored and the error is
// ErrOwnerLimit.
func (s *Store) Create(ctx context.Context, r *Request, idemKey string, body []byte, opts CreateOptions) (*Replay, error) {
	owner := opts.Owner
	idemVal := ""
	if idemKey != "" {
		idemVal = r.ID + " " + hashHex(string(body))
	}
	if err := s.register(ctx, r.Tenant); err != nil {
		return nil, err
	}
	k := s.k(r.ID)
	tk := k.of(r.Tenant)
	ownerKey := k.req(r.ID) // unused without a limit; names the request's slot
	if owner.Limit > 0 {
		// The owner's set lives in each partition (one slot with the
		// request); each partition holds its share of the limit.
		ownerKey = tk.owner(owner.ID)
		owner.Limit = (owner.Limit + s.parts.Len() - 1) / s.parts.Len()
	}
	bell, ring := k.req(r.ID), "0"
	if opts.Ring && s.RingsOnCreate() {
		bell, ring = rediskeys.Bell(s.parts.Tag(s.parts.OfID(r.ID))), "1"
	}
	taskKey, taskList, taskFields := k.req(r.ID), k.req(r.ID), []any(nil)
	if t := opts.Task; t != nil {
		if !s.EnqueuesOnCreate() {
			return nil, errors.New("create: a task is enqueued after its record is confirmed by the replicas, not with it")
		}
		taskKey, taskList, taskFields = t.Key, t.List, t.Fields
	}
	keys := append([]string{k.req(r.ID), tk.index(Pending), tk.idem(idemKey), k.spec(r.ID), ownerKey, bell,
		taskKey, taskList}, staticIndexes(tk, hostOf(r.URL), r.Labels())...)
	args := append([]any{r.ID, idemVal, IdempotencyWindow.Milliseconds(), r.spec(),
		owner.Limit, (s.retention + 24*time.Hour).Milliseconds(), r.CreatedAt.UnixMilli(), ring, len(taskFields)},
		taskFields...)
	args = append(args, r.fields()...)
	for {
		var prev string
		var err error
		if s.replicas > 0 {
			prev, err = s.createReplicated(ctx, keys, args)
		} else {
			prev, err = batch.Run(ctx, s.batcher(r.ID), createScript, keys, args...).Text()
		}
		switch {
		case errors.Is(err, redis.Nil):
			return nil, nil
		case err != nil:
			return nil, wrap(err)
		case prev == "full":
			pruned, err := s.pruneOwner(ctx, ownerKey)
			if err != nil {
				return nil, err
			}
			if pruned == 0 {
				return nil, ErrOwnerLimit
			}
			continue
		}
		id, rest, _ := cutSpace(prev)
		bodyHash, _, _ := cutSpace(rest) // then " replayed", once replayed
		if id == "" {
			return nil, errReply("create", prev)
		}
		return &Replay{ID: id, SameBody: idemVal != "" && bodyHash == hashHex(string(body))}, nil
	}
}

// createReplicated runs createScript and WAIT on one connection (WAIT
// covers the writes of its own connection). Only a request it stored
// itself, unconfirmed, is ErrNotReplicated (the caller takes it back); a
// replay or a full owner it could not confirm is ErrUnavailable, and what
// the script found belongs to another submission, not to be removed.
func (s *Store) createReplicated(ctx context.Context, keys []string, args []any) (string, error) {
	pipe := s.rdb.Pipeline()
	create := createScript.Eval(ctx, pipe, keys, args...)
	wait := pipe.Do(ctx, "WAIT", s.replicas, s.replicaWait.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	prev, err := create.Text()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	if n, werr := wait.Int(); werr != nil || n < s.replicas {
		if errors.Is(err, redis.Nil) {
			return "", ErrNotReplicated
		}
		return "", errEarlierNotReplicated
	}
	return prev, err
}

// errEarlierNotReplicated: a replay (or a full owner) whose state too few
// replicas confirmed; the API answers 503 and removes nothing.
var errEarlierNotReplicated = fmt.Errorf("%w: too few replicas confirmed the earlier submission", ErrUnavailable)

func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Remove deletes request id of tenant t with its index entries and
// idempotency claim.
func (s *Store) Remove(ctx context.Context, t, id, idemKey string) error {
	in, _, err := s.entriesOf(ctx, s.rdb, id)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, s.removal(ctx, t, id, idemKey, in))
	return wrap(err)
}

// TakeBack removes request id of tenant t that was never confirmed (too
// few replicas confirmed it, or its enqueue failed), so a 503 answer leaves
// nothing behind. It leaves a request that may have been acknowledged or
// delivered all the same: one whose claim a replay of idemKey has seen
// (that replay may have been answered 200), and one a worker has begun
// (an enqueue reported failed may have reached Redis, and a woken worker
// taken the task). removed is then false, and the request stays to be
// delivered.
func (s *Store) TakeBack(ctx context.Context, t, id, idemKey string) (removed bool, err error) {
	req := s.k(id).req(id)
	watched := []string{req}
	claim := ""
	if idemKey != "" {
		claim = s.k(id).of(t).idem(idemKey)
		watched = append(watched, claim)
	}
	remove := func(tx *redis.Tx) error {
		h, err := tx.HMGet(ctx, req, fStatus, fAttemptCount, fInflightN).Result()
		if err != nil {
			return err
		}
		if begun(h) {
			return nil
		}
		if claim != "" {
			v, err := tx.Get(ctx, claim).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if strings.HasSuffix(v, replayedMark) {
				return nil
			}
		}
		in, _, err := s.entriesOf(ctx, tx, id)
		if err != nil {
			return err
		}
		removed = true
		_, err = tx.TxPipelined(ctx, s.removal(ctx, t, id, idemKey, in))
		return err
	}
	// WATCH fails the removal when a replay or a worker touches the
	// request in between; the next try sees what it did.
	for try := 0; ; try++ {
		removed = false
		err = s.rdb.Watch(ctx, remove, watched...)
		if !errors.Is(err, redis.TxFailedErr) || try == 2 {
			return removed && err == nil, wrap(err)
		}
	}
}

// begun says whether a request hash's status, attemptCount and inflightN
// (as HMGET reads them) show that a worker has taken it up.
func begun(h []any) bool {
	status, _ := h[0].(string)
	count, _ := h[1].(string)
	inflight, _ := h[2].(string)
	return (status != "" && status != string(Pending)) || (count != "" && count != "0") || inflight != ""
}

// removal queues the deletion of a request's keys, index entries (those
// in names, read by entriesOf; none when it was gone) and idempotency
// claim.
func (s *Store) removal(ctx context.Context, t, id, idemKey string, in indexed) func(redis.Pipeliner) error {
	k := s.k(id)
	tk := k.of(t)
	return func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, k.req(id), k.attempts(id), k.redrives(id), k.spec(id), k.result(id))
		dropListed(ctx, pipe, tk, id, Statuses)
		if in.id != "" {
			member := ""
			if in.finishedAt != "" {
				member = in.member()
			}
			dropEntries(ctx, pipe, tk, in.indexEntries, member)
		}
		if idemKey != "" {
			pipe.Del(ctx, tk.idem(idemKey))
		}
		return nil
	}
}

// replayedMark ends an idempotency claim that a replay has seen.
const replayedMark = " replayed"

// Get returns the request with its attempts.
func (s *Store) Get(ctx context.Context, id string) (*Request, error) {
	pipe := s.rdb.Pipeline()
	k := s.k(id)
	h := pipe.HGetAll(ctx, k.req(id))
	att := pipe.LRange(ctx, k.attempts(id), 0, -1)
	rdr := pipe.LRange(ctx, k.redrives(id), 0, -1)
	sp := pipe.Get(ctx, k.spec(id))
	res := pipe.Get(ctx, k.result(id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap(err)
	}
	if len(h.Val()) == 0 {
		return nil, ErrNotFound
	}
	r := decode(id, h.Val(), sp.Val())
	r.Result = res.Val()
	if h.Val()[fHasResult] == resultInline {
		r.Result = h.Val()[fResult]
	}
	r.Attempts = decodeAttempts(att.Val())
	r.Redrives = decodeRedrives(rdr.Val())
	return r, nil
}

// GetIn is Get for a caller of scope: another tenant's request is
// ErrNotFound, as if it did not exist.
func (s *Store) GetIn(ctx context.Context, scope tenant.Scope, id string) (*Request, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !scope.Has(r.Tenant) {
		return nil, ErrNotFound
	}
	return r, nil
}

// tenantOf is the tenant of request id, checked against scope: ErrNotFound
// when the request does not exist or is another tenant's. A request's
// tenant never changes, so a script run after this check acts on the
// tenant it checked.
func (s *Store) tenantOf(ctx context.Context, scope tenant.Scope, id string) (string, error) {
	v, err := s.rdb.HMGet(ctx, s.k(id).req(id), fStatus, fTenant).Result()
	if err != nil {
		return "", wrap(err)
	}
	if v[0] == nil {
		return "", ErrNotFound
	}
	t, _ := v[1].(string)
	if !scope.Has(t) {
		return "", ErrNotFound
	}
	return tenant.Of(t), nil
}

// Page is one page of a listing.
type Page struct {
	Requests   []*Request
	NextCursor string // empty on the last page
}

// List returns the requests of scope newest first, optionally of one
// status, starting after cursor (an id from a previous page's
// NextCursor). Attempts are not loaded.
func (s *Store) List(ctx context.Context, scope tenant.Scope, status Status, cursor string, limit int) (*Page, error) {
	if status == "" {
		return s.ListIn(ctx, scope, nil, cursor, limit, nil)
	}
	return s.ListIn(ctx, scope, []Status{status}, cursor, limit, nil)
}

// ListIn is List over any of statuses (nil: every request), merged into
// one newest-first order behind one cursor. It examines no more entries
// than scan allows (nil: ScanBudget); a page cut short by it has a cursor.
func (s *Store) ListIn(ctx context.Context, scope tenant.Scope, statuses []Status, cursor string, limit int, scan *Scan) (*Page, error) {
	scan = scan.orNew()
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil {
		return nil, err
	}
	var indexes []func(keys) string
	for _, t := range tenants {
		sts := statuses
		if sts == nil {
			// Every request is in one status index.
			sts = Statuses
		}
		for _, st := range sts {
			indexes = append(indexes, func(k keys) string { return k.of(t).index(st) })
		}
	}
	page := &Page{Requests: []*Request{}}
	if len(indexes) == 0 {
		return page, nil
	}
	if scan.Spent() {
		page.NextCursor = cursor
		return page, nil
	}
	limit = min(limit, scan.Left())
	ids, err := s.newest(ctx, cursor, int64(limit)+1, indexes...)
	if err != nil {
		return nil, wrap(err)
	}
	if len(ids) > limit {
		ids = ids[:limit]
		page.NextCursor = ids[limit-1]
	}
	scan.use(len(ids))
	loaded := 0
	for start := 0; start < len(ids); start += listChunk {
		chunk := ids[start:min(start+listChunk, len(ids))]
		n, err := s.loadPage(ctx, page, scope, statuses, indexes, chunk)
		if err != nil {
			return nil, err
		}
		loaded += n
		if loaded >= ListBudget && start+len(chunk) < len(ids) {
			// Full: the rest is the next page's.
			page.NextCursor = chunk[len(chunk)-1]
			break
		}
	}
	return page, nil
}

// ListBudget bounds the stored bytes (records and their specs, bodies
// included) one page of a listing holds: 500 requests of 256 KiB bodies
// would otherwise be 128 MB in one call. A page that reaches it ends
// early, with a cursor to go on.
const ListBudget = 8 << 20

// listChunk is how many records one round trip loads while a page fills,
// so a page stops within one chunk of ListBudget.
const listChunk = 25

// storedSize is the bytes a record's hash and spec take once loaded.
func storedSize(h map[string]string, spec string) int {
	n := len(spec)
	for k, v := range h {
		n += len(k) + len(v)
	}
	return n
}

// Footprint is roughly what r holds in memory and shows in a document:
// its body, headers, URL, result and attempts' response bodies. A list
// that keeps what it reads (the DLQ's) stops at ListBudget of it.
func Footprint(r *Request) int {
	n := len(r.Body) + len(r.URL) + len(r.Result) + len(r.LastError)
	for k, v := range r.Headers {
		n += len(k) + len(v)
	}
	for _, a := range r.Attempts {
		n += len(a.Error)
		if a.ResponseBody != nil {
			n += len(*a.ResponseBody)
		}
	}
	if q := r.QStash; q != nil {
		for _, l := range q.AllLabels() {
			n += len(l)
		}
	}
	return n
}

// loadPage appends the requests of ids (of scope, in statuses) to page
// and says how many stored bytes they took.
func (s *Store) loadPage(ctx context.Context, page *Page, scope tenant.Scope, statuses []Status, indexes []func(keys) string, ids []string) (int, error) {
	hs, specs, err := s.loadMany(ctx, ids)
	if err != nil {
		return 0, err
	}
	loaded := 0
	var gone redis.Pipeliner
	for i, id := range ids {
		h := hs[i]
		loaded += storedSize(h, specs[i])
		if len(h) == 0 {
			// The record expired after its retention; its index entries
			// are cleaned up lazily, here.
			if gone == nil {
				gone = s.rdb.Pipeline()
			}
			for _, index := range indexes {
				gone.ZRem(ctx, index(s.k(id)), id)
			}
			continue
		}
		r := decode(id, h, specs[i])
		if statuses != nil && !slices.Contains(statuses, r.Status) {
			continue // moved between the two reads
		}
		if !scope.Has(r.Tenant) {
			continue // an index entry of another tenant: a bug, never shown
		}
		page.Requests = append(page.Requests, r)
	}
	if gone != nil {
		_, _ = gone.Exec(ctx) // best effort: a later list tries again
	}
	return loaded, nil
}

// newest returns up to n ids of the indexes, newest first, after cursor
// ("" from the newest), merged over every partition. Ids sort by creation
// time across partitions, so one cursor serves them all.
func (s *Store) newest(ctx context.Context, cursor string, n int64, indexes ...func(keys) string) ([]string, error) {
	start := "+"
	if cursor != "" {
		start = "(" + cursor
	}
	parts := s.each()
	byPart := make([][]string, len(parts))
	for i, k := range parts {
		for _, index := range indexes {
			byPart[i] = append(byPart[i], index(k))
		}
	}
	return s.lexNewest(ctx, byPart, start, "-", n)
}

// lexNewest reads up to n members of each key, from hi down to lo (lex
// bounds), and merges them: newest first, each once, at most n. The keys
// come grouped by partition. A request is in one status index of its
// partition at a time, and the scripts that change its status move it at
// once: so where a partition has several keys they are read in one
// transaction (MULTI/EXEC), and a request moving meanwhile (a redrive
// moves one back to pending) is seen where it was or where it went, never
// in neither. A request never changes partition, so the partitions need
// no common snapshot: on a Redis Cluster, whose transactions stay in one
// slot, each partition's is its own.
func (s *Store) lexNewest(ctx context.Context, byPart [][]string, hi, lo string, n int64) ([]string, error) {
	rangeOf := func(key string) redis.ZRangeArgs {
		return redis.ZRangeArgs{Key: key, Start: hi, Stop: lo, ByLex: true, Rev: true, Count: n}
	}
	var flat []string
	several := false
	for _, ks := range byPart {
		flat = append(flat, ks...)
		several = several || len(ks) > 1
	}
	if len(flat) == 1 {
		return s.rdb.ZRangeArgs(ctx, rangeOf(flat[0])).Result()
	}
	cmds := make([][]*redis.StringSliceCmd, len(byPart))
	queue := func(pipe redis.Pipeliner, i int) {
		for _, key := range byPart[i] {
			cmds[i] = append(cmds[i], pipe.ZRangeArgs(ctx, rangeOf(key)))
		}
	}
	if cluster, ok := s.rdb.(*redis.ClusterClient); ok && several {
		// A transaction per partition, concurrently.
		errs := make([]error, len(byPart))
		var wg sync.WaitGroup
		for i := range byPart {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pipe := cluster.TxPipeline()
				queue(pipe, i)
				_, errs[i] = pipe.Exec(ctx)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	} else {
		// One round trip: a plain pipeline when no partition has two
		// keys, else one transaction over them all.
		pipe := s.rdb.Pipeline()
		if several {
			pipe = s.rdb.TxPipeline()
		}
		for i := range byPart {
			queue(pipe, i)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	var all []string
	for _, cs := range cmds {
		for _, c := range cs {
			all = append(all, c.Val()...)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	slices.Reverse(all)
	if int64(len(all)) > n {
		all = all[:n]
	}
	return all, nil
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
		hcmds[i] = pipe.HGetAll(ctx, s.k(id).req(id))
		scmds[i] = pipe.Get(ctx, s.k(id).spec(id))
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

// cancelScript: scripts/cancel.lua.
var cancelScript = script("cancel")

// Cancel moves a pending or retrying request to canceled, recording actor
// as who did. It returns
// ErrNotFound, or ErrConflict when the request already finished; on
// success, callbackDue says the request's outcome callback is now due.
func (s *Store) Cancel(ctx context.Context, scope tenant.Scope, id, actor string, now time.Time) (callbackDue bool, err error) {
	k := s.k(id)
	var res string
	for try := 0; ; try++ {
		// The finished entry names the failure indexes the request is in;
		// an attempt recorded between the read and the script moves them,
		// and the script then writes nothing and says so.
		in, ok, err := s.entriesOf(ctx, s.rdb, id)
		if err != nil {
			return false, err
		}
		if !ok || !scope.Has(in.tenant) {
			return false, ErrNotFound
		}
		ret, err := s.retentionOf(ctx, in.tenant, now)
		if err != nil {
			return false, err
		}
		keys := append(append([]string{k.req(id), k.attempts(id), k.redrives(id)}, k.of(in.tenant).statusIndexes()...),
			k.callbackDue(), k.of(in.tenant).finished())
		if ret.Payload > 0 {
			keys = append(keys, k.of(in.tenant).payloadDue())
		}
		res, err = cancelScript.Run(ctx, s.rdb, keys, id, now.UnixMilli(), actor,
			in.member(), in.class, in.code).Text()
		if err != nil {
			return false, wrap(err)
		}
		if res != "moved" || try == 4 {
			break
		}
	}
	switch res {
	case "ok":
		return false, nil
	case "callback":
		return true, nil
	case "missing":
		return false, ErrNotFound
	case string(Completed), string(Failed), string(Canceled):
		return false, fmt.Errorf("%w: request is %s", ErrConflict, res)
	}
	return false, errReply("cancel", res)
}

// register lists tenant t in rediskeys.Tenants, once per process: the sweeper and
// an admin's lists find its indexes there.
func (s *Store) register(ctx context.Context, t string) error {
	if t = tenant.Of(t); t == tenant.Default {
		return nil
	}
	if _, ok := s.registered.Load(t); ok {
		return nil
	}
	if err := s.rdb.SAdd(ctx, rediskeys.Tenants, t).Err(); err != nil {
		return wrap(err)
	}
	s.registered.Store(t, true)
	return nil
}

// Tenants are the default tenant and every tenant that stored a record,
// sorted.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	names, err := s.rdb.SMembers(ctx, rediskeys.Tenants).Result()
	if err != nil {
		return nil, wrap(err)
	}
	names = append(names, tenant.Default)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// tenantsIn are the tenants of scope whose indexes a listing goes over.
func (s *Store) tenantsIn(ctx context.Context, scope tenant.Scope) ([]string, error) {
	if t, ok := scope.One(); ok {
		return []string{t}, nil
	}
	if !scope.IsAll() {
		return nil, nil
	}
	return s.Tenants(ctx)
}
