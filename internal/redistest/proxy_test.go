package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A process behind Proxies sees only proxy addresses from the sentinels,
// and a cut stops everything it says to Redis until Heal.
func TestProxiesHandOutProxyAddresses(t *testing.T) {
	t.Parallel()
	sn := StartSentinels(t, 1)
	ps := sn.Proxies(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := redis.NewSentinelClient(&redis.Options{Addr: ps.SentinelAddrs[0]})
	defer s.Close()
	got, err := s.GetMasterAddrByName(ctx, sn.MasterName).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != portOf(ps.all[0].Addr) {
		t.Fatalf("sentinel through the proxy gave master port %s, want the proxy's %s (the master is on %d)", got[1], portOf(ps.all[0].Addr), sn.Master.Port)
	}

	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sn.MasterName, SentinelAddrs: ps.SentinelAddrs,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set through the proxies: %v", err)
	}
	ps.Cut()
	if err := c.Get(ctx, "k").Err(); err == nil {
		t.Fatal("a read went through a cut")
	}
	ps.Heal()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := c.Get(ctx, "k").Result()
		if err == nil && v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no read after Heal: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
