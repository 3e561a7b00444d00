package workflow

// A run's history, for the workflow logs: each tenant's runs are indexed
// by their start, and an ended run keeps its URL, times, state, result
// and log for a retention.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/luascript"
	"github.com/retryd/retryd/internal/tenant"
)

var endScript = luascript.Load(scripts, "", "end")

// How a run ended.
const (
	EndedSuccess  = "success"
	EndedCanceled = "canceled"
)

// endedKey is what is kept of run of tenant t once it ends.
func endedKey(t, run string) string { return runTag(t, run) + "ended" }

// indexKey is tenant t's runs, scored by their start (ms).
func indexKey(t string) string {
	sum := sha1.Sum([]byte(tenant.Of(t)))
	return "{retryd-wfidx:" + hex.EncodeToString(sum[:10]) + "}:runs"
}

// index lists run, started at now, among t's runs (only when it is not
// listed yet, with onlyNew), and drops those started more than a
// retention ago (their keys have expired).
func (s *Store) index(ctx context.Context, t, run string, now time.Time, onlyNew bool) error {
	k := indexKey(t)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		z := redis.Z{Score: float64(now.UnixMilli()), Member: run}
		if onlyNew {
			p.ZAddNX(ctx, k, z)
		} else {
			p.ZAdd(ctx, k, z)
		}
		p.ZRemRangeByScore(ctx, k, "-inf", "("+strconv.FormatInt(now.Add(-s.Keep).UnixMilli(), 10))
		return nil
	})
	if err != nil {
		return fmt.Errorf("index workflow run %s: %w", run, err)
	}
	return nil
}

// Ending is how a run ends.
type Ending struct {
	// State is EndedSuccess or EndedCanceled.
	State string
	// Result is what its last step returned (nil: nothing).
	Result []byte
	At     time.Time
}

// End ends run: it stops running, and the logs keep what it was for a
// retention. It returns the ids of the messages published to it, whose
// pending ones the caller cancels when the run is canceled. ok is false
// when the run was not running.
func (s *Store) End(ctx context.Context, t, run string, e Ending) (ids []string, ok bool, err error) {
	h, msgs, log := runKeys(t, run)
	res, err := endScript.Run(ctx, s.rdb, []string{h, msgs, log, endedKey(t, run)}, e.State, e.At.UnixMilli(), e.Result,
		s.Keep.Milliseconds()).StringSlice()
	if err != nil {
		return nil, false, fmt.Errorf("end workflow run %s: %w", run, err)
	}
	switch {
	case len(res) == 1 && res[0] == "missing":
		return nil, false, nil
	case len(res) >= 1 && res[0] == "ok":
		return res[1:], true, nil
	}
	return nil, false, fmt.Errorf("end workflow run %s: unexpected reply %q", run, res)
}

// History is what the logs show of a run.
type History struct {
	ID, URL   string
	CreatedAt time.Time
	// State is "" while the run runs, else how it ended.
	State       string
	CompletedAt time.Time
	Result      []byte
	Invoker     []byte
	// Config is what its steps inherit of its start (a restart starts it
	// so again).
	Config []byte
	// Entries are its log: the messages delivered to it, in order.
	Entries []Entry
	// Messages are the ids of its messages (while it runs; the last
	// MaxListedMessages of them).
	Messages []string
}

// MaxListedMessages bounds the messages History lists of a running run:
// the logs show what is still to come, which is at the end.
const MaxListedMessages = 20

// Page is a page of a tenant's runs, newest first.
type Page struct {
	Runs []History
	// Cursor continues the listing; "" at its end.
	Cursor string
}

// List reads up to n of t's runs started before cursor (a previous
// page's Cursor; "" for the newest), newest first; from and to (ms, 0 for
// open) bound their starts. Without full, it reads each run's state only,
// not its log and messages.
func (s *Store) List(ctx context.Context, t, cursor string, n int, from, to int64, full bool) (Page, error) {
	max := "+inf"
	if to > 0 {
		max = strconv.FormatInt(to, 10)
	}
	if cursor != "" {
		c, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || c < 0 {
			return Page{}, fmt.Errorf("%w: cursor %q is not one this API gave", ErrBadCursor, cursor)
		}
		if to == 0 || c <= to {
			max = "(" + strconv.FormatInt(c, 10)
		}
	}
	low := "-inf"
	if from > 0 {
		low = strconv.FormatInt(from, 10)
	}
	// One more than asked: whether there is a next page. A page ends
	// between two starts, never inside one millisecond's runs.
	k := indexKey(t)
	zs, err := s.rdb.ZRevRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Max: max, Min: low, Count: int64(n) + 1}).Result()
	if err != nil {
		return Page{}, fmt.Errorf("list workflow runs: %w", err)
	}
	var page Page
	if len(zs) > n {
		next := zs[n].Score
		keep := n
		for keep > 0 && zs[keep-1].Score == next {
			keep--
		}
		if keep == 0 {
			// One millisecond holds more than a page of runs: all of them.
			at := strconv.FormatInt(int64(next), 10)
			if zs, err = s.rdb.ZRevRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Max: at, Min: at}).Result(); err != nil {
				return Page{}, fmt.Errorf("list workflow runs: %w", err)
			}
		} else {
			zs = zs[:keep]
		}
		page.Cursor = strconv.FormatInt(int64(zs[len(zs)-1].Score), 10)
	}
	for _, z := range zs {
		id, _ := z.Member.(string)
		h, err := s.get(ctx, t, id, full)
		if err != nil {
			return Page{}, err
		}
		if h.ID != "" {
			page.Runs = append(page.Runs, h)
		}
	}
	return page, nil
}

// ErrBadCursor is a cursor List did not give.
var ErrBadCursor = fmt.Errorf("bad cursor")

// Get reads run's history; its ID is "" when there is none (never
// started, or kept past its retention).
func (s *Store) Get(ctx context.Context, t, id string) (History, error) {
	return s.get(ctx, t, id, true)
}

// get reads run id's history, with its log and messages when full.
func (s *Store) get(ctx context.Context, t, id string, full bool) (History, error) {
	h, msgs, log := runKeys(t, id)
	var running, ended *redis.MapStringStringCmd
	ms, entries := &redis.StringSliceCmd{}, &redis.StringSliceCmd{}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		running = p.HGetAll(ctx, h)
		ended = p.HGetAll(ctx, endedKey(t, id))
		if full {
			ms = p.LRange(ctx, msgs, -MaxListedMessages, -1)
			entries = p.LRange(ctx, log, 0, -1)
		}
		return nil
	})
	if err != nil {
		return History{}, fmt.Errorf("read workflow run %s: %w", id, err)
	}
	f := running.Val()
	if f["createdAt"] == "" {
		f = ended.Val()
	}
	if f["createdAt"] == "" {
		return History{}, nil
	}
	out := History{ID: id, URL: f["url"], State: f["state"]}
	if out.State == "" {
		out.Messages = ms.Val()
	}
	out.CreatedAt = msTime(f["createdAt"])
	out.CompletedAt = msTime(f["completedAt"])
	if v := f["response"]; v != "" {
		out.Result = []byte(v)
	}
	if v := f["invoker"]; v != "" {
		out.Invoker = []byte(v)
	}
	if v := f["config"]; v != "" {
		out.Config = []byte(v)
	}
	for _, e := range entries.Val() {
		var en Entry
		if json.Unmarshal([]byte(e), &en) == nil {
			out.Entries = append(out.Entries, en)
		}
	}
	return out, nil
}

// msTime is the time of v, milliseconds since the epoch; zero for "".
func msTime(v string) time.Time {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || v == "" {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
