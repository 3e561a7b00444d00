package selection

import (
	"context"
	"errors"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// Lister reads a page of requests, newest first (record.Lister); the
// statuses a route acts on are the lister's business.
type Lister = record.Lister

// Getter reads one request by id.
type Getter func(ctx context.Context, id string) (*record.Request, error)

// ErrFull is what fn returns when the call's answer is as large as it may
// grow (record.ListBudget of what it keeps): the walk ends there with a
// cursor to go on. Named ids have no cursor: a call naming more than one
// answer holds is refused.
var ErrFull = errors.New("selection: the answer is full")

// Skipper hears of each request a bulk call selected and did not act on,
// with why: a named id that is not there (or not the caller's), a request
// whose status is not the route's (changed meanwhile), one past the
// count, or one fn or the store failed on.
type Skipper func(id string, why error)

// Why a walk passed over what it was asked for.
var (
	// ErrBeyondCount: the call's count was reached before this id.
	ErrBeyondCount = errors.New("beyond the call's count")
	// ErrNoMatch: a named id whose request does not match the filters.
	ErrNoMatch = errors.New("does not match the filters")
	// ErrUntouched is what an error fn returns is (errors.Is) when fn
	// did nothing to its request (the caller's rate limit was spent, say):
	// the walk stops before that request, which is not skipped, and the
	// next call begins with it.
	ErrUntouched = errors.New("stopped before this request")
)

// Walk calls fn on each request s selects, at most s.Count of them, and
// returns the cursor the next call continues from ("" when nothing is
// left). Named ids (or a messageId filter's) are read with get, each
// once; otherwise list is read from s.Cursor on and every request is
// tested with Match. keep says which requests the route acts on (nil) and
// why it passes over the others (a status, say).
//
// A list (skip nil) passes over what it does not show and stops at the
// first error, with no cursor. A bulk call (skip set) hears of every
// request it selected and did not act on, with the reason. fn decides
// what an error on one request means: it calls skip itself and returns
// nil to go on, or returns the error to stop the walk (the store is
// unavailable, say). Walk then skips that request and every named id not
// reached yet with that error, and returns it with a cursor from which
// the next call goes on; what was done before it stays done and the
// caller reports it. An error that is ErrUntouched is not skipped: the
// cursor is before its request, which the next call begins with. The
// list is read through record.Reading, so a call examines at most
// record.ScanBudget entries whatever its filters match.
func (s Selection) Walk(ctx context.Context, list Lister, get Getter, keep func(*record.Request) error, fn func(*record.Request) error, skip Skipper) (string, error) {
	if s.Named || len(s.Values[MessageID]) > 0 {
		return s.walkNamed(ctx, get, keep, fn, skip)
	}
	done := 0
	skippedAt := "" // the request fn's error stopped at, skipped
	rd := record.Reading{List: list, Cursor: s.Cursor, At: func(r *record.Request) string { return r.ID },
		Want: func() int { return min(max(2*(s.Count-done), 50), 500) }}
	next, err := rd.Read(ctx, func(r *record.Request) (bool, error) {
		if !s.Match(r) {
			return false, nil
		}
		if why := keep(r); why != nil {
			if skip != nil {
				skip(r.ID, why) // listed as the route's, and changed meanwhile
			}
			return false, nil
		}
		done++
		switch err := fn(r); {
		case errors.Is(err, ErrFull):
			return true, nil
		case err != nil:
			if skip != nil && !errors.Is(err, ErrUntouched) {
				skip(r.ID, err)
				skippedAt = r.ID
			}
			return false, err
		}
		return done == s.Count, nil
	})
	switch {
	case err == nil:
		return next, nil
	case skip == nil:
		return "", err
	case skippedAt != "":
		return skippedAt, err
	}
	return next, err
}

// walkNamed is Walk over named ids.
func (s Selection) walkNamed(ctx context.Context, get Getter, keep func(*record.Request) error, fn func(*record.Request) error, skip Skipper) (string, error) {
	named := s.IDs
	if !s.Named {
		named = s.Values[MessageID] // read those, rather than scan for them
	}
	if skip == nil {
		skip = func(string, error) {}
	}
	seen := map[string]bool{}
	done := 0
	var stop error // once set, every id left is skipped with it
	for _, id := range named {
		if seen[id] || !ids.Valid(id) {
			continue
		}
		seen[id] = true
		if stop != nil {
			skip(id, stop)
			continue
		}
		if done == s.Count {
			skip(id, ErrBeyondCount)
			continue
		}
		r, err := get(ctx, id)
		if errors.Is(err, record.ErrNotFound) {
			skip(id, err)
			continue
		}
		if err != nil {
			skip(id, err)
			stop = err
			continue
		}
		if why := keep(r); why != nil {
			skip(id, why)
			continue
		}
		if !s.Match(r) {
			skip(id, ErrNoMatch)
			continue
		}
		done++
		if err := fn(r); errors.Is(err, ErrFull) {
			return "", errorf("", "the ids named make an answer larger than one call gives (%d MiB); name fewer", record.ListBudget>>20)
		} else if err != nil {
			skip(id, err)
			stop = err
		}
	}
	return "", stop
}
