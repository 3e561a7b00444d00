package record

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Unfinished is what the sweeper needs of a pending or retrying request.
type Unfinished struct {
	ID            string
	Status        Status
	NextAttemptAt time.Time
	UpdatedAt     time.Time
	TimeoutMs     int64
	MaxRetries    int
}

// UnfinishedIDs returns up to n ids of tenant t's index of one status in
// partition part, in id order after cursor, and the cursor of the next
// batch ("" when there is no more). Their records are read only for the
// few the sweeper must repair (UnfinishedRecords): looking at a waiting
// request costs one command of its own, its task's state.
func (s *Store) UnfinishedIDs(ctx context.Context, part int, t string, status Status, cursor string, n int) ([]string, string, error) {
	k := keysOf(s.parts.Tag(part))
	start := "-"
	if cursor != "" {
		start = "(" + cursor
	}
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: k.of(t).index(status), Start: start, Stop: "+", ByLex: true, Count: int64(n) + 1}).Result()
	if err != nil || len(ids) == 0 {
		return nil, "", wrap(err)
	}
	next := ""
	if len(ids) > n {
		ids = ids[:n]
		next = ids[n-1]
	}
	return ids, next, nil
}

// UnfinishedRecords reads the records of ids (of partition part) that
// are still pending or retrying; index entries whose record is gone or
// finished are skipped.
func (s *Store) UnfinishedRecords(ctx context.Context, part int, ids []string) ([]Unfinished, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	k := keysOf(s.parts.Tag(part))
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, k.req(id), fStatus, fNextAttemptAt, fUpdatedAt, fTimeout, fMaxRetries)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap(err)
	}
	out := make([]Unfinished, 0, len(ids))
	for i, id := range ids {
		v := cmds[i].Val()
		st, _ := v[0].(string)
		if st != string(Pending) && st != string(Retrying) {
			continue
		}
		next, _ := v[1].(string)
		upd, _ := v[2].(string)
		timeout, _ := v[3].(string)
		maxRetries, _ := v[4].(string)
		out = append(out, Unfinished{ID: id, Status: Status(st), NextAttemptAt: fromMs(next), UpdatedAt: fromMs(upd), TimeoutMs: int64(atoi(timeout)),
			MaxRetries: atoi(maxRetries)})
	}
	return out, nil
}

// UnfinishedCount is how many requests of tenant t of status partition
// part indexes.
func (s *Store) UnfinishedCount(ctx context.Context, part int, t string, status Status) (int64, error) {
	n, err := s.rdb.ZCard(ctx, keysOf(s.parts.Tag(part)).of(t).index(status)).Result()
	return n, wrap(err)
}

// CallbacksDue returns up to n ids per partition whose callback is due and
// not finished, dropping index entries of records that expired.
func (s *Store) CallbacksDue(ctx context.Context, n int) ([]string, error) {
	var due []string
	for _, k := range s.each() {
		ids, err := s.rdb.ZRange(ctx, k.callbackDue(), 0, int64(n)-1).Result()
		if err != nil {
			return nil, wrap(err)
		}
		if len(ids) == 0 {
			continue
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HGet(ctx, k.req(id), fCbStatus)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, wrap(err)
		}
		var gone []any
		for i, id := range ids {
			if cmds[i].Val() == "pending" {
				due = append(due, id)
			} else {
				gone = append(gone, id)
			}
		}
		if len(gone) > 0 {
			s.rdb.ZRem(ctx, k.callbackDue(), gone...)
		}
	}
	return due, nil
}
