package flowdb

// A destination's (or a tenant's) fairness line: the waiters for a
// worker's free slots, and the requests handed one and not heard of
// since.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var (
	fairWaitScript = script("fair_wait")
	fairNextScript = script("fair_next")
)

// FairIO waits in and takes from the fairness lines.
type FairIO struct{ rdb redis.UniversalClient }

// FairNames are the Redis keys of a destination's (or a tenant's)
// fairness line: the line, the places of requests promoted from it, when
// each was handed over, and the places given to its tenants.
func FairNames(hostPort string) []string {
	line, promoted, handed, tenants := keys.FlowFair(hostPort)
	return []string{line, promoted, handed, tenants}
}

// Wait puts id, of tenant t (tenant.Of), in hostPort's line (keeping a
// place it had; a newcomer takes its tenant's turn) and says how many
// wait in it.
func (f FairIO) Wait(ctx context.Context, hostPort, id, t string, ttl time.Duration) (int, error) {
	return fairWaitScript.Run(ctx, f.rdb, FairNames(hostPort), id, t, ttl.Milliseconds()).Int()
}

// FairTake is what fair_next said.
type FairTake struct {
	IDs []string // taken from the line, in line order
	// Stale were handed over a check ago and not heard of since.
	Stale []string
	// Left wait in line; Handed were handed over and not heard of since.
	Left, Handed int
}

// Next takes up to n waiters of hostPort's line, in line order, forgets
// ended (the request whose attempt ended, or ""), and answers up to
// staleBatch of those handed over check ago and not heard of since.
func (f FairIO) Next(ctx context.Context, hostPort, ended string, n int, ttl time.Duration, now time.Time, check time.Duration, staleBatch int) (FairTake, error) {
	res, err := fairNextScript.Run(ctx, f.rdb, FairNames(hostPort), ended, n, ttl.Milliseconds(),
		now.UnixMilli(), check.Milliseconds(), staleBatch).StringSlice()
	if err != nil {
		return FairTake{}, err
	}
	return parseFairTake(res)
}

// parseFairTake reads fair_next's reply; the error is built only for a
// bad one (this runs on every attempt's end).
func parseFairTake(res []string) (FairTake, error) {
	if len(res) < 3 {
		return FairTake{}, fmt.Errorf("fair_next script: unexpected reply %v", res)
	}
	var t FairTake
	var err1, err2, err3 error
	var stale int
	t.Left, err1 = strconv.Atoi(res[0])
	t.Handed, err2 = strconv.Atoi(res[1])
	stale, err3 = strconv.Atoi(res[2])
	if err1 != nil || err2 != nil || err3 != nil || stale < 0 || 3+stale > len(res) {
		return FairTake{}, fmt.Errorf("fair_next script: unexpected reply %v", res)
	}
	t.Stale, t.IDs = res[3:3+stale], res[3+stale:]
	return t, nil
}

// ForgetHanded forgets that ids were handed a slot of hostPort's line.
func (f FairIO) ForgetHanded(ctx context.Context, hostPort string, ids []any) error {
	return f.rdb.ZRem(ctx, FairNames(hostPort)[2], ids...).Err()
}
