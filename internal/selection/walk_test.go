package selection

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
)

// fakeList lists the requests of reqs (newest first) after cursor.
func fakeList(reqs []*record.Request) Lister {
	return func(_ context.Context, _ *record.Scan, cursor string, n int) (*record.Page, error) {
		i := 0
		if cursor != "" {
			for i < len(reqs) && reqs[i].ID != cursor {
				i++
			}
			i++
		}
		end := min(i+n, len(reqs))
		page := &record.Page{Requests: reqs[i:end]}
		if end < len(reqs) {
			page.NextCursor = reqs[end-1].ID
		}
		return page, nil
	}
}

// An answer that is full (ErrFull) ends the walk with a cursor from which
// the next call goes on; named ids, which have no cursor, are refused.
func TestWalkEndsWhereTheAnswerIsFull(t *testing.T) {
	t.Parallel()
	var reqs []*record.Request
	for i := range 10 {
		reqs = append(reqs, &record.Request{ID: "01m8mhyychtfy2pdj6g" + strconv.Itoa(9-i)})
	}
	for _, r := range reqs {
		if !ids.Valid(r.ID) {
			t.Fatalf("test id %s is not valid", r.ID)
		}
	}
	keep := func(*record.Request) error { return nil }
	get := func(_ context.Context, id string) (*record.Request, error) { return &record.Request{ID: id}, nil }
	fullAt := func(n int) (func(*record.Request) error, *[]string) {
		var seen []string
		return func(r *record.Request) error {
			if seen = append(seen, r.ID); len(seen) == n {
				return ErrFull
			}
			return nil
		}, &seen
	}
	fn, seen := fullAt(4)
	cursor, err := Selection{Count: 100}.Walk(context.Background(), fakeList(reqs), get, keep, fn, nil)
	if err != nil || cursor != reqs[3].ID || len(*seen) != 4 {
		t.Fatalf("walk to a full answer: cursor %q, %d seen, %v; want cursor %s after 4", cursor, len(*seen), err, reqs[3].ID)
	}
	fn, seen = fullAt(100)
	if cursor, err = (Selection{Count: 100, Cursor: cursor}).Walk(context.Background(), fakeList(reqs), get, keep, fn, nil); err != nil || cursor != "" || len(*seen) != 6 {
		t.Errorf("the next call: cursor %q, %d seen, %v; want the other 6", cursor, len(*seen), err)
	}
	fn, _ = fullAt(2)
	named := Selection{Named: true, IDs: []string{reqs[0].ID, reqs[1].ID, reqs[2].ID}, Count: 3}
	var e *Error
	if _, err := named.Walk(context.Background(), fakeList(reqs), get, keep, fn, nil); !errors.As(err, &e) {
		t.Errorf("named ids past a full answer: %v, want a selection error", err)
	}
}
