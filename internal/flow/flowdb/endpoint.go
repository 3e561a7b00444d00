package flowdb

// An endpoint's breaker as the gate meets it: its state, its line of
// waiters, its probe.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
)

var (
	epOpenScript     = script("ep_open")
	epEnterScript    = script("ep_enter", "ep_hand_on")
	epProbedScript   = script("ep_probed")
	epTakeScript     = script("ep_take")
	epCloseScript    = script("ep_close")
	epCancelScript   = script("ep_cancel", "ep_hand_on")
	epHandOpenScript = script("ep_hand_open")
)

// The endpoint states, as stored.
const (
	EndpointClosed   = "closed"
	EndpointOpen     = "open"
	EndpointHalfOpen = "half_open"
)

// EndpointIO reads and writes the endpoints' breakers.
type EndpointIO struct{ rdb redis.UniversalClient }

// ep_enter.lua's answers.
const (
	EnterGo    = 0 // pass
	enterWait  = 1 // wait in the endpoint's line
	EnterProbe = 2 // go as the endpoint's probe
	EnterEnd   = 3 // end: it waited too long
)

// Entered is ep_enter.lua's answer, read.
type Entered struct {
	Code    int64
	Expired bool // EnterGo: the endpoint had no state
	// enterWait: when the next probe goes (zero: never, an operator's),
	// whether it is first in line, and when it looks at whether it ends
	// (zero: not on a timer; the close, or a probe that fails, wakes it).
	NextProbe, EndAt time.Time
	Head             bool
	// EnterEnd: since when it waited, and the waiter to wake at NextAt
	// for the next probe in its place ("": none).
	Began  time.Time
	Next   string
	NextAt time.Time
}

// Enter runs endpoint name's gate for id at now: it passes, goes as the
// probe (leased for lease), waits in the line at place (with its
// parallelism key parKey, or ""), or ends once it waited failAfter.
func (e EndpointIO) Enter(ctx context.Context, name, id string, now time.Time, ttl, lease time.Duration, place time.Time, parKey string, failAfter time.Duration) (Entered, error) {
	state, line, keys, joined := keys.FlowEndpoint(name)
	res, err := epEnterScript.Run(ctx, e.rdb, []string{state, line, keys, joined}, id, now.UnixMilli(),
		ttl.Milliseconds(), lease.Milliseconds(), place.UnixMilli(), parKey, failAfter.Milliseconds()).Slice()
	if err != nil {
		return Entered{}, err
	}
	return readEnter(res)
}

// readEnter reads ep_enter.lua's reply, refusing one it does not know.
func readEnter(res []any) (Entered, error) {
	var e Entered
	ints := make([]int64, 0, len(res))
	for _, v := range res {
		switch v := v.(type) {
		case int64:
			ints = append(ints, v)
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil && len(ints) != 2 {
				return e, fmt.Errorf("unexpected reply %v", res)
			}
			ints = append(ints, n)
		default:
			return e, fmt.Errorf("unexpected reply %v", res)
		}
	}
	ms := func(i int64) time.Time {
		if i <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(i)
	}
	switch {
	case len(ints) >= 1 && len(ints) <= 2 && ints[0] == EnterGo:
		e.Code, e.Expired = EnterGo, len(ints) == 2
	case len(ints) == 1 && ints[0] == EnterProbe:
		e.Code = EnterProbe
	case len(ints) == 5 && ints[0] == enterWait:
		e.Code, e.NextProbe, e.Head, e.EndAt = enterWait, ms(ints[1]), ints[3] == 1, ms(ints[4])
	case len(ints) == 2 && ints[0] == EnterEnd:
		e.Code, e.Began = EnterEnd, ms(ints[1])
	case len(ints) == 4 && ints[0] == EnterEnd:
		next, _ := res[2].(string)
		e.Code, e.Began, e.Next, e.NextAt = EnterEnd, ms(ints[1]), next, ms(ints[3])
	default:
		return e, fmt.Errorf("unexpected reply %v", res)
	}
	return e, nil
}

// State is endpoint name's state ("" when it has none: closed).
func (e EndpointIO) State(ctx context.Context, name string) (string, error) {
	state, _, _, _ := keys.FlowEndpoint(name)
	v, err := e.rdb.HGet(ctx, state, "state").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	return v, nil
}

// Unlist drops endpoint name from the list of endpoints not closed.
func (e EndpointIO) Unlist(ctx context.Context, name string) error {
	return e.rdb.HDel(ctx, keys.FlowEndpoints, name).Err()
}

// Probed is what ep_probed.lua answered.
type Probed struct {
	// NoProbe: the request was no probe of the endpoint's (any more).
	NoProbe bool
	// Closed: the probe closed the endpoint.
	Closed bool
	// Else the endpoint stays open: Head ("": none) is its first waiter,
	// to wake at NextProbe, and Ended its waiters to wake now, for their
	// end.
	NextProbe time.Time
	Head      string
	Ended     []string
}

// Probed tells endpoint name how id's probe ended at now: verdict "ok",
// "failed" or "back" (given back by a later gate).
func (e EndpointIO) Probed(ctx context.Context, name, id string, now time.Time, verdict string, probeMax, failAfter time.Duration) (Probed, error) {
	state, line, _, joined := keys.FlowEndpoint(name)
	res, err := epProbedScript.Run(ctx, e.rdb, []string{state, line, joined}, id, now.UnixMilli(), verdict,
		probeMax.Milliseconds(), failAfter.Milliseconds()).Slice()
	if err != nil {
		return Probed{}, err
	}
	code, ok := int64(-2), false
	if len(res) > 0 {
		code, ok = res[0].(int64)
	}
	switch {
	case ok && code == -1:
		return Probed{NoProbe: true}, nil
	case ok && code == 1:
		return Probed{Closed: true}, nil
	case ok && code == 0 && len(res) >= 3:
		next, _ := res[1].(int64)
		p := Probed{NextProbe: time.UnixMilli(next)}
		p.Head, _ = res[2].(string)
		for _, v := range res[3:] {
			if id, _ := v.(string); id != "" {
				p.Ended = append(p.Ended, id)
			}
		}
		return p, nil
	}
	return Probed{}, fmt.Errorf("ep_probed script: unexpected reply %v", res)
}

// Waiter is a waiter taken out of an endpoint's line: its place (ms) and
// its parallelism key ("": none).
type Waiter struct {
	ID, Place, Key string
}

// Take takes up to n first waiters out of closed endpoint name's line
// (none when it opened again).
func (e EndpointIO) Take(ctx context.Context, name string, n int) ([]Waiter, error) {
	state, line, keys, joined := keys.FlowEndpoint(name)
	taken, err := epTakeScript.Run(ctx, e.rdb, []string{state, line, keys, joined}, n).StringSlice()
	if err != nil {
		return nil, err
	}
	if len(taken)%3 != 0 {
		return nil, fmt.Errorf("endpoint take script: unexpected reply %v", taken)
	}
	out := make([]Waiter, 0, len(taken)/3)
	for i := 0; i < len(taken); i += 3 {
		out = append(out, Waiter{ID: taken[i], Place: taken[i+1], Key: taken[i+2]})
	}
	return out, nil
}

// Cancel takes canceled id out of endpoint name's line; when it was the
// waiter to be woken for the next probe, next is to be, at at (ok).
func (e EndpointIO) Cancel(ctx context.Context, name, id string) (next string, at time.Time, ok bool, err error) {
	state, line, keys, joined := keys.FlowEndpoint(name)
	res, err := epCancelScript.Run(ctx, e.rdb, []string{state, line, keys, joined}, id).StringSlice()
	if err != nil {
		return "", time.Time{}, false, err
	}
	if len(res) != 2 {
		return "", time.Time{}, false, nil
	}
	ms, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("endpoint cancel script: unexpected reply %v", res)
	}
	return res[0], time.UnixMilli(ms), true, nil
}
