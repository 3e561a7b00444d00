package record

// The filtered list of requests (GET /requests and the bulk calls by
// filter): one index read in id order (or finish order), the other
// filters checked on the records it names, in pages whose scan is
// bounded so that a page never costs a full scan.

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/redact"
	"github.com/retryd/retryd/internal/tenant"
)

// Filter selects requests: every field set must match. Times are
// inclusive bounds; zero is open.
type Filter struct {
	// Statuses are the statuses selected (none: any).
	Statuses StatusSet
	// WaitingFor are the waiting reasons selected (none: any): an
	// unfinished request that waits for one of them.
	WaitingFor WaitingSet
	// Host is a host name (any port) or host:port (that port; a URL
	// without a port has its scheme's), in lower case.
	Host         string
	Method       string
	FailureClass string
	// StatusCode is the last attempt's.
	StatusCode               int
	CreatedFrom, CreatedTo   time.Time
	FinishedFrom, FinishedTo time.Time
	Label                    string
	// URLContains matches the URL as the API shows it (secret query
	// values masked), in any case.
	URLContains string
}

// FilterError is a filter the store cannot serve from an index, or a
// contradiction; Field names the filter.
type FilterError struct {
	Field   string
	Message string
}

func (e *FilterError) Error() string { return e.Message }

// The filters that pick the index a page reads. method and urlContains
// are only checked on the requests those select.
const (
	narrowing = "host, label, failureClass, statusCode, createdFrom/createdTo or finishedFrom/finishedTo"
	// byDestination are those a URL can be searched within.
	byDestination = "host or label"
)

// Check refuses a filter that no index serves: a page would have to
// scan every request for it. It also refuses empty ranges.
func (f Filter) Check() error {
	if f.URLContains != "" && f.Host == "" && f.Label == "" {
		return &FilterError{Field: "urlContains", Message: "urlContains is matched on the requests another filter selects, " +
			"and on its own would scan every request: add " + byDestination + " to say whose URLs to search"}
	}
	if f.Method != "" && !f.narrows() {
		return &FilterError{Field: "method", Message: "method is checked on the requests another filter selects, " +
			"and on its own would scan every request: add " + narrowing}
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && f.CreatedFrom.After(f.CreatedTo) {
		return &FilterError{Field: "createdFrom", Message: "createdFrom is after createdTo"}
	}
	if !f.FinishedFrom.IsZero() && !f.FinishedTo.IsZero() && f.FinishedFrom.After(f.FinishedTo) {
		return &FilterError{Field: "finishedFrom", Message: "finishedFrom is after finishedTo"}
	}
	return nil
}

func (f Filter) narrows() bool {
	return f.Host != "" || f.Label != "" || f.FailureClass != "" || f.StatusCode != 0 || f.created() || f.finished()
}

func (f Filter) created() bool  { return !f.CreatedFrom.IsZero() || !f.CreatedTo.IsZero() }
func (f Filter) finished() bool { return !f.FinishedFrom.IsZero() || !f.FinishedTo.IsZero() }

// Empty reports whether f selects every request.
func (f Filter) Empty() bool { return f == Filter{} }

// Match reports whether r is one f selects.
func (f Filter) Match(r *Request) bool {
	switch {
	case f.Statuses != 0 && !f.Statuses.Has(r.Status),
		f.WaitingFor != 0 && (r.Status.Terminal() || !f.WaitingFor.Has(r.WaitingFor)),
		f.Host != "" && !(DLQFilter{Host: f.Host}).Match(r),
		f.Method != "" && !strings.EqualFold(r.Method, f.Method),
		f.FailureClass != "" && r.FailureClass != f.FailureClass,
		f.StatusCode != 0 && r.LastStatusCode != f.StatusCode,
		!f.CreatedFrom.IsZero() && r.CreatedAt.Before(f.CreatedFrom.Truncate(time.Millisecond)),
		!f.CreatedTo.IsZero() && r.CreatedAt.After(f.CreatedTo),
		f.finished() && (!r.Status.Terminal() || r.CompletedAt.IsZero()),
		!f.FinishedFrom.IsZero() && r.CompletedAt.Before(f.FinishedFrom.Truncate(time.Millisecond)),
		!f.FinishedTo.IsZero() && r.CompletedAt.After(f.FinishedTo),
		f.Label != "" && !slices.Contains(r.Labels(), f.Label),
		f.URLContains != "" && !strings.Contains(strings.ToLower(redact.URL(r.URL)), strings.ToLower(f.URLContains)):
		return false
	}
	return true
}

// hostName is the host part of f.Host, the key of its index.
func (f Filter) hostName() string {
	h := f.Host
	if name, _, err := net.SplitHostPort(h); err == nil {
		h = name
	}
	return strings.Trim(h, "[]")
}

// needsSpec reports whether checking f reads what the client sent (the
// spec), beyond the record's hash.
func (f Filter) needsSpec() bool {
	return f.Host != "" || f.Method != "" || f.Label != "" || f.URLContains != ""
}

// index is one family of index keys, a key per tenant.
type index func(tkeys) string

// candidate is one or more families of index keys whose union holds
// every request f selects (several statuses are several indexes).
type candidate []index

// candidates are the indexes one of which a page of f reads, in id order.
func (f Filter) candidates() []candidate {
	var out []candidate
	if f.Host != "" {
		out = append(out, candidate{func(k tkeys) string { return k.host(f.hostName()) }})
	}
	if f.Label != "" {
		out = append(out, candidate{func(k tkeys) string { return k.label(f.Label) }})
	}
	if f.FailureClass != "" {
		out = append(out, candidate{func(k tkeys) string { return k.failClass(f.FailureClass) }})
	}
	switch {
	case f.StatusCode >= 200 && f.StatusCode < 300:
		// Only a completed request's last attempt succeeded.
		out = append(out, candidate{func(k tkeys) string { return k.index(Completed) }})
	case f.StatusCode != 0:
		out = append(out, candidate{func(k tkeys) string { return k.failCode(f.StatusCode) }})
	}
	statuses := f.Statuses
	if f.WaitingFor != 0 {
		// Only an unfinished request waits.
		statuses = statuses.orAll() & StatusesOf(Pending, Retrying)
	}
	if statuses != 0 {
		var c candidate
		for _, st := range statuses.List() {
			c = append(c, func(k tkeys) string { return k.index(st) })
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		// Every request is in one status index: their union.
		var c candidate
		for _, st := range Statuses {
			c = append(c, func(k tkeys) string { return k.index(st) })
		}
		out = append(out, c)
	}
	return out
}

// Find returns the requests of scope that f selects, newest first, after
// cursor (a page's NextCursor), at most limit of them. Attempts are not
// loaded. A page ends early, with a cursor, once it has examined what
// scan allows (nil: ScanBudget) or loaded ListBudget. With a finished
// range the order is by finish time (the finished index), else by
// creation. It refuses a filter Check refuses.
func (s *Store) Find(ctx context.Context, scope tenant.Scope, f Filter, cursor string, limit int, scan *Scan) (*Page, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	pos, err := parseCursor(cursor, f.finished())
	if err != nil {
		return nil, err
	}
	page := &Page{Requests: []*Request{}}
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil || len(tenants) == 0 {
		return page, err
	}
	var src source
	if f.finished() {
		src = s.byFinish(tenants, f)
	} else {
		src, err = s.byID(ctx, tenants, f)
		if err != nil {
			return nil, err
		}
	}
	return s.scan(ctx, scope, f, src, pos, limit, scan.orNew())
}

// position is where a page starts: after id (and, in finish order, its
// finish time).
type position struct {
	id    string
	score int64
}

// cursor is the NextCursor of a page that ended at p: the id, and in
// finish order its finish time after a dot.
func (p position) cursor(byFinish bool) string {
	if !byFinish {
		return p.id
	}
	return p.id + "." + strconv.FormatInt(p.score, 10)
}

// CursorAt is the cursor of a list of f that goes on after r.
func (f Filter) CursorAt(r *Request) string {
	return position{id: r.ID, score: r.CompletedAt.UnixMilli()}.cursor(f.finished())
}

// ErrCursor: the cursor is not one this list returned.
var ErrCursor = &FilterError{Field: "cursor", Message: "cursor is not one this list returned (a list with finishedFrom or finishedTo " +
	"has cursors of its own: keep the filters of the page that gave it)"}

func parseCursor(c string, byFinish bool) (position, error) {
	if c == "" {
		return position{}, nil
	}
	id, ms, dotted := strings.Cut(c, ".")
	if !ids.Valid(id) || dotted != byFinish {
		return position{}, ErrCursor
	}
	p := position{id: id}
	if byFinish {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n < 0 {
			return position{}, ErrCursor
		}
		p.score = n
	}
	return p, nil
}

// source reads the entries of a page's index after a position, newest
// first, merged over tenants and partitions.
type source struct {
	keys     [][]string // by partition
	byFinish bool
	// lo and hi bound the entries (ids in id order, ms in finish order).
	lo, hi string
}

// byID is the id-ordered source of f: of its candidate indexes, the one
// with the fewest entries in f's created range.
func (s *Store) byID(ctx context.Context, tenants []string, f Filter) (source, error) {
	src := source{lo: "-", hi: "+"}
	if !f.CreatedFrom.IsZero() {
		src.lo = "[" + ids.Prefix(f.CreatedFrom)
	}
	if !f.CreatedTo.IsZero() {
		src.hi = "(" + ids.Prefix(f.CreatedTo.Add(time.Millisecond))
	}
	cands := f.candidates()
	keysOf := func(c candidate) [][]string {
		parts := s.each()
		out := make([][]string, len(parts))
		for i, k := range parts {
			for _, t := range tenants {
				for _, ix := range c {
					out[i] = append(out[i], ix(k.of(t)))
				}
			}
		}
		return out
	}
	if len(cands) == 1 {
		src.keys = keysOf(cands[0])
		return src, nil
	}
	pipe := s.rdb.Pipeline()
	counts := make([][]*redis.IntCmd, len(cands))
	for i, ix := range cands {
		for _, key := range slices.Concat(keysOf(ix)...) {
			counts[i] = append(counts[i], pipe.ZLexCount(ctx, key, src.lo, src.hi))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return src, wrap(err)
	}
	best, fewest := 0, int64(-1)
	for i, cs := range counts {
		var n int64
		for _, c := range cs {
			n += c.Val()
		}
		if fewest < 0 || n < fewest {
			best, fewest = i, n
		}
	}
	src.keys = keysOf(cands[best])
	return src, nil
}

// byFinish is the finish-ordered source of f.
func (s *Store) byFinish(tenants []string, f Filter) source {
	src := source{byFinish: true, lo: "-inf", hi: "+inf"}
	if !f.FinishedFrom.IsZero() {
		src.lo = strconv.FormatInt(f.FinishedFrom.UnixMilli(), 10)
	}
	if !f.FinishedTo.IsZero() {
		src.hi = strconv.FormatInt(f.FinishedTo.UnixMilli(), 10)
	}
	for _, k := range s.each() {
		var ks []string
		for _, t := range tenants {
			ks = append(ks, k.of(t).finished())
		}
		src.keys = append(src.keys, ks)
	}
	return src
}

// next reads up to n entries after p, newest first.
func (s *Store) next(ctx context.Context, src source, p position, n int) ([]position, error) {
	if !src.byFinish {
		hi := src.hi
		if p.id != "" && (hi == "+" || "("+p.id < hi) {
			hi = "(" + p.id
		}
		ids, err := s.lexNewest(ctx, src.keys, hi, src.lo, int64(n))
		if err != nil {
			return nil, wrap(err)
		}
		out := make([]position, 0, len(ids))
		for _, id := range ids {
			out = append(out, position{id: id})
		}
		return out, nil
	}
	hi := src.hi
	keys := slices.Concat(src.keys...)
	pipe := s.rdb.Pipeline()
	var same []*redis.ZSliceCmd
	if p.id != "" {
		// Entries finished in the cursor's millisecond, after it in
		// member order, then those finished before.
		if src.hi == "+inf" || p.score <= atoi64(src.hi) {
			at := strconv.FormatInt(p.score, 10)
			hi = "(" + at
			for _, key := range keys {
				same = append(same, pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: at, Stop: at, ByScore: true}))
			}
		}
	}
	cmds := make([]*redis.ZSliceCmd, len(keys))
	for i, key := range keys {
		cmds[i] = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: hi, Stop: src.lo, ByScore: true, Rev: true, Count: int64(n)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap(err)
	}
	var all []position
	for _, c := range same {
		for _, z := range c.Val() {
			if e := entryOf(z); e.id < p.id {
				all = append(all, e)
			}
		}
	}
	for _, c := range cmds {
		for _, z := range c.Val() {
			all = append(all, entryOf(z))
		}
	}
	slices.SortFunc(all, func(a, b position) int {
		if a.score != b.score {
			return int(b.score - a.score)
		}
		return strings.Compare(b.id, a.id)
	})
	// A request finished twice (redriven) may show under two entries
	// until the stale one goes: the record decides which is current.
	all = slices.CompactFunc(all, func(a, b position) bool { return a == b })
	return all[:min(len(all), n)], nil
}

func entryOf(z redis.Z) position {
	m, _ := z.Member.(string)
	return position{id: parseFinishedMember(m).id, score: int64(z.Score)}
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// scan reads src from p on, checks each record against f and scope, and
// returns a page of at most limit, ending early (with a cursor) once sc
// is spent or ListBudget loaded.
func (s *Store) scan(ctx context.Context, scope tenant.Scope, f Filter, src source, p position, limit int, sc *Scan) (*Page, error) {
	page := &Page{Requests: []*Request{}}
	loaded := 0
	if sc.Spent() {
		page.NextCursor = p.cursor(src.byFinish)
		return page, nil
	}
	// Records are read in chunks of about 1 MiB (of 10 to 200 records),
	// starting small where every spec is read, so that a page of large
	// bodies stops near ListBudget.
	chunk := 200
	if f.needsSpec() {
		chunk = listChunk
	}
	// Entries a filter may reject are read ahead, 200 at a time. With no
	// filter every entry is a match (but for a record gone): a page's
	// worth is enough, from each of the five status indexes it reads.
	ahead := max(limit*2, 200)
	if f.Empty() {
		ahead = limit + 1
	}
	for {
		want := min(ahead, sc.Left()+1)
		batch, err := s.next(ctx, src, p, want)
		if err != nil {
			return nil, err
		}
		for start := 0; start < len(batch); {
			part := batch[start:min(start+chunk, len(batch), start+sc.Left())]
			found, examined, bytes, err := s.check(ctx, scope, f, src, part, ListBudget-loaded)
			if err != nil {
				return nil, err
			}
			loaded += bytes
			chunk = max(10, min(200, (1<<20)*len(part)/max(bytes, 1)))
			for i, e := range part[:examined] {
				sc.use(1)
				p = e
				if r := found[i]; r != nil {
					page.Requests = append(page.Requests, r)
				}
				last := start+i == len(batch)-1 && len(batch) < want
				if len(page.Requests) == limit || sc.Spent() || loaded >= ListBudget {
					if !last {
						page.NextCursor = p.cursor(src.byFinish)
					}
					return page, nil
				}
			}
			start += examined
		}
		if len(batch) < want {
			return page, nil
		}
	}
}

// probeFields are the hash fields Filter.Match reads.
var probeFields = []string{fStatus, fTenant, fCreatedAt, fCompletedAt, fFailureClass, fLastStatusCode, fWaitingFor}

// check reads what f needs of the records of entries (a few hash
// fields, and the spec where f needs it) and returns, at each entry's
// place, its full request when f and scope select it (nil otherwise),
// how many entries it examined (all, unless loading the selected ones
// took more than allow bytes) and the bytes it read. Entries of records
// gone are passed over; the sweeper removes them.
func (s *Store) check(ctx context.Context, scope tenant.Scope, f Filter, src source, entries []position, allow int) ([]*Request, int, int, error) {
	pipe := s.rdb.Pipeline()
	hs := make([]*redis.SliceCmd, len(entries))
	specs := make([]*redis.StringCmd, len(entries))
	for i, e := range entries {
		k := s.k(e.id)
		hs[i] = pipe.HMGet(ctx, k.req(e.id), probeFields...)
		if f.needsSpec() {
			specs[i] = pipe.Get(ctx, k.spec(e.id))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, 0, wrap(err)
	}
	out := make([]*Request, len(entries))
	bytes := 0
	var selected []int
	for i, e := range entries {
		h := make(map[string]string, len(probeFields))
		for j, v := range hs[i].Val() {
			if v, ok := v.(string); ok {
				h[probeFields[j]] = v
				bytes += len(v)
			}
		}
		spec := ""
		if specs[i] != nil {
			spec = specs[i].Val()
			bytes += len(spec)
		}
		if h[fStatus] == "" {
			continue
		}
		r := decode(e.id, h, spec)
		if src.byFinish && r.CompletedAt.UnixMilli() != e.score {
			continue // a stale entry of a request finished again since
		}
		if f.Match(r) && scope.Has(r.Tenant) {
			selected = append(selected, i)
		}
	}
	// The selected ones are read in full, a chunk at a time.
	for start := 0; start < len(selected); start += listChunk {
		if start > 0 && bytes >= allow {
			// Full: the entries from this one on are the next page's.
			return out, selected[start], bytes, nil
		}
		part := selected[start:min(start+listChunk, len(selected))]
		full, specs, err := s.loadMany(ctx, idsOf(entries, part))
		if err != nil {
			return nil, 0, 0, err
		}
		for j, i := range part {
			bytes += storedSize(full[j], specs[j])
			if len(full[j]) > 0 {
				out[i] = decode(entries[i].id, full[j], specs[j])
			}
		}
	}
	return out, len(entries), bytes, nil
}

func idsOf(entries []position, at []int) []string {
	out := make([]string, len(at))
	for j, i := range at {
		out[j] = entries[i].id
	}
	return out
}
