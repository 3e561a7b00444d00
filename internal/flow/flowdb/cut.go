package flowdb

// A cut key's line: the requests of a key adaptive backpressure cut wait
// in it, shared by all workers, until a worker's cut rate gives them
// turns.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var (
	cutWaitScript = script("cut_wait")
	cutNextScript = script("cut_next")
	cutJoinScript = script("cut_join")
)

// CutIO waits in, gives turns of and joins the cut keys' lines.
type CutIO struct{ rdb redis.UniversalClient }

// CutNames are the Redis keys of a cut key's line: the line, the places
// of those given turns, and their turns.
func CutNames(key string) []string {
	line, places, turns := keys.FlowCut(key)
	return []string{line, places, turns}
}

// CutAnswer is what cut_wait said: start now, sleep until a turn, or
// wait in line behind Ahead others; Offered says the turn is the one the
// worker offered. A start at a turn given earlier has it in At.
type CutAnswer struct {
	Start   bool
	At      time.Time
	Ahead   int
	Offered bool
}

// Wait admits id on key's line at now: its turn if it was given one, else
// the turn offered at offerAt (ms; -1: none) while nobody waits, else a
// place in the line. A turn is taken up to early before it and grace
// after.
func (c CutIO) Wait(ctx context.Context, key, id string, now time.Time, early, grace time.Duration, offerAt int64, ttl time.Duration) (CutAnswer, error) {
	res, err := cutWaitScript.Run(ctx, c.rdb, CutNames(key), id, now.UnixMilli(), early.Milliseconds(),
		grace.Milliseconds(), offerAt, ttl.Milliseconds()).StringSlice()
	if err != nil {
		return CutAnswer{}, err
	}
	return parseCutAnswer(res)
}

// parseCutAnswer reads cut_wait's reply.
func parseCutAnswer(res []string) (CutAnswer, error) {
	switch {
	case len(res) == 1 && res[0] == "start":
		return CutAnswer{Start: true, Offered: true}, nil
	case len(res) == 2 && res[0] == "turn":
		ms, err := strconv.ParseInt(res[1], 10, 64)
		if err == nil {
			return CutAnswer{Start: true, At: time.UnixMilli(ms)}, nil
		}
	case len(res) == 2 && (res[0] == "wait" || res[0] == "offer"):
		ms, err := strconv.ParseInt(res[1], 10, 64)
		if err == nil {
			return CutAnswer{At: time.UnixMilli(ms), Offered: res[0] == "offer"}, nil
		}
	case len(res) == 2 && res[0] == "line":
		n, err := strconv.Atoi(res[1])
		if err == nil {
			return CutAnswer{Ahead: n}, nil
		}
	}
	return CutAnswer{}, fmt.Errorf("cut_wait script: unexpected reply %v", res)
}

// GivenTurn is a waiter given the turn of index Turn.
type GivenTurn struct {
	ID   string
	Turn int
}

// Next gives turns to the oldest waiters of key's line, in order, each at
// or after its place: given are the ids and their turns' indexes, left
// the waiters left, head the next waiter's place (zero: none).
func (c CutIO) Next(ctx context.Context, key string, turns []time.Time, ttl time.Duration) (given []GivenTurn, left int, head time.Time, err error) {
	args := make([]any, 0, len(turns)+1)
	args = append(args, ttl.Milliseconds())
	for _, t := range turns {
		args = append(args, t.UnixMilli())
	}
	res, err := cutNextScript.Run(ctx, c.rdb, CutNames(key), args...).StringSlice()
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	bad := fmt.Errorf("cut_next script: unexpected reply %v", res)
	if len(res) < 2 || len(res)%2 != 0 || len(res) > 2*len(turns)+2 {
		return nil, 0, time.Time{}, bad
	}
	left, err1 := strconv.Atoi(res[0])
	headMs, err2 := strconv.ParseFloat(res[1], 64)
	if err1 != nil || err2 != nil {
		return nil, 0, time.Time{}, bad
	}
	if headMs >= 0 {
		head = time.UnixMilli(int64(headMs))
	}
	for i := 2; i < len(res); i += 2 {
		n, err := strconv.Atoi(res[i+1])
		if err != nil || n < 1 || n > len(turns) {
			return nil, 0, time.Time{}, bad
		}
		given = append(given, GivenTurn{ID: res[i], Turn: n - 1})
	}
	return given, left, head, nil
}

// Join puts id in key's line at due, and says how many wait ahead of it.
func (c CutIO) Join(ctx context.Context, key, id string, due time.Time, ttl time.Duration) (ahead int, err error) {
	return cutJoinScript.Run(ctx, c.rdb, CutNames(key)[:1], id, due.UnixMilli(), ttl.Milliseconds()).Int()
}
