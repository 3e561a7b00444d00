package flowdb

// A flow-control key's rate: its turns, spaced evenly (GCRA's virtual
// time), one given to each waiter once.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var turnScript = script("turn")

// RateIO gives and forgets the keys' rate turns.
type RateIO struct{ rdb redis.UniversalClient }

// Turn gives id its turn of key's rate, turns spaced interval apart and
// one late by at most grace still taken: ok when it may start now, else
// at is its own turn, kept for it.
func (r RateIO) Turn(ctx context.Context, key, id string, now time.Time, interval, grace, ttl time.Duration) (at time.Time, ok bool, err error) {
	next, given := keys.FlowRate(key)
	res, err := turnScript.Run(ctx, r.rdb, []string{next, given}, id, now.UnixMicro(), max(interval.Microseconds(), 1),
		grace.Microseconds(), ttl.Milliseconds()).StringSlice()
	if err != nil {
		return time.Time{}, false, err
	}
	if len(res) != 2 {
		return time.Time{}, false, fmt.Errorf("turn script: unexpected reply %v", res)
	}
	us, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil || (res[0] != "0" && res[0] != "1") {
		return time.Time{}, false, fmt.Errorf("turn script: unexpected reply %v", res)
	}
	return time.UnixMicro(us), res[0] == "1", nil
}

// Reset forgets the turns key's rate gave.
func (r RateIO) Reset(ctx context.Context, key string) error {
	next, given := keys.FlowRate(key)
	return r.rdb.Del(ctx, next, given).Err()
}
