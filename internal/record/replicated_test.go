package record

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// With RequireReplicas, a submission the replica cannot confirm is
// ErrNotReplicated only when this call stored it (the API takes it back);
// an unconfirmed replay of an earlier submission is unavailable but not
// ErrNotReplicated, so the API leaves the earlier claim alone, and once
// the replica answers the replay finds the same request.
func TestCreateReplicatedTellsOwnWriteFromReplay(t *testing.T) {
	t.Parallel()
	sn := redistest.StartSentinels(t, 1)
	s := NewStore(sn.Master.Client(), time.Hour)
	s.RequireReplicas(1, 300*time.Millisecond)
	ctx := context.Background()
	now := time.Now()

	// The replica first syncs with its primary: on a loaded machine that
	// can take longer than the 300 ms WAIT. A write of this connection's
	// own is what WAIT counts a replica for, so each try writes first.
	deadline := time.Now().Add(30 * time.Second)
	for !replicaConfirms(ctx, sn.Master.Client()) {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not confirm a write within 30 s")
		}
	}

	first := newRequest("01m8mhyychtfy2pdj6g1", now)
	if replay, err := s.Create(ctx, first, "key-1", []byte("b"), CreateOptions{}); err != nil || replay != nil {
		t.Fatalf("first submission: %v %v", replay, err)
	}

	stopped := sn.Replica.Pid()
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(stopped, syscall.SIGCONT) })

	_, err := s.Create(ctx, newRequest("01m8mhyychtfy2pdj6g2", now), "key-1", []byte("b"), CreateOptions{})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotReplicated) {
		t.Errorf("unconfirmed replay: %v, want ErrUnavailable and not ErrNotReplicated", err)
	}
	_, err = s.Create(ctx, newRequest("01m8mhyychtfy2pdj6g3", now), "key-2", []byte("b"), CreateOptions{})
	if !errors.Is(err, ErrNotReplicated) {
		t.Errorf("unconfirmed new request: %v, want ErrNotReplicated", err)
	}

	if err := syscall.Kill(stopped, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		replay, err := s.Create(ctx, newRequest("01m8mhyychtfy2pdj6g4", now), "key-1", []byte("b"), CreateOptions{})
		if err == nil {
			if replay == nil || replay.ID != first.ID {
				t.Fatalf("replay after the replica came back: %+v, want %s", replay, first.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay still unconfirmed 20s after the replica came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TakeBack removes an unconfirmed request with its claim, but not once a
// replay of its Idempotency-Key has seen the claim (and may have been
// acknowledged), nor once a worker has begun it (it may be delivered).
func TestTakeBackLeavesAReplayedRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		replay      bool
		begin       bool
		wantRemoved bool
	}{
		{name: "unseen: removed", wantRemoved: true},
		{name: "replayed: kept", replay: true},
		{name: "begun by a worker: kept", begin: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			r := newRequest(tid, t0)
			if _, err := s.Create(ctx, r, "k1", []byte("body"), CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if c.replay {
				if replay, err := s.Create(ctx, newRequest("01m8mhyychtfy2pdj6g8", t0), "k1", []byte("body"), CreateOptions{}); err != nil || replay == nil {
					t.Fatalf("replay: %v %v", replay, err)
				}
			}
			if c.begin {
				if b, err := s.Begin(ctx, tid, t0); err != nil || b.State != Started {
					t.Fatalf("begin: %+v %v", b, err)
				}
			}
			removed, err := s.TakeBack(ctx, "", tid, "k1")
			if err != nil || removed != c.wantRemoved {
				t.Fatalf("TakeBack = %v, %v; want %v", removed, err, c.wantRemoved)
			}
			left := dump(t, rdb, k0.req(tid), d0.idem("k1"))
			if c.wantRemoved && len(left) != 0 {
				t.Errorf("removed, yet left: %v", left)
			}
			if !c.wantRemoved && len(left) != 2 {
				t.Errorf("kept, yet only %v left", left)
			}
		})
	}
}

// What a node answers during a failover or a resync is an outage (503),
// not a bug (500).
func TestWrapTellsFailoverErrorsFromBugs(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		"READONLY You can't write against a read only replica.": true,
		"NOREPLICAS Not enough good replicas to write.":         true,
		"LOADING Redis is loading the dataset in memory":        true,
		"MASTERDOWN Link with MASTER is down":                   true,
		"ERR Error running script (call to f_x): wrong number":  false,
	} {
		if got := errors.Is(wrap(nodeError(msg)), ErrUnavailable); got != want {
			t.Errorf("wrap(%q) unavailable = %v, want %v", msg, got, want)
		}
	}
}

// nodeError is an error a Redis node answered (a redis.Error).
type nodeError string

func (e nodeError) Error() string { return string(e) }
func (nodeError) RedisError()     {}

// replicaConfirms writes on one connection and reports whether a replica
// confirmed the write within a second.
func replicaConfirms(ctx context.Context, rdb *redis.Client) bool {
	pipe := rdb.Pipeline()
	pipe.Set(ctx, "replica-sync", "1", 0)
	wait := pipe.Do(ctx, "WAIT", 1, 1000)
	if _, err := pipe.Exec(ctx); err != nil {
		return false
	}
	n, _ := wait.Int()
	return n >= 1
}
