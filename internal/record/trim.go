package record

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// TrimRevisit is how often the trim of a finished index starts again from
// its oldest entry, to look again at the records it found still there (see
// trimCursors).
const TrimRevisit = time.Hour

// TrimIndexes drops the index entries of requests whose record has expired
// after their tenant's retention, up to n entries read per tenant and
// partition. A record expires only once finished, a retention after it
// finished, and its finished entry names every entry it has: so the trim
// reads the finished entries older than a retention, in the order they
// expire, and never looks at an unfinished request, however old. It
// returns how many entries it removed, and more when a read came back full
// (call again).
func (s *Store) TrimIndexes(ctx context.Context, now time.Time, n int) (removed int, more bool, err error) {
	rets, err := s.Retentions(ctx, now)
	if err != nil {
		return 0, false, err
	}
	for _, k := range s.each() {
		for t, r := range rets {
			n1, full, err := s.trimFinished(ctx, k, k.of(t), now, now.Add(-r.Records).UnixMilli(), n)
			removed += n1
			more = more || full
			if err != nil {
				return removed, more, err
			}
		}
	}
	return removed, more, nil
}

// trimFinished removes the index entries of the requests that finished
// before cutoff (ms) and whose record has expired since: the finished
// entry names every one (finishedMember), so each goes exactly, with no
// scan of the host, label or failure indexes. An entry whose record is
// still there but finished later (redriven and finished again) is stale,
// and only it goes. A record still there that finished when it did was
// given a longer retention than its tenant's now: it is passed over.
func (s *Store) trimFinished(ctx context.Context, k keys, tk tkeys, now time.Time, cutoff int64, n int) (removed int, full bool, err error) {
	key := tk.finished()
	members, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: s.trims.from(key),
		Stop: "(" + strconv.FormatInt(cutoff, 10), ByScore: true, Count: int64(n)}).Result()
	if err != nil {
		return 0, false, wrap(err)
	}
	full = len(members) == n
	if !full && s.trims.reached(key, now) {
		full = true // read again, from the oldest
	}
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
	queued, passed := 0, false
	for i, m := range members {
		member, _ := m.Member.(string)
		v := recs[i].Val()
		at, _ := v[1].(string)
		switch {
		case v[0] == nil: // expired: every entry goes
			e := parseFinishedMember(member)
			pipe.ZRem(ctx, tk.all(), e.id)
			// It expired in one of these; which one, only the record said.
			for _, st := range []Status{Completed, Failed, Canceled} {
				pipe.ZRem(ctx, tk.index(st), e.id)
			}
			dropEntries(ctx, pipe, tk, e, member)
			queued++
		case at != strconv.FormatInt(int64(m.Score), 10): // stale: only this entry goes
			pipe.ZRem(ctx, key, member)
			queued++
		default:
			passed = true
		}
	}
	if passed && full {
		s.trims.pass(key, members[len(members)-1].Score, now)
	}
	if queued == 0 {
		return 0, full, nil
	}
	cmds, err := pipe.Exec(ctx)
	for _, c := range cmds {
		if z, ok := c.(*redis.IntCmd); ok {
			removed += int(z.Val())
		}
	}
	return removed, full, wrap(err)
}

// trimCursors keep, per finished index, where its trim goes on. Read from
// the oldest entry each time, a batch of records still there (a tenant
// whose retention was shortened after they finished) would hold the trim
// up until they expire, and the entries behind them, expired under the
// shorter retention, would stay. So a full batch with such records moves
// the cursor past it; the trim starts from the oldest again once it
// reached the cutoff and TrimRevisit has passed since it last did, to
// find those records once they have expired.
type trimCursors struct {
	mu sync.Mutex
	at map[string]trimCursor
}

type trimCursor struct {
	after   float64   // the score passed; entries after it are read
	started time.Time // when this pass began
}

// from is the start of key's next read: "-inf", or after the score passed.
func (c *trimCursors) from(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.at[key]
	if !ok {
		return "-inf"
	}
	return "(" + strconv.FormatFloat(cur.after, 'f', -1, 64)
}

// pass moves key's cursor past score; a new pass begins at now.
func (c *trimCursors) pass(key string, score float64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]trimCursor{}
	}
	cur, ok := c.at[key]
	if !ok {
		cur.started = now
	}
	cur.after = score
	c.at[key] = cur
}

// reached notes that key's trim read up to the cutoff: once TrimRevisit
// has passed since its pass began, the next read starts from the oldest,
// and it says so.
func (c *trimCursors) reached(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.at[key]; ok && now.Sub(cur.started) >= TrimRevisit {
		delete(c.at, key)
		return true
	}
	return false
}
