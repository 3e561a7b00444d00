package record

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// Redrive refusals; both wrap ErrConflict.
var (
	ErrNotFailed    = fmt.Errorf("%w: only a failed request can be redriven", ErrConflict)
	ErrRedriveLimit = fmt.Errorf("%w: redrive limit reached", ErrConflict)
	// ErrRedriveExpunged: the request's payload was expunged, so there
	// is nothing left to send.
	ErrRedriveExpunged = fmt.Errorf("%w: the request's payload was expunged; it cannot be redriven", ErrConflict)
	// ErrKeyReused: the redrive's Idempotency-Key was used for another request.
	ErrKeyReused = fmt.Errorf("%w: Idempotency-Key was already used to redrive another request", ErrConflict)
)

// RedriveInput is who redrives, why, and under which limit.
type RedriveInput struct {
	// Scope is whose requests the caller may redrive: another tenant's
	// request is ErrNotFound.
	Scope   tenant.Scope
	Actor   string
	Reason  string
	Limit   int
	IdemKey string // optional: a repeated call with it redrives once
	Now     time.Time
	// FromDashboard marks a run started from asynqmon (for the stats).
	FromDashboard bool
}

// RedriveResult is what Redrive did.
type RedriveResult struct {
	N        int  // the redrive's number
	Replayed bool // an earlier call with the same Idempotency-Key did it
}

// redriveScript: scripts/redrive.lua.
var redriveScript = script("redrive")

// Redrive puts failed request id back to pending with a fresh retry budget
// and an audit entry. It returns ErrNotFound, ErrNotFailed, ErrRedriveLimit
// ErrRedriveExpunged or ErrKeyReused.
func (s *Store) Redrive(ctx context.Context, id string, in RedriveInput) (*RedriveResult, error) {
	flag := "0"
	if in.IdemKey != "" {
		flag = "1"
	}
	source := "api"
	if in.FromDashboard {
		source = "dashboard"
	}
	t, err := s.tenantOf(ctx, in.Scope, id)
	if err != nil {
		return nil, err
	}
	k := s.k(id)
	tk := k.of(t)
	keys := []string{k.req(id), k.attempts(id), k.redrives(id), tk.index(Pending), tk.index(Failed), tk.redriveIdem(in.IdemKey), k.stats(), k.spec(id), k.result(id),
		tk.finished()}
	res, err := redriveScript.Run(ctx, s.rdb, keys, id, in.Now.UnixMilli(), in.Limit, in.Actor, in.Reason,
		IdempotencyWindow.Milliseconds(), flag, source, tk.failClassPrefix(), tk.failCodePrefix()).StringSlice()
	if err != nil {
		return nil, wrap(err)
	}
	if len(res) < 1 || (res[0] != "missing" && res[0] != "expunged" && len(res) < 2) {
		return nil, errReply("redrive", res)
	}
	switch res[0] {
	case "replay":
		if res[1] != id {
			return nil, ErrKeyReused
		}
		return &RedriveResult{Replayed: true}, nil
	case "missing":
		return nil, ErrNotFound
	case "expunged":
		return nil, ErrRedriveExpunged
	case "notfailed":
		return nil, fmt.Errorf("%w (it is %s)", ErrNotFailed, res[1])
	case "limit":
		return nil, fmt.Errorf("%w (redriven %s times)", ErrRedriveLimit, res[1])
	case "ok":
		n, err := replyInt("redrive", res[1])
		if err != nil {
			return nil, err
		}
		return &RedriveResult{N: int(n)}, nil
	}
	return nil, errReply("redrive", res)
}

// DLQFilter selects failed requests.
type DLQFilter struct {
	FailureClass string
	// Host is a host name (any port) or host:port (that port; a URL
	// without a port has its scheme's), in lower case.
	Host string
}

// Match reports whether r is one f selects.
func (f DLQFilter) Match(r *Request) bool {
	if f.FailureClass != "" && r.FailureClass != f.FailureClass {
		return false
	}
	if f.Host == "" {
		return true
	}
	if host, port, err := net.SplitHostPort(f.Host); err == nil {
		return hostPortOf(r.URL) == net.JoinHostPort(host, port)
	}
	return r.Host == strings.Trim(f.Host, "[]")
}

// ListFailed returns the failed requests of scope matching f, newest
// first, after cursor. It reads retryd's own records, so nothing asynq
// trims from its archive is ever missing here. It examines no more
// entries than scan allows (nil: ScanBudget); a page cut short by it has
// a cursor.
func (s *Store) ListFailed(ctx context.Context, scope tenant.Scope, f DLQFilter, cursor string, limit int, scan *Scan) (*Page, error) {
	scan = scan.orNew()
	page := &Page{Requests: []*Request{}}
	if scan.Spent() {
		page.NextCursor = cursor
		return page, nil
	}
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil || len(tenants) == 0 {
		return page, err
	}
	loaded := 0
	var indexes []func(keys) string
	for _, t := range tenants {
		indexes = append(indexes, func(k keys) string { return k.of(t).index(Failed) })
	}
	// byHost: the failed-by-host index, whose entries of requests redriven
	// since are dropped when read. The failed status index is kept by the
	// scripts that change a status: an entry read here while its request
	// is not failed may be one a new failure just made, and goes only with
	// its record.
	byHost := f.Host != ""
	if byHost {
		// Only the requests that failed towards that host are read.
		host := f.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		indexes = indexes[:0]
		for _, t := range tenants {
			indexes = append(indexes, func(k keys) string { return k.of(t).failedHost(host) })
		}
		if err := s.backfillHostIndex(ctx); err != nil {
			return nil, err
		}
	}
	for {
		batch := int64(min(max(limit*2, 100), scan.Left()+1))
		ids, err := s.newest(ctx, cursor, batch, indexes...)
		if err != nil {
			return nil, wrap(err)
		}
		// Loaded a chunk at a time, so a page of large bodies stops at
		// ListBudget rather than holding every one of its ids at once.
		for start := 0; start < len(ids); start += listChunk {
			chunk := ids[start:min(start+listChunk, len(ids))]
			hs, specs, err := s.loadMany(ctx, chunk)
			if err != nil {
				return nil, err
			}
			for i, id := range chunk {
				scan.use(1)
				h := hs[i]
				loaded += storedSize(h, specs[i])
				if len(h) == 0 || (byHost && Status(h[fStatus]) != Failed) {
					// Expired, or redriven since: drop the entry (a request
					// that fails again is indexed again).
					for _, index := range indexes {
						s.rdb.ZRem(ctx, index(s.k(id)), id)
					}
				} else if r := decode(id, h, specs[i]); r.Status == Failed && f.Match(r) && scope.Has(r.Tenant) {
					page.Requests = append(page.Requests, r)
				}
				if len(page.Requests) == limit || scan.Spent() || loaded >= ListBudget {
					if start+i < len(ids)-1 || int64(len(ids)) == batch {
						page.NextCursor = id
					}
					return page, nil
				}
			}
		}
		if int64(len(ids)) < batch {
			return page, nil
		}
		cursor = ids[len(ids)-1]
	}
}

// backfillHostIndex indexes by host the failed requests recorded before
// the host index existed (an upgrade in place), once per partition: a
// marker key says it was done. Those requests are all the default
// tenant's: the host index is older than tenants.
func (s *Store) backfillHostIndex(ctx context.Context) error {
	if s.hostIndexReady.Load() {
		return nil
	}
	for _, k := range s.each() {
		tk := k.of(tenant.Default)
		done, err := s.rdb.Exists(ctx, k.hostIndexReady()).Result()
		if err != nil {
			return wrap(err)
		}
		if done == 1 {
			continue
		}
		cursor := "-"
		for {
			ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: tk.index(Failed), Start: cursor, Stop: "+", ByLex: true, Count: 1000}).Result()
			if err != nil {
				return wrap(err)
			}
			if len(ids) == 0 {
				break
			}
			_, specs, err := s.loadMany(ctx, ids)
			if err != nil {
				return err
			}
			pipe := s.rdb.Pipeline()
			for i, id := range ids {
				if host := hostOf(specFrom(specs[i]).URL); host != "" {
					pipe.ZAdd(ctx, tk.failedHost(host), redis.Z{Member: id})
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return wrap(err)
			}
			cursor = "(" + ids[len(ids)-1]
		}
		if err := s.rdb.Set(ctx, k.hostIndexReady(), "1", 0).Err(); err != nil {
			return wrap(err)
		}
	}
	s.hostIndexReady.Store(true)
	return nil
}

// CallbackAttempt records one delivery attempt of request id's callback.
// status is pending (will be retried), delivered or failed. A request
// deleted meanwhile (past its retention) is ErrNotFound, and nothing is
// written.
func (s *Store) CallbackAttempt(ctx context.Context, id, status string, code int, errText string, now time.Time) (attempts int, err error) {
	k := s.k(id)
	codeText := ""
	if code != 0 {
		codeText = strconv.Itoa(code)
	}
	n, err := callbackAttemptScript.Run(ctx, s.rdb, []string{k.req(id), k.stats(), k.callbackDue()},
		status, codeText, clip(errText), now.UnixMilli(), id).Int()
	if err != nil {
		return 0, wrap(err)
	}
	if n < 0 {
		return 0, ErrNotFound
	}
	return n, nil
}

var callbackAttemptScript = script("callback_attempt")

// DropCallback forgets that request id's callback is due: its outcome
// calls nothing back (a QStash message calls back on some outcomes only).
func (s *Store) DropCallback(ctx context.Context, id string) error {
	k := s.k(id)
	pipe := s.rdb.TxPipeline()
	pipe.HDel(ctx, k.req(id), fCbStatus)
	pipe.ZRem(ctx, k.callbackDue(), id)
	_, err := pipe.Exec(ctx)
	return wrap(err)
}
