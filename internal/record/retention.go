package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// Retention is how long a tenant's finished requests are kept: the whole
// record (Records), and its payload (Payload: body, headers, result and
// response bodies), which is erased as by Expunge this long after the
// request finished. Payload 0: the payload lives as long as the record.
type Retention struct {
	Records time.Duration
	Payload time.Duration
}

// Over is r with the fields that set leaves zero taken from r: a tenant's
// retention over the defaults.
func (r Retention) Over(set Retention) Retention {
	if set.Records > 0 {
		r.Records = set.Records
	}
	if set.Payload > 0 {
		r.Payload = set.Payload
	}
	return r
}

// ErrPayloadOutlivesRecord: a payload retention longer than the record's.
var ErrPayloadOutlivesRecord = errors.New("payload retention is longer than retention")

// Check refuses a payload retention longer than the record's: the
// payload would be kept longer than promised, then vanish with its record.
func (r Retention) Check() error {
	if r.Payload > r.Records {
		return fmt.Errorf("%w: payloadRetention %s outlives retention %s; shorten payloadRetention or lengthen retention",
			ErrPayloadOutlivesRecord, r.Payload, r.Records)
	}
	return nil
}

// The actors retryd records for what it does itself. A caller cannot
// claim one (CheckActor): an audit entry naming one must be retryd's.
const (
	// RetentionActor is the expungedBy of payloads erased by their
	// payload retention.
	RetentionActor = "retention"
	// DashboardActor is the actor of a redrive started by running a task
	// again from the asynqmon dashboard.
	DashboardActor = "dashboard"
	// QStashActor is the actor of redrives (dlq.retry) and cancels made
	// through the QStash API.
	QStashActor = "qstash"
)

// OwnActors are the actors retryd records for itself, in the order the
// API names them.
var OwnActors = []string{RetentionActor, DashboardActor, QStashActor}

// MaxActor bounds an actor's length.
const MaxActor = 200

// ErrOwnActor: a caller named one of OwnActors as its actor.
var ErrOwnActor = errors.New("is retryd's own actor")

// CheckActor refuses an actor a caller may not record: longer than
// MaxActor, or one of OwnActors. Every route that takes an actor from a
// caller checks it here, single and bulk alike.
func CheckActor(actor string) error {
	if len(actor) > MaxActor {
		return fmt.Errorf("actor must be at most %d characters", MaxActor)
	}
	if slices.Contains(OwnActors, actor) {
		return fmt.Errorf("actor %q %w, recorded for what retryd does by itself (%s): name who acts (such as \"dpo\")",
			actor, ErrOwnActor, strings.Join(OwnActors, ", "))
	}
	return nil
}

// RetentionRefresh is how often a process reads the tenants' retention
// again: an admin's change reaches every process within it. Nothing is
// read per request in between.
const RetentionRefresh = 5 * time.Second

// retentionView is the tenants' retention as last read from
// RetentionKey, and when.
type retentionView struct {
	at  time.Time
	set map[string]Retention
}

// retentionState is a Store's default retention and its view of the
// tenants'.
type retentionState struct {
	payload    time.Duration // PAYLOAD_RETENTION; records' is Store.retention
	view       atomic.Pointer[retentionView]
	refreshing atomic.Bool
	// dropped are the tenants whose payload-expiry indexes this process
	// dropped (or found in use) since it started.
	dropped sync.Map
}

// SetPayloadRetention sets the default payload retention (0: payloads live
// as long as their records).
func (s *Store) SetPayloadRetention(d time.Duration) { s.ret.payload = d }

// DefaultRetention is the retention of a tenant an admin set none for.
func (s *Store) DefaultRetention() Retention {
	return Retention{Records: s.retention, Payload: s.ret.payload}
}

// retentionOf is tenant t's retention as of now, from the view read within
// RetentionRefresh: one read per RetentionRefresh, whatever the number of
// requests. While one caller reads a stale view again, the others use it
// as it is; a first read that fails is an error (the defaults might keep a
// tenant's records shorter than its admin set).
func (s *Store) retentionOf(ctx context.Context, t string, now time.Time) (Retention, error) {
	v := s.ret.view.Load()
	if v == nil || now.Sub(v.at) > RetentionRefresh || v.at.After(now) {
		if v == nil || s.ret.refreshing.CompareAndSwap(false, true) {
			fresh, err := s.readRetention(ctx, now)
			if v != nil {
				s.ret.refreshing.Store(false)
			}
			switch {
			case err == nil:
				v = fresh
			case v == nil:
				return Retention{}, err
			}
		}
	}
	return s.DefaultRetention().Over(v.set[tenant.Of(t)]), nil
}

// readRetention reads every tenant's retention and keeps it as the view.
func (s *Store) readRetention(ctx context.Context, now time.Time) (*retentionView, error) {
	all, err := s.rdb.HGetAll(ctx, RetentionKey).Result()
	if err != nil {
		return nil, wrap(err)
	}
	v := &retentionView{at: now, set: make(map[string]Retention, len(all))}
	for t, val := range all {
		v.set[t] = parseRetention(val)
	}
	s.ret.view.Store(v)
	return v, nil
}

// Retentions are every tenant's retention (of Tenants), read now.
func (s *Store) Retentions(ctx context.Context, now time.Time) (map[string]Retention, error) {
	tenants, err := s.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	v, err := s.readRetention(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Retention, len(tenants))
	for _, t := range tenants {
		out[t] = s.DefaultRetention().Over(v.set[t])
	}
	return out, nil
}

// TenantRetention is what an admin set for tenant t (a zero field: the
// default's), read now.
func (s *Store) TenantRetention(ctx context.Context, t string) (Retention, error) {
	val, err := s.rdb.HGet(ctx, RetentionKey, tenant.Of(t)).Result()
	if errors.Is(err, redis.Nil) {
		return Retention{}, nil
	}
	if err != nil {
		return Retention{}, wrap(err)
	}
	return parseRetention(val), nil
}

// SetTenantRetention sets tenant t's retention (a zero field: the
// default's; both zero: the defaults again). It applies to the requests
// that finish from then on, on every process within RetentionRefresh; a
// payload retention also to those already finished that were indexed for
// one. It returns ErrPayloadOutlivesRecord when the tenant's payload
// retention would outlive its records.
func (s *Store) SetTenantRetention(ctx context.Context, t string, set Retention, now time.Time) error {
	if err := s.DefaultRetention().Over(set).Check(); err != nil {
		return err
	}
	t = tenant.Of(t)
	var err error
	if set == (Retention{}) {
		err = s.rdb.HDel(ctx, RetentionKey, t).Err()
	} else {
		err = s.rdb.HSet(ctx, RetentionKey, t, formatRetention(set)).Err()
	}
	if err != nil {
		return wrap(err)
	}
	if err := s.register(ctx, t); err != nil {
		return err
	}
	if s.DefaultRetention().Over(set).Payload <= 0 {
		if err := s.dropPayloadIndexes(ctx, t); err != nil {
			return err
		}
	}
	_, err = s.readRetention(ctx, now)
	return err
}

// dropPayloadIndexes drops tenant t's payload-expiry index in every
// partition: its payloads live as long as their records now.
func (s *Store) dropPayloadIndexes(ctx context.Context, t string) error {
	for _, k := range s.each() {
		if err := s.rdb.Unlink(ctx, k.of(t).payloadDue()).Err(); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// formatRetention is a RetentionKey value: "<records ms> <payload ms>".
func formatRetention(r Retention) string {
	return strconv.FormatInt(r.Records.Milliseconds(), 10) + " " + strconv.FormatInt(r.Payload.Milliseconds(), 10)
}

// parseRetention reads a RetentionKey value; what it cannot read is the
// default's (zero).
func parseRetention(v string) Retention {
	rec, pay, _ := strings.Cut(v, " ")
	ms := func(s string) time.Duration {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	return Retention{Records: ms(rec), Payload: ms(pay)}
}

// ExpirePayloads erases the payloads whose payload retention ended by now,
// as Expunge does (expungedBy RetentionActor), up to n per tenant and
// partition; it returns how many it erased, and more when a tenant and
// partition had n due (call it again: more may be due). The requests that finished
// while their tenant had a payload retention are indexed by finish time
// (the finish and cancel scripts add them), so each sweep reads only the
// entries due, oldest first, and each entry is read once: the script
// removes it, erasing or not (a request redriven since is indexed again
// when it finishes). A tenant without a payload retention costs no
// command.
func (s *Store) ExpirePayloads(ctx context.Context, now time.Time, n int) (erased int, more bool, err error) {
	rets, err := s.Retentions(ctx, now)
	if err != nil {
		return 0, false, err
	}
	for t, r := range rets {
		// An index left by a payload retention since turned off (by a
		// restart without PAYLOAD_RETENTION) is dropped once per process;
		// SetTenantRetention drops it when an admin turns one off.
		if _, done := s.ret.dropped.LoadOrStore(t, true); r.Payload <= 0 && !done {
			if err := s.dropPayloadIndexes(ctx, t); err != nil {
				return 0, false, err
			}
		}
		if r.Payload > 0 {
			s.ret.dropped.Delete(t)
		}
	}
	for _, k := range s.each() {
		for t, r := range rets {
			due := k.of(t).payloadDue()
			if r.Payload <= 0 {
				continue
			}
			ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: due, Start: "-inf", Stop: strconv.FormatInt(now.Add(-r.Payload).UnixMilli(), 10),
				ByScore: true, Count: int64(n)}).Result()
			if err != nil {
				return erased, more, wrap(err)
			}
			more = more || len(ids) == n
			for _, id := range ids {
				res, err := s.expunge(ctx, k, due, id, RetentionActor, now)
				if err != nil {
					return erased, more, err
				}
				if res[0] == "ok" {
					erased++
				}
			}
		}
	}
	return erased, more, nil
}
