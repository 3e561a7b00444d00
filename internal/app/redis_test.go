package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/redistest"
)

// The start-up check refuses what waiting cannot fix, saying what to fix,
// and lets an unreachable Redis through with a warning.
func TestCheckRedisRefusesWhatWaitingCannotFix(t *testing.T) {
	t.Parallel()
	sec := redistest.NewSecure(t, false)
	srv := redistest.StartSecureServer(t, sec)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	client := func(o redis.Options) *redis.Client {
		o.Addr, o.DialTimeout, o.ReadTimeout, o.MaxRetries = srv.Addr, time.Second, time.Second, -1
		c := redis.NewClient(&o)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	admin := client(redis.Options{Password: sec.Password})
	if err := admin.Do(ctx, "ACL", "SETUSER", "weak", "on", ">weak-pw", "~*", "-@all").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opt  redis.Options
		want string // "" = no refusal
	}{
		{"right credentials", redis.Options{Username: sec.User, Password: sec.UserPassword}, ""},
		{"wrong password", redis.Options{Username: sec.User, Password: "wrong"}, "wrong or missing credentials"},
		{"no password", redis.Options{}, "wrong or missing credentials"},
		{"a user without permissions", redis.Options{Username: "weak", Password: "weak-pw"}, "lacks a permission"},
	} {
		err := checkRedis(ctx, client(tc.opt), log)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrRedisRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	// Nobody listening: a warning, not a refusal (Redis may be starting).
	// TLS to a plain port looks the same: the server waits for a command
	// line and the handshake times out.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer down.Close()
	if err := checkRedis(ctx, down, log); err != nil {
		t.Errorf("an unreachable Redis refused the start: %v", err)
	}
}
