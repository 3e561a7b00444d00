package record

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/ids"
)

// The trim's pace.
const (
	// TrimRevisit is how often a walk of an id-ordered index starts again
	// from its oldest entry, to look again at the requests it found still
	// there.
	TrimRevisit = time.Hour
	// trimSlack keeps the trim a minute behind the retention: a request
	// finished by a worker whose clock runs behind the sweeper's is not
	// deleted early, and one an earlier version gave a TTL expires on its
	// own first.
	trimSlack = time.Minute
)

// TrimIndexes applies each tenant's retention: it deletes the requests
// that finished over a retention (and trimSlack) ago, every key and index
// entry of theirs, reading up to n entries per index walked (per tenant
// and partition). It returns how many index entries it removed, and more
// when a read came back full (call again).
//
// A request's keys carry no TTL (those finished by an earlier version do,
// and expire on their own): it is the sweeper that ends them, so a
// finished request outlives its retention by up to trimSlack and the
// sweep's pace, and for as long as no worker sweeps; a tenant's retention,
// read now, applies to the requests already finished too. Its finished
// entry names every entry it has: so the trim reads the finished entries
// older than the retention, oldest first, and ends each request still
// finished at the time its entry says (one redriven since has lost that
// entry, or left a stale one that goes alone). A second walk, through the
// terminal statuses' indexes and the all-requests index of earlier
// versions in id order, drops the entries of the requests that expired
// with no finished entry (finished by an earlier version); it passes over
// the requests still there, and looks at them again only when a walk
// starts over, TrimRevisit after the last began.
func (s *Store) TrimIndexes(ctx context.Context, now time.Time, n int) (removed int, more bool, err error) {
	rets, err := s.Retentions(ctx, now)
	if err != nil {
		return 0, false, err
	}
	c, err := s.trimCursors(ctx)
	if err != nil {
		return 0, false, err
	}
	for _, k := range s.each() {
		for t, r := range rets {
			tk := k.of(t)
			cutoff := now.Add(-r.Records - trimSlack)
			n1, full1, err := s.trimFinished(ctx, k, tk, c, cutoff.UnixMilli(), n)
			removed += n1
			if err != nil {
				return removed, more, errors.Join(err, c.save(ctx, s.rdb))
			}
			n2, full2, err := s.trimListed(ctx, k, tk, c, now, "("+ids.Prefix(cutoff), n)
			removed += n2
			more = more || full1 || full2
			if err != nil {
				return removed, more, errors.Join(err, c.save(ctx, s.rdb))
			}
		}
	}
	return removed, more, c.save(ctx, s.rdb)
}

// trimScript: scripts/trim.lua.
var trimScript = script("trim")

// trimFinished ends the requests of tenant tk that finished before cutoff
// (ms), oldest first, up to n of them: the finished entry names every
// index entry of its request (finishedMember), so each goes exactly, with
// no scan of the host, label or failure indexes, and one script deletes
// the batch's requests still finished when their entries say, drops the
// entries of those already gone (expired by a TTL an earlier version
// set), and drops the stale entries of those redriven since. Every entry
// read goes: the walk needs no cursor, and always starts at the oldest.
func (s *Store) trimFinished(ctx context.Context, k keys, tk tkeys, c *trimCursors, cutoff int64, n int) (removed int, full bool, err error) {
	key := tk.finished()
	c.changed[key] = "" // the cursor of an earlier version's walk, if any
	read, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: "-inf",
		Stop: "(" + strconv.FormatInt(cutoff, 10), ByScore: true, Count: int64(n)}).Result()
	if err != nil || len(read) == 0 {
		return 0, false, wrap(err)
	}
	// legacyAll: earlier versions' all-requests index, no longer written or listed, kept drained (one ZREM a batch).
	keys := []string{key, tk.legacyAll(), tk.index(Completed), tk.index(Failed), tk.index(Canceled), tk.payloadDue()}
	args := make([]any, 0, 4*len(read))
	for _, m := range read {
		member, _ := m.Member.(string)
		e := parseFinishedMember(member)
		idx := e.keys(tk)
		keys = append(keys, k.req(e.id), k.attempts(e.id), k.redrives(e.id), k.spec(e.id), k.result(e.id), tk.failedHost(e.host))
		keys = append(keys, idx...)
		args = append(args, member, e.id, strconv.FormatInt(int64(m.Score), 10), len(idx))
	}
	res, err := trimScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return 0, false, wrap(err)
	}
	if len(res) != 2 {
		return 0, false, fmt.Errorf("trim script answered %v", res)
	}
	return int(res[0]), len(read) == n, nil
}

// trimListed removes the terminal statuses' entries, and those of the
// all-requests index of earlier versions, made before the id before, whose
// record is gone (expired by a TTL an earlier version set).
func (s *Store) trimListed(ctx context.Context, k keys, tk tkeys, c *trimCursors, now time.Time, before string, n int) (removed int, more bool, err error) {
	for _, key := range []string{tk.legacyAll(), tk.index(Completed), tk.index(Failed), tk.index(Canceled)} {
		start := "-"
		if cur, ok := c.at(key); ok {
			if cur.ended {
				// Walked to the end: the next walk begins TrimRevisit
				// after this one did.
				if now.UnixMilli()-cur.started < TrimRevisit.Milliseconds() {
					continue
				}
				c.changed[key] = ""
			} else {
				start = "(" + cur.member
			}
		}
		got, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: key, Start: start, Stop: before, ByLex: true, Count: int64(n)}).Result()
		if err != nil {
			return removed, more, wrap(err)
		}
		if len(got) < n {
			c.end(key, now)
		} else {
			c.pass(key, 0, got[len(got)-1], now)
			more = true
		}
		if len(got) == 0 {
			continue
		}
		pipe := s.rdb.Pipeline()
		exists := make([]*redis.IntCmd, len(got))
		for i, id := range got {
			exists[i] = pipe.Exists(ctx, k.req(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return removed, more, wrap(err)
		}
		var gone []any
		for i, id := range got {
			if exists[i].Val() == 0 {
				gone = append(gone, id)
			}
		}
		if len(gone) > 0 {
			z, err := s.rdb.ZRem(ctx, key, gone...).Result()
			removed += int(z)
			if err != nil {
				return removed, more, wrap(err)
			}
		}
	}
	return removed, more, nil
}

// dropListed queues the removal of id from tenant tk's indexes of
// statuses (those id may be in).
func dropListed(ctx context.Context, pipe redis.Pipeliner, tk tkeys, id string, statuses []Status) {
	for _, st := range statuses {
		pipe.ZRem(ctx, tk.index(st), id)
	}
}

// trimCursors are where each id-ordered walk of the trim goes on, kept in
// Redis (TrimCursorKey) so that it goes on whichever worker sweeps. Read
// from the oldest entry each time, unfinished requests would hold a walk
// up (and the entries behind them, expired, would stay): a full read moves
// the walk's cursor past it. Once the walk has read up to the cutoff and
// TrimRevisit has passed since it began, it starts again from the oldest.
// The finished index's walk has none: every entry it reads goes.
type trimCursors struct {
	at0     map[string]string // as read
	changed map[string]string // to write; "" to delete
}

// trimCursor is where a walk goes on: after member (score: that of a
// finished index's walk of an earlier version); started is when the walk
// began (ms), and ended says it has read up to the cutoff (it then waits
// for the next).
type trimCursor struct {
	score   float64
	member  string
	started int64
	ended   bool
}

func (s *Store) trimCursors(ctx context.Context) (*trimCursors, error) {
	at, err := s.rdb.HGetAll(ctx, TrimCursorKey).Result()
	if err != nil {
		return nil, wrap(err)
	}
	return &trimCursors{at0: at, changed: map[string]string{}}, nil
}

// at is key's cursor, if its walk has one.
func (c *trimCursors) at(key string) (trimCursor, bool) {
	v, ok := c.changed[key]
	if !ok {
		v, ok = c.at0[key]
	}
	if !ok || v == "" {
		return trimCursor{}, false
	}
	// "<started ms> <ended 0|1> <score> <member>": the member may hold
	// anything.
	p := strings.SplitN(v, " ", 4)
	if len(p) != 4 {
		return trimCursor{}, false // unreadable: the walk starts over
	}
	started, err1 := strconv.ParseInt(p[0], 10, 64)
	score, err2 := strconv.ParseFloat(p[2], 64)
	if err1 != nil || err2 != nil {
		return trimCursor{}, false
	}
	return trimCursor{score: score, member: p[3], started: started, ended: p[1] == "1"}, true
}

// set writes key's cursor; a walk with none began at now.
func (c *trimCursors) set(key string, cur trimCursor, now time.Time) {
	cur.started = now.UnixMilli()
	if old, ok := c.at(key); ok {
		cur.started = old.started
	}
	ended := "0"
	if cur.ended {
		ended = "1"
	}
	c.changed[key] = strconv.FormatInt(cur.started, 10) + " " + ended + " " + strconv.FormatFloat(cur.score, 'f', -1, 64) + " " + cur.member
}

// pass moves key's cursor past score and member.
func (c *trimCursors) pass(key string, score float64, member string, now time.Time) {
	c.set(key, trimCursor{score: score, member: member}, now)
}

// end notes that key's walk has read up to the cutoff.
func (c *trimCursors) end(key string, now time.Time) {
	c.set(key, trimCursor{ended: true}, now)
}

// save writes what changed.
func (c *trimCursors) save(ctx context.Context, rdb redis.UniversalClient) error {
	var set []any
	var del []string
	for k, v := range c.changed {
		if v == "" {
			if _, ok := c.at0[k]; ok {
				del = append(del, k)
			}
		} else if c.at0[k] != v {
			set = append(set, k, v)
		}
	}
	pipe := rdb.Pipeline()
	if len(set) > 0 {
		pipe.HSet(ctx, TrimCursorKey, set...)
	}
	if len(del) > 0 {
		pipe.HDel(ctx, TrimCursorKey, del...)
	}
	if pipe.Len() == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return wrap(err)
}
