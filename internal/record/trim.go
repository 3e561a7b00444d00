package record

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/ids"
)

// The index trim's pace.
const (
	// TrimRevisit is how often a walk of an index starts again from its
	// oldest entry, to look again at the records it found still there.
	TrimRevisit = time.Hour
	// trimSlack keeps the trim a minute behind the retention: a record due
	// to expire at the cutoff may still be there, by the clocks of the
	// worker that finished it and of Redis.
	trimSlack = time.Minute
)

// TrimIndexes drops the index entries of requests whose record has expired
// after their tenant's retention, reading up to n entries per index walked
// (per tenant and partition). It returns how many entries it removed, and
// more when a read came back full (call again).
//
// A record expires only once finished, a retention after it finished, and
// its finished entry names every entry it has: so the trim reads the
// finished entries older than a retention, oldest first. A record still
// there among them finished under a longer retention than its tenant's now
// (it was shortened since): the walk goes past it, and looks again once
// TrimRevisit has passed. A second walk, through the list's and the
// terminal statuses' indexes in id order, drops the entries of the
// requests that expired with no finished entry (finished by an earlier
// version); it passes over the unfinished requests of a backlog, and looks
// at them again only when a walk starts over.
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
			n1, full1, err := s.trimFinished(ctx, k, tk, c, now, cutoff.UnixMilli(), n)
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

// trimFinished removes the index entries of the requests that finished
// before cutoff (ms) and whose record has expired since: the finished
// entry names every one (finishedMember), so each goes exactly, with no
// scan of the host, label or failure indexes. An entry whose record is
// still there but finished later (redriven and finished again) is stale,
// and only it goes; one whose record finished when it says is passed.
func (s *Store) trimFinished(ctx context.Context, k keys, tk tkeys, c *trimCursors, now time.Time, cutoff int64, n int) (removed int, full bool, err error) {
	key := tk.finished()
	start, after, seen := "-inf", 0.0, ""
	if cur, ok := c.at(key); ok {
		// Inclusive, then what it passed at that score left out: entries
		// of one millisecond must not be skipped.
		after, seen = cur.score, cur.member
		start = strconv.FormatFloat(after, 'f', -1, 64)
	}
	read, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: start,
		Stop: "(" + strconv.FormatInt(cutoff, 10), ByScore: true, Count: int64(n)}).Result()
	if err != nil {
		return 0, false, wrap(err)
	}
	members := read[:0:0]
	for _, m := range read {
		if member, _ := m.Member.(string); seen == "" || m.Score != after || member > seen {
			members = append(members, m)
		}
	}
	full = len(read) == n
	restart := false
	switch {
	case !full:
		restart = c.reached(key, now)
	case len(members) == 0:
		// More than n passed records finished in one millisecond: go on
		// after it.
		c.pass(key, after+1, "", now)
	}
	full = full || restart
	if len(members) == 0 {
		return 0, full, nil
	}
	pipe := s.rdb.Pipeline()
	recs := make([]*redis.SliceCmd, len(members))
	for i, m := range members {
		member, _ := m.Member.(string)
		recs[i] = pipe.HMGet(ctx, k.req(parseFinishedMember(member).id), fStatus, fCompletedAt)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, false, wrap(err)
	}
	pipe = s.rdb.Pipeline()
	passed := false
	for i, m := range members {
		member, _ := m.Member.(string)
		v := recs[i].Val()
		at, _ := v[1].(string)
		switch {
		case v[0] == nil: // expired: every entry goes
			e := parseFinishedMember(member)
			dropListed(ctx, pipe, tk, e.id, terminal) // it expired in one of them
			dropEntries(ctx, pipe, tk, e, member)
		case at != strconv.FormatInt(int64(m.Score), 10): // stale: only this entry goes
			pipe.ZRem(ctx, key, member)
		default:
			passed = true
		}
	}
	if passed && !restart {
		last := members[len(members)-1]
		member, _ := last.Member.(string)
		c.pass(key, last.Score, member, now)
	}
	removed, err = removedBy(ctx, pipe)
	return removed, full, err
}

// trimListed removes the list's and the terminal statuses' entries, made
// before the id before, whose record is gone.
func (s *Store) trimListed(ctx context.Context, k keys, tk tkeys, c *trimCursors, now time.Time, before string, n int) (removed int, more bool, err error) {
	for _, key := range []string{tk.all(), tk.index(Completed), tk.index(Failed), tk.index(Canceled)} {
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

// terminal are the statuses a record can expire in.
var terminal = []Status{Completed, Failed, Canceled}

// dropListed queues the removal of id from the list's index of tenant tk
// and from its indexes of statuses (those id may be in).
func dropListed(ctx context.Context, pipe redis.Pipeliner, tk tkeys, id string, statuses []Status) {
	pipe.ZRem(ctx, tk.all(), id)
	for _, st := range statuses {
		pipe.ZRem(ctx, tk.index(st), id)
	}
}

// removedBy sends pipe's removals and counts the entries they removed.
func removedBy(ctx context.Context, pipe redis.Pipeliner) (int, error) {
	if pipe.Len() == 0 {
		return 0, nil
	}
	cmds, err := pipe.Exec(ctx)
	removed := 0
	for _, c := range cmds {
		if z, ok := c.(*redis.IntCmd); ok {
			removed += int(z.Val())
		}
	}
	return removed, wrap(err)
}

// trimCursors are where each walk of the trim goes on, kept in Redis
// (TrimCursorKey) so that it goes on whichever worker sweeps. Read from
// the oldest entry each time, records still there would hold a walk up
// until they expire (and the entries behind them, expired, would stay): a
// full read that found such records moves the walk's cursor past it. Once
// the walk has read up to the cutoff and TrimRevisit has passed since it
// began, it starts again from the oldest.
type trimCursors struct {
	at0     map[string]string // as read
	changed map[string]string // to write; "" to delete
}

// trimCursor is where a walk goes on: after score and member (a finished
// index) or member (an id-ordered one); started is when the walk began
// (ms), and ended says it has read up to the cutoff (an id-ordered walk,
// which then waits for the next).
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

// reached notes that key's walk read up to the cutoff: once TrimRevisit
// has passed since it began, the next read starts from the oldest, and it
// says so.
func (c *trimCursors) reached(key string, now time.Time) bool {
	if cur, ok := c.at(key); ok && now.UnixMilli()-cur.started >= TrimRevisit.Milliseconds() {
		c.changed[key] = ""
		return true
	}
	return false
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
