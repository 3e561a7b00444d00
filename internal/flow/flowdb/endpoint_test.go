package flowdb

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/redistest"
)

// The breaker's scripts, each from a seeded state: its reply and the
// state and line it leaves.
func TestEndpointScripts(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const now = 1_000_000
	open := map[string]string{"state": "open", "since": "990000", "interval": "5000", "nextProbe": "1005000", "probe": "", "probeUntil": "0", "by": "breaker"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := maps.Clone(h)
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for i, c := range []struct {
		name      string
		state     map[string]string
		line      []string // ids, placed 1, 2, ...
		places    map[string]string
		run       func(state, line, keys, joined string) (any, error)
		wantReply any
		wantState map[string]string
		wantLine  []string
		// wantPlaces are the waiters' keys kept after.
		wantPlaces map[string]string
		// joined and wantJoined are when each waiter began to wait,
		// before and after.
		joined, wantJoined map[string]string
	}{
		{
			name: "enter a closed endpoint: go, and leave the line", state: map[string]string{"state": "closed"}, line: []string{"a"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 0).Result()
			},
			wantReply: []any{int64(0)}, wantState: map[string]string{"state": "closed"}, wantLine: nil,
		},
		{
			name: "enter an endpoint with no state (expired): go, its listing stale", state: nil, line: []string{"a"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 0).Result()
			},
			wantReply: []any{int64(0), int64(1)}, wantState: map[string]string{}, wantLine: nil,
		},
		{
			name: "enter an open endpoint before its probe: wait, second in line", state: open, line: []string{"a"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "b", now, 60000, 6000, 10, "", 0).Result()
			},
			wantReply: []any{int64(1), int64(1005000), int64(990000), int64(0), int64(0)}, wantState: open, wantLine: []string{"a", "b"},
			wantJoined: map[string]string{"b": "1000000"},
		},
		{
			name: "enter an open endpoint at its probe: the probe", state: with(open, "nextProbe", "1000000"), line: []string{"a", "b"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 0).Result()
			},
			wantReply: []any{int64(2)}, wantState: with(open, "nextProbe", "1000000", "state", "half_open", "probe", "a", "probeUntil", "1006000"),
			wantLine: []string{"b"},
		},
		{
			name: "enter an endpoint an operator opened: wait, never probed", state: with(open, "by", "operator", "nextProbe", "0"), line: nil,
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 0).Result()
			},
			wantReply: []any{int64(1), int64(0), int64(990000), int64(1), int64(0)}, wantState: with(open, "by", "operator", "nextProbe", "0"),
			wantLine: []string{"a"}, wantJoined: map[string]string{"a": "1000000"},
		},
		{
			name: "a probe fails: open again, its interval doubled, the first waiter named", state: with(open, "state", "half_open", "probe", "a"),
			line: []string{"b", "c"},
			run: func(s, l, p, j string) (any, error) {
				return epProbedScript.Run(ctx, rdb, []string{s, l, j}, "a", now, "failed", 300000, 0).Result()
			},
			wantReply: []any{int64(0), int64(1010000), "b"}, wantState: with(open, "interval", "10000", "nextProbe", "1010000", "failedAt", "1000000"),
			wantLine: []string{"b", "c"},
		},
		{
			name: "a probe fails: the waiters that waited long already are woken to end", state: with(open, "state", "half_open", "probe", "a"),
			line: []string{"b", "c", "d"}, joined: map[string]string{"b": "990000", "c": "995000", "d": "999000"},
			run: func(s, l, p, j string) (any, error) {
				return epProbedScript.Run(ctx, rdb, []string{s, l, j}, "a", now, "failed", 300000, 5000).Result()
			},
			wantReply: []any{int64(0), int64(1010000), "b", "b", "c"}, wantState: with(open, "interval", "10000", "nextProbe", "1010000", "failedAt", "1000000"),
			wantLine: []string{"b", "c", "d"}, wantJoined: map[string]string{"b": "990000", "c": "995000", "d": "999000"},
		},
		{
			name: "a probe succeeds: closed", state: with(open, "state", "half_open", "probe", "a"), line: []string{"b"},
			run: func(s, l, p, j string) (any, error) {
				return epProbedScript.Run(ctx, rdb, []string{s, l, j}, "a", now, "ok", 300000, 0).Result()
			},
			wantReply: []any{int64(1)}, wantState: with(open, "state", "closed", "since", "1000000"), wantLine: []string{"b"},
		},
		{
			name: "another request's end is no probe's", state: with(open, "state", "half_open", "probe", "a"), line: nil,
			run: func(s, l, p, j string) (any, error) {
				return epProbedScript.Run(ctx, rdb, []string{s, l, j}, "x", now, "ok", 300000, 0).Result()
			},
			wantReply: []any{int64(-1)}, wantState: with(open, "state", "half_open", "probe", "a"), wantLine: nil,
		},
		{
			name: "the first waiter canceled: the next is woken for the probe", state: open, line: []string{"a", "b"},
			run: func(s, l, p, j string) (any, error) {
				return epCancelScript.Run(ctx, rdb, []string{s, l, p, j}, "a").Result()
			},
			wantReply: []any{"b", "1005000"}, wantState: open, wantLine: []string{"b"},
		},
		{
			name: "a later waiter canceled: nobody is woken", state: open, line: []string{"a", "b"},
			run: func(s, l, p, j string) (any, error) {
				return epCancelScript.Run(ctx, rdb, []string{s, l, p, j}, "b").Result()
			},
			wantReply: []any{}, wantState: open, wantLine: []string{"a"},
		},
		{
			name: "take a closed endpoint's waiters in order", state: map[string]string{"state": "closed"}, line: []string{"a", "b", "c"},
			run: func(s, l, p, j string) (any, error) {
				return epTakeScript.Run(ctx, rdb, []string{s, l, p, j}, 2).Result()
			},
			wantReply: []any{"a", "1", "", "b", "2", ""}, wantState: map[string]string{"state": "closed"}, wantLine: []string{"c"},
		},
		{
			name: "take none of an endpoint opened again", state: open, line: []string{"a"},
			run: func(s, l, p, j string) (any, error) {
				return epTakeScript.Run(ctx, rdb, []string{s, l, p, j}, 2).Result()
			},
			wantReply: []any{}, wantState: open, wantLine: []string{"a"},
		},
		{
			name: "wait with parallelism: its key kept for the close", state: open, line: []string{"a"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "b", now, 60000, 6000, 10, "key one", 0).Result()
			},
			wantReply: []any{int64(1), int64(1005000), int64(990000), int64(0), int64(0)}, wantState: open, wantLine: []string{"a", "b"},
			wantPlaces: map[string]string{"b": "key one"}, wantJoined: map[string]string{"b": "1000000"},
		},
		{
			name: "go through a closed endpoint: its kept key forgotten", state: map[string]string{"state": "closed"}, line: []string{"a"},
			places: map[string]string{"a": "k", "b": "k"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "k", 0).Result()
			},
			wantReply: []any{int64(0)}, wantState: map[string]string{"state": "closed"}, wantLine: nil,
			wantPlaces: map[string]string{"b": "k"},
		},
		{
			name: "take waiters with their places and keys", state: map[string]string{"state": "closed"}, line: []string{"a", "b", "c"},
			places: map[string]string{"a": "k", "c": "k"},
			run: func(s, l, p, j string) (any, error) {
				return epTakeScript.Run(ctx, rdb, []string{s, l, p, j}, 2).Result()
			},
			wantReply: []any{"a", "1", "k", "b", "2", ""}, wantState: map[string]string{"state": "closed"}, wantLine: []string{"c"},
			wantPlaces: map[string]string{"c": "k"},
		},
		{
			name: "a canceled waiter's kept key forgotten", state: open, line: []string{"a", "b"},
			places: map[string]string{"a": "k", "b": "j"},
			run: func(s, l, p, j string) (any, error) {
				return epCancelScript.Run(ctx, rdb, []string{s, l, p, j}, "b").Result()
			},
			wantReply: []any{}, wantState: open, wantLine: []string{"a"},
			wantPlaces: map[string]string{"a": "k"},
		},
		{
			name: "enter an endpoint open long ago: wait, the end counted from now and after the next probe", state: open, line: nil,
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 5000).Result()
			},
			wantReply: []any{int64(1), int64(1005000), int64(990000), int64(1), int64(1005000)}, wantState: open,
			wantLine: []string{"a"}, wantJoined: map[string]string{"a": "1000000"},
		},
		{
			name: "a waiter back after waiting long, no probe failed since it began: waits, for the next failed probe to wake it", state: open,
			line: []string{"a"}, joined: map[string]string{"a": "990000"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 5000).Result()
			},
			wantReply: []any{int64(1), int64(1005000), int64(990000), int64(1), int64(0)}, wantState: open,
			wantLine: []string{"a"}, wantJoined: map[string]string{"a": "990000"},
		},
		{
			name:  "a waiter back after waiting long, a probe failed since it began: ends, the next woken for the probe",
			state: with(open, "failedAt", "999000"), line: []string{"a", "b"}, joined: map[string]string{"a": "990000", "b": "999500"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 5000).Result()
			},
			wantReply: []any{int64(3), int64(990000), "b", "1005000"}, wantState: with(open, "failedAt", "999000"),
			wantLine: []string{"b"}, wantJoined: map[string]string{"b": "999500"},
		},
		{
			name: "a waiter of an endpoint an operator opened ends on time, with no probe", state: with(open, "by", "operator"),
			line: []string{"a"}, joined: map[string]string{"a": "990000"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 5000).Result()
			},
			wantReply: []any{int64(3), int64(990000)}, wantState: with(open, "by", "operator"), wantLine: nil,
		},
		{
			name: "a waiter of a half-open endpoint looks at its end once it has waited", state: with(open, "state", "half_open", "probe", "x", "probeUntil", "1003000"),
			line: nil,
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 1000).Result()
			},
			wantReply: []any{int64(1), int64(1003000), int64(990000), int64(1), int64(1001000)},
			wantState: with(open, "state", "half_open", "probe", "x", "probeUntil", "1003000"),
			wantLine:  []string{"a"}, wantJoined: map[string]string{"a": "1000000"},
		},
		{
			name: "the probe goes: its wait forgotten", state: with(open, "nextProbe", "1000000"), line: []string{"a"},
			joined: map[string]string{"a": "990000"},
			run: func(s, l, p, j string) (any, error) {
				return epEnterScript.Run(ctx, rdb, []string{s, l, p, j}, "a", now, 60000, 6000, 10, "", 5000).Result()
			},
			wantReply: []any{int64(2)}, wantState: with(open, "nextProbe", "1000000", "state", "half_open", "probe", "a", "probeUntil", "1006000"),
		},
	} {
		state, line, keys, joined := keys.FlowEndpoint(fmt.Sprint("https://case-", i, ":443"))
		if len(c.state) > 0 {
			rdb.HSet(ctx, state, c.state)
		}
		if len(c.places) > 0 {
			rdb.HSet(ctx, keys, c.places)
		}
		for id, at := range c.joined {
			score, _ := strconv.ParseFloat(at, 64)
			rdb.ZAdd(ctx, joined, redis.Z{Score: score, Member: id})
		}
		for j, id := range c.line {
			rdb.ZAdd(ctx, line, redis.Z{Score: float64(j + 1), Member: id})
		}
		reply, err := c.run(state, line, keys, joined)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if diff := cmp.Diff(c.wantReply, reply); diff != "" {
			t.Errorf("%s: reply (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(c.wantState, rdb.HGetAll(ctx, state).Val()); diff != "" {
			t.Errorf("%s: state (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(c.wantLine, rdb.ZRange(ctx, line, 0, -1).Val(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: line (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(c.wantPlaces, rdb.HGetAll(ctx, keys).Val(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: kept keys (-want +got):\n%s", c.name, diff)
		}
		began := map[string]string{}
		for _, z := range rdb.ZRangeWithScores(ctx, joined, 0, -1).Val() {
			began[z.Member.(string)] = strconv.FormatFloat(z.Score, 'f', -1, 64)
		}
		if diff := cmp.Diff(c.wantJoined, began, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: began to wait (-want +got):\n%s", c.name, diff)
		}
	}
}
