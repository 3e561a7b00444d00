package record

// The one reader of every list the API serves (GET /requests, the DLQ,
// /v2/events and /v2 messages, and the bulk calls with their dry runs):
// whatever a call's filters match, it reads at most ScanBudget index
// entries, and when it stops early it returns a cursor to go on from. A
// page may then hold fewer requests than asked for, or none.

import "context"

// ScanBudget bounds the index entries one call examines, over all the
// pages it reads: a filter that matches nothing in a long history costs a
// call this much, and the caller follows the cursor for more.
const ScanBudget = 2000

// Scan is what one call may still examine of the indexes. The store's
// lists take one and stop, with a cursor, once it is spent; a nil Scan is
// a fresh ScanBudget for that one page.
type Scan struct {
	left, read int
}

// NewScan is a call's allowance: ScanBudget entries.
func NewScan() *Scan { return &Scan{left: ScanBudget} }

// orNew is s, or a fresh allowance for a page read on its own.
func (s *Scan) orNew() *Scan {
	if s == nil {
		return NewScan()
	}
	return s
}

// Left is how many entries may still be examined.
func (s *Scan) Left() int { return s.left }

// Read is how many entries were examined.
func (s *Scan) Read() int { return s.read }

// Spent reports whether nothing more may be examined.
func (s *Scan) Spent() bool { return s.left <= 0 }

// use counts n entries examined.
func (s *Scan) use(n int) {
	s.left -= n
	s.read += n
}

// Lister reads one page of a list: up to n requests after cursor,
// newest first, examining no more entries than scan allows; a page that
// stops early has a NextCursor.
type Lister func(ctx context.Context, scan *Scan, cursor string, n int) (*Page, error)

// Reading is one call's walk of a list.
type Reading struct {
	// List reads a page.
	List Lister
	// Cursor is where the call starts ("" for the newest).
	Cursor string
	// Want is how many requests the next page should hold.
	Want func() int
	// At is the cursor of a list that goes on after r.
	At func(r *Request) string
	// Scan is the call's allowance (nil: NewScan).
	Scan *Scan
}

// Read calls fn on each request of the list from rd.Cursor on, until fn
// says stop, the list ends or the call's Scan is spent, and returns the
// cursor the next call goes on from ("" when the list has ended). An
// error from fn stops the read before that request: the cursor returned
// is the one the call had reached before it.
func (rd Reading) Read(ctx context.Context, fn func(r *Request) (stop bool, err error)) (string, error) {
	scan := rd.Scan.orNew()
	cursor := rd.Cursor
	for {
		page, err := rd.List(ctx, scan, cursor, max(rd.Want(), 1))
		if err != nil {
			return cursor, err
		}
		for i, r := range page.Requests {
			stop, err := fn(r)
			if err != nil {
				return cursor, err
			}
			cursor = rd.At(r)
			if stop {
				if i == len(page.Requests)-1 && page.NextCursor == "" {
					return "", nil
				}
				return cursor, nil
			}
		}
		if page.NextCursor == "" {
			return "", nil
		}
		cursor = page.NextCursor
		if scan.Spent() {
			return cursor, nil
		}
	}
}
