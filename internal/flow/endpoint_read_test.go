package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/redistest"
)

// keysSeen records the keys of every command a client sends.
type keysSeen struct {
	mu   sync.Mutex
	keys []string
}

func (k *keysSeen) DialHook(next redis.DialHook) redis.DialHook { return next }

func (k *keysSeen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		k.note(cmd)
		return next(ctx, cmd)
	}
}

func (k *keysSeen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			k.note(cmd)
		}
		return next(ctx, cmds)
	}
}

func (k *keysSeen) note(cmd redis.Cmder) {
	k.mu.Lock()
	defer k.mu.Unlock()
	args := cmd.Args()
	name := strings.ToLower(fmt.Sprint(args[0]))
	switch {
	case (name == "evalsha" || name == "eval") && len(args) > 2:
		n := 0
		fmt.Sscan(fmt.Sprint(args[2]), &n)
		for i := 3; i < 3+n && i < len(args); i++ {
			k.keys = append(k.keys, fmt.Sprint(args[i]))
		}
	case len(args) > 1:
		k.keys = append(k.keys, fmt.Sprint(args[1]))
	}
}

func (k *keysSeen) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.keys
	k.keys = nil
	return out
}

// No worker reads every tenant's endpoint state to deliver one request: a
// delivery to a closed endpoint reads that endpoint's state alone, at most
// once per BreakerRead, however many endpoints other tenants opened.
func TestADeliveryReadsOnlyItsOwnEndpoint(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	ctx := context.Background()
	for i := range 200 {
		name := EndpointName("other", fmt.Sprintf("http://h%d.example.com:80", i))
		if _, err := OpenEndpoint(ctx, rdb, name, 0, "operator", clk.Now(), Tuning{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := &keysSeen{}
	watched := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = watched.Close() })
	watched.AddHook(seen)
	c := newController(t, watched, Config{Concurrency: 100, FairShare: 1}, &waker{}, clk)
	req := func(id string) Request {
		return Request{ID: id, HostPort: "mine:443", Key: "mine:443", Endpoint: "https://mine:443", Tenant: "me", Timeout: time.Second}
	}
	state, _, _, _ := keys.FlowEndpoint(EndpointName("me", "https://mine:443"))
	for i := range 3 {
		seen.take()
		admit(t, c, req(fmt.Sprint("r", i))).Done(ctx, Succeeded)
		read := seen.take()
		if slices.Contains(read, keys.FlowEndpoints) {
			t.Fatalf("delivery %d read the list of every tenant's endpoints (%s)", i, keys.FlowEndpoints)
		}
		for _, k := range read {
			if strings.Contains(k, "endpoint") && k != state {
				t.Errorf("delivery %d read %s, another endpoint's key", i, k)
			}
		}
		if want := i == 0 || i == 2; slices.Contains(read, state) != want {
			t.Errorf("delivery %d read its endpoint's state: %v, want %v (once per BreakerRead)", i, !want, want)
		}
		if i == 1 {
			clk.Add(DefaultTuning.BreakerRead)
		}
	}
}

// A tenant opens at most its limit of endpoints by hand; one whose state
// expired since (unused) no longer counts, and another tenant's never do.
func TestHandOpenedEndpointsAreBoundedPerTenant(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	open := func(tenant string, i int, at time.Time) error {
		_, err := HandOpenEndpoint(ctx, rdb, EndpointName(tenant, fmt.Sprintf("http://h%d:80", i)), 2, at, Tuning{})
		return err
	}
	for i := range 2 {
		if err := open("a", i, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := open("a", 0, now); err != nil {
		t.Errorf("opening again one it has: %v", err)
	}
	if err := open("a", 2, now); !errors.Is(err, ErrEndpointLimit) {
		t.Errorf("a third: %v, want ErrEndpointLimit", err)
	}
	if err := open("b", 2, now); err != nil {
		t.Errorf("another tenant's: %v", err)
	}
	state, _, _, _ := keys.FlowEndpoint(EndpointName("a", "http://h1:80"))
	rdb.Del(ctx, state) // its state expired, unused
	if err := open("a", 2, now.Add(handOpenedKeep/2)); !errors.Is(err, ErrEndpointLimit) {
		t.Errorf("a third while an open may be in progress: %v, want ErrEndpointLimit", err)
	}
	if err := open("a", 2, now.Add(2*handOpenedKeep)); err != nil {
		t.Errorf("a third once one expired: %v", err)
	}
}
