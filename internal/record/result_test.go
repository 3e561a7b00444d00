package record

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// A request's result reads back the same wherever it is kept: a short one
// in the hash, a long one in its own key, and a run after a redrive
// replaces the earlier run's, from either place to either.
func TestAResultReadsBackWhereverItIsKept(t *testing.T) {
	t.Parallel()
	short, long := "ok", strings.Repeat("r", inlineResultMax+1)
	edge := strings.Repeat("e", inlineResultMax)
	empty := ""
	// second is the hash of a redriven request's second run, with kv.
	second := func(kv ...string) map[string]string {
		return reqHash(Pending, append([]string{fAttemptCount, "2", "inflightN", "2", "inflightAt", t0ms, fRedriveCount, "1"}, kv...)...)
	}
	for _, c := range []struct {
		name    string
		initial state
		n       int
		result  string
	}{
		{"a short result", state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)}, 1, short},
		{"an empty result", state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)}, 1, empty},
		{"a result as long as a compact value", state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)}, 1, edge},
		{"a long result", state{k0.req(tid): reqHash(Pending, fAttemptCount, "1", "inflightN", "1", "inflightAt", t0ms)}, 1, long},
		{"a short result after a long one", state{k0.req(tid): second(fHasResult, resultInKey), k0.result(tid): long}, 2, short},
		{"a long result after a short one", state{k0.req(tid): second(fHasResult, resultInline, fResult, short)}, 2, long},
		{"an empty result after a long one", state{k0.req(tid): second(fHasResult, resultInKey), k0.result(tid): long}, 2, empty},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			ctx := context.Background()
			dur := int64(3)
			res := c.result
			if got, err := s.Finish(ctx, tid, Outcome{Attempt: Attempt{N: c.n, StartedAt: t0, DurationMs: &dur, Outcome: "success"},
				Status: Completed, Result: &res}, t0); err != nil || got != Recorded {
				t.Fatalf("Finish = %v, %v", got, err)
			}
			r, err := s.Get(ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			if !r.HasResult || r.Result != c.result {
				t.Errorf("read back HasResult %v, Result %q (%d bytes); want %q", r.HasResult, r.Result, len(r.Result), c.result)
			}
			if enc := rdb.ObjectEncoding(ctx, k0.req(tid)).Val(); len(c.result) <= inlineResultMax && enc != "listpack" {
				t.Errorf("the hash is a %s, want a listpack: a short result keeps it compact", enc)
			}
		})
	}
}

// Expunging erases a result kept in the hash as it does one in its key.
func TestExpungeErasesAnInlineResult(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	seed(t, rdb, state{k0.req(tid): reqHash(Completed, fAttemptCount, "1", fHasResult, resultInline, fResult, "secret ok"), k0.spec(tid): specJSON})
	ctx := context.Background()
	if _, err := s.Expunge(ctx, tenant.All, tid, "erin", t0); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, tid)
	if err != nil {
		t.Fatal(err)
	}
	if r.HasResult || r.Result != "" {
		t.Errorf("after expunge HasResult %v, Result %q; want none", r.HasResult, r.Result)
	}
	if err := rdb.HGet(ctx, k0.req(tid), fResult).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("the hash's result field is still there (%v)", err)
	}
}
