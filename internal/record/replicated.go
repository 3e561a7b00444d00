package record

import (
	"context"
	"fmt"
	"time"
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
	ctx, cancel := context.WithTimeout(ctx, s.replicaWait+2*time.Second)
	defer cancel()
	pipe := s.rdb.Pipeline()
	pipe.Set(ctx, ReplicaMarkKey, "1", time.Minute)
	wait := pipe.Do(ctx, "WAIT", s.replicas, s.replicaWait.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	n, err := wait.Int()
	if err != nil {
		return wrap(err)
	}
	if n < s.replicas {
		return fmt.Errorf("%w: %d of %d within %s", ErrChangeNotReplicated, n, s.replicas, s.replicaWait)
	}
	return nil
}
