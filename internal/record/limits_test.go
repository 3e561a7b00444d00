package record

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

func TestAuthFailureCountsInAFixedWindow(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	for want := int64(1); want <= 3; want++ {
		n, left, err := s.AuthFailure(ctx, "203.0.113.9", time.Minute)
		if err != nil || n != want || left <= 50*time.Second || left > time.Minute {
			t.Fatalf("failure %d: n=%d left=%v err=%v", want, n, left, err)
		}
	}
	if n, _, _ := s.AuthFailure(ctx, "203.0.113.10", time.Minute); n != 1 {
		t.Errorf("another address starts at %d, want 1", n)
	}
	// The window ends: the count starts over at 1.
	if n, _, _ := s.AuthFailure(ctx, "198.51.100.1", 50*time.Millisecond); n != 1 {
		t.Fatalf("first failure counted %d", n)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, _, err := s.AuthFailure(ctx, "198.51.100.1", 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 50 ms window never ended (count %d)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

func TestCreateCountsUnfinishedPerOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	cases := []struct {
		name     string
		existing map[string]Status // the owner's requests before the call; "" = record gone
		limit    int
		wantErr  error
		wantSet  int // entries in the owner's set after the call
	}{
		{"under the limit", map[string]Status{"01a": Pending}, 2, nil, 2},
		{"at the limit, all unfinished", map[string]Status{"01a": Pending, "01b": Retrying}, 2, ErrOwnerLimit, 2},
		{"at the limit, one finished", map[string]Status{"01a": Completed, "01b": Retrying}, 2, nil, 2},
		{"at the limit, one expired", map[string]Status{"01a": "", "01b": Pending}, 2, nil, 2},
		{"at the limit, all finished", map[string]Status{"01a": Failed, "01b": Canceled}, 2, nil, 1},
		{"no limit: nothing counted", map[string]Status{"01a": Pending, "01b": Pending}, 0, nil, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			s := NewStore(srv.Client(), time.Hour)
			i := 0
			for id, st := range c.existing {
				i++
				if err := srv.Client().ZAdd(ctx, d0.owner("key:x"), redisZ(float64(i), id)).Err(); err != nil {
					t.Fatal(err)
				}
				if st != "" {
					srv.Client().HSet(ctx, k0.req(id), fStatus, string(st))
				}
			}
			_, err := s.Create(ctx, newRequest("01new", now), "", nil, CreateOptions{Owner: Owner{ID: "key:x", Limit: c.limit}})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if n := srv.Client().ZCount(ctx, d0.owner("key:x"), "0", "+inf").Val(); int(n) != c.wantSet {
				t.Errorf("owner set holds %d, want %d", n, c.wantSet)
			}
			stored := srv.Client().Exists(ctx, k0.req("01new")).Val() == 1
			if stored != (c.wantErr == nil) {
				t.Errorf("request stored: %v, want %v", stored, c.wantErr == nil)
			}
			if ttl := srv.Client().PTTL(ctx, d0.owner("key:x")).Val(); c.wantErr == nil && c.limit > 0 && ttl <= 0 {
				t.Errorf("owner set has no time to live (%v)", ttl)
			}
		})
	}
}

// The owner set's time to live is refreshed once a minute of submissions,
// not on every one; its marker of the last refresh is never counted.
func TestOwnerSetTTLRefreshedOncePerMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	s := NewStore(srv.Client(), time.Hour)
	key := d0.owner("key:x")
	owner := CreateOptions{Owner: Owner{ID: "key:x", Limit: 2}}
	t0 := time.UnixMilli(1_800_000_000_000) // the start of a minute
	create := func(id string, at time.Time) error {
		_, err := s.Create(ctx, newRequest(id, at), "", nil, owner)
		return err
	}
	if err := create("01a", t0); err != nil {
		t.Fatal(err)
	}
	if ttl := srv.Client().PTTL(ctx, key).Val(); ttl <= time.Hour {
		t.Fatalf("first submission: time to live %v, want retention and a day", ttl)
	}
	srv.Client().PExpire(ctx, key, time.Minute)
	if err := create("01b", t0.Add(59*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ttl := srv.Client().PTTL(ctx, key).Val(); ttl > time.Minute {
		t.Errorf("same minute: time to live refreshed to %v", ttl)
	}
	if err := create("01c", t0.Add(61*time.Second)); !errors.Is(err, ErrOwnerLimit) {
		t.Fatalf("third of limit 2: %v, want ErrOwnerLimit", err)
	}
	srv.Client().HSet(ctx, k0.req("01a"), fStatus, string(Completed))
	if err := create("01c", t0.Add(61*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ttl := srv.Client().PTTL(ctx, key).Val(); ttl <= time.Hour {
		t.Errorf("next minute: time to live %v, not refreshed", ttl)
	}
	if n := srv.Client().ZCount(ctx, key, "0", "+inf").Val(); n != 2 {
		t.Errorf("owner set counts %d, want 2", n)
	}
}

func TestMemoryReadsMaxmemory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := NewStore(srv.Client(), time.Hour)
	ctx := context.Background()
	m, err := s.Memory(ctx)
	if err != nil || m.Used <= 0 || m.Max != 0 || m.Full() != 0 {
		t.Fatalf("no maxmemory: %+v %v", m, err)
	}
	if err := srv.Client().ConfigSet(ctx, "maxmemory", "100mb").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Client().ConfigSet(ctx, "maxmemory", "0") })
	m, _ = s.Memory(ctx)
	if m.Max != 100<<20 || m.Full() <= 0 || m.Full() >= 1 {
		t.Errorf("maxmemory 100mb: %+v (full %.3f)", m, m.Full())
	}
}
