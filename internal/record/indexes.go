package record

// The list filters' indexes: what each request adds, and how its entries
// go when its status changes or its record expires.

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// memberSep separates the parts of a finished-index member. Control
// characters are refused in hosts, labels and classes, so none holds it.
const memberSep = "\x1f"

// finishedMember is request id's entry in the finished index: the id, its
// host, its last failure class and status code (failIndexes), and its
// labels. A record gone (expired by a TTL an earlier version set) can no
// longer be read, so its entry carries what names every other index entry
// of it: the sweeper removes them all from it (TrimIndexes), and deletes
// with them the requests past their retention, reading nothing but the
// entry and the record's status and finish time.
func finishedMember(id, host, class, code string, labels []string) string {
	return strings.Join(append([]string{id, host, class, code}, labels...), memberSep)
}

// indexEntries are the keys that hold a request's entries, as its
// finished-index member names them.
type indexEntries struct {
	id, host, class, code string
	labels                []string
}

func parseFinishedMember(m string) indexEntries {
	p := strings.Split(m, memberSep)
	for len(p) < 4 {
		p = append(p, "")
	}
	return indexEntries{id: p[0], host: p[1], class: p[2], code: p[3], labels: p[4:]}
}

// keys are the lex-ordered index keys of tenant tk holding e's id.
func (e indexEntries) keys(tk tkeys) []string {
	out := []string{tk.host(e.host)}
	for _, l := range e.labels {
		out = append(out, tk.label(l))
	}
	if e.class != "" {
		out = append(out, tk.failClass(e.class))
	}
	if n, err := strconv.Atoi(e.code); err == nil && e.code != "" {
		out = append(out, tk.failCode(n))
	}
	return out
}

// failIndexes are the failure class and status code a request is indexed
// by: its last attempt's, when that attempt failed; none when it
// succeeded (a 2xx is read from the completed requests instead).
func failIndexes(class string, code int) (string, string) {
	if class == "" {
		return "", ""
	}
	if code == 0 {
		return class, ""
	}
	return class, strconv.Itoa(code)
}

// Labels are r's labels (a QStash message's; none for retryd's own).
func (r *Request) Labels() []string {
	if r.QStash == nil {
		return nil
	}
	return r.QStash.AllLabels()
}

// staticIndexes are the index keys of tenant tk a new request of host and
// labels enters at once, besides the status ones.
func staticIndexes(tk tkeys, host string, labels []string) []string {
	out := []string{tk.host(host)}
	for _, l := range labels {
		out = append(out, tk.label(l))
	}
	return out
}

// indexed is what names a request's index entries, as entriesOf reads it.
type indexed struct {
	indexEntries
	tenant string
	// finishedAt is the score of its finished entry ("" while unfinished).
	finishedAt string
}

// member is r's finished-index member.
func (r indexed) member() string {
	return finishedMember(r.id, r.host, r.class, r.code, r.labels)
}

// entriesOf reads what names request id's index entries: its tenant, its
// host and labels (from the spec), its failure indexes and when it
// finished. A record already gone is ok false.
func (s *Store) entriesOf(ctx context.Context, c redis.Cmdable, id string) (r indexed, ok bool, err error) {
	k := s.k(id)
	pipe := c.Pipeline()
	h := pipe.HMGet(ctx, k.req(id), fStatus, fFailureClass, fLastStatusCode, fCompletedAt, fTenant)
	sp := pipe.Get(ctx, k.spec(id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return r, false, wrap(err)
	}
	v := h.Val()
	if v[0] == nil {
		return r, false, nil
	}
	str := func(x any) string { s, _ := x.(string); return s }
	spec := specFrom(sp.Val())
	r.id, r.host, r.labels = id, hostOf(spec.URL), (&Request{QStash: spec.QStash}).Labels()
	r.class, r.code = failIndexes(str(v[1]), atoi(str(v[2])))
	r.tenant = tenant.Of(str(v[4]))
	if st := Status(str(v[0])); st.Terminal() {
		r.finishedAt = str(v[3])
	}
	return r, true, nil
}

// dropEntries queues the removal of e's entries from the indexes of tenant
// tk: the lex-ordered ones, and its finished entry (member) when given.
func dropEntries(ctx context.Context, pipe redis.Pipeliner, tk tkeys, e indexEntries, member string) {
	for _, key := range e.keys(tk) {
		pipe.ZRem(ctx, key, e.id)
	}
	if member != "" {
		pipe.ZRem(ctx, tk.finished(), member)
	}
}
