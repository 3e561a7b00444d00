package selection

import (
	"context"
	"errors"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// Lister reads up to n requests, newest first, after cursor; the
// statuses a route acts on are the lister's business.
type Lister func(ctx context.Context, cursor string, n int) (*record.Page, error)

// Getter reads one request by id.
type Getter func(ctx context.Context, id string) (*record.Request, error)

// ErrFull is what fn returns when the call's answer is as large as it may
// grow (record.ListBudget of what it keeps): the walk ends there with a
// cursor to go on. Named ids have no cursor: a call naming more than one
// answer holds is refused.
var ErrFull = errors.New("selection: the answer is full")

// MaxScan bounds the requests one call examines when filters skip most
// of them: the call then ends early, with a cursor to go on.
const MaxScan = 5000

// Walk calls fn on each request s selects, at most s.Count of them, and
// returns the cursor the next call continues from ("" when nothing is
// left). Named ids (or a messageId filter's) are read with get, each once; otherwise list is read
// from s.Cursor on and every request is tested with Match. keep says
// which requests the route acts on (a status, say); the others are
// passed over. An error of fn stops the walk.
func (s Selection) Walk(ctx context.Context, list Lister, get Getter, keep func(*record.Request) bool, fn func(*record.Request) error) (string, error) {
	if s.Named || len(s.Values[MessageID]) > 0 {
		named := s.IDs
		if !s.Named {
			named = s.Values[MessageID] // read those, rather than scan for them
		}
		seen := map[string]bool{}
		done := 0
		for _, id := range named {
			if seen[id] || done == s.Count || !ids.Valid(id) {
				continue
			}
			seen[id] = true
			r, err := get(ctx, id)
			if errors.Is(err, record.ErrNotFound) {
				continue
			}
			if err != nil {
				return "", err
			}
			if !keep(r) || !s.Match(r) {
				continue
			}
			done++
			if err := fn(r); errors.Is(err, ErrFull) {
				return "", errorf("", "the ids named make an answer larger than one call gives (%d MiB); name fewer", record.ListBudget>>20)
			} else if err != nil {
				return "", err
			}
		}
		return "", nil
	}
	cursor, done, scanned := s.Cursor, 0, 0
	for {
		page, err := list(ctx, cursor, min(max(2*(s.Count-done), 50), 500))
		if err != nil {
			return "", err
		}
		for i, r := range page.Requests {
			scanned++
			full := false
			if keep(r) && s.Match(r) {
				done++
				err := fn(r)
				full = errors.Is(err, ErrFull)
				if err != nil && !full {
					return "", err
				}
			}
			if done == s.Count || scanned >= MaxScan || full {
				if i < len(page.Requests)-1 || page.NextCursor != "" {
					return r.ID, nil
				}
				return "", nil
			}
		}
		if page.NextCursor == "" {
			return "", nil
		}
		cursor = page.NextCursor
	}
}
