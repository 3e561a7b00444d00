package record

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrChangeNotReplicated: a change was made, but too few replicas
// confirmed it in time; it wraps ErrUnavailable. A failover before the
// replicas catch up may undo it.
var ErrChangeNotReplicated = fmt.Errorf("%w: too few replicas confirmed the change", ErrUnavailable)

// ReplicasRequired is how many replicas Replicated waits for (0: none).
func (s *Store) ReplicasRequired() int { return s.replicas }

// Replicated returns once the replicas RequireReplicas asks for hold
// every write any connection of this process had answered before the
// call, or ErrChangeNotReplicated when they did not within its wait.
// Without RequireReplicas it returns at once. It writes ReplicaMarkKey
// and WAITs on one connection: WAIT confirms only its own connection's
// writes, and the mark comes after every write answered before it in the
// primary's replication stream.
func (s *Store) Replicated(ctx context.Context) error {
	if s.replicas == 0 {
		return nil
	}
	return Confirm(ctx, s.rdb, s.replicas, s.replicaWait)
}

// Confirm returns once n replicas hold every write any connection of
// this process had answered before the call, waiting at most wait, or
// ErrChangeNotReplicated. A worker confirms so before it hands a record
// it did not write itself to the workers: a record only a primary holds
// may be one that primary's failover will throw away, and delivering it
// would let its Idempotency-Key become a second request on the node that
// survives (docs/reliability.md).
func Confirm(ctx context.Context, rdb redis.UniversalClient, n int, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait+2*time.Second)
	defer cancel()
	pipe := rdb.Pipeline()
	pipe.Set(ctx, ReplicaMarkKey, "1", time.Minute)
	waited := pipe.Do(ctx, "WAIT", n, wait.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	got, err := waited.Int()
	if err != nil {
		return wrap(err)
	}
	if got < n {
		return fmt.Errorf("%w: %d of %d within %s", ErrChangeNotReplicated, got, n, wait)
	}
	return nil
}
