package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// try is one attempt a test request goes through: its status code (0
// for none), failure class ("" for a success) and the status it leads to.
type try struct {
	code  int
	class string
	next  Status
}

var (
	ok200    = try{200, "", Completed}
	retry503 = try{503, "server_error", Retrying}
	fail503  = try{503, "server_error", Failed}
	fail404  = try{404, "client_error", Failed}
	timedOut = try{0, "timeout", Failed}
)

// findFixture is a store over two partitions with requests made, tried
// and finished at chosen times.
type findFixture struct {
	t     *testing.T
	s     *Store
	rdb   *redis.Client
	parts partition.Set
	ctx   context.Context
	base  time.Time
}

func newFindFixture(t *testing.T) *findFixture {
	t.Helper()
	rdb := redistest.Start(t).Client()
	parts, _ := partition.New(2)
	return &findFixture{t: t, s: NewPartitioned(rdb, time.Hour, parts), rdb: rdb, parts: parts, ctx: context.Background(),
		base: time.Now().Add(-30 * time.Minute).Truncate(time.Millisecond)}
}

// add makes a request at base+at (seconds) to url, as tenant, with
// labels, puts it through tries (one a second after it was made) and
// returns its id.
func (x *findFixture) add(at int, tenantName, method, url string, labels []string, tries ...try) string {
	x.t.Helper()
	now := x.base.Add(time.Duration(at) * time.Second)
	r := newRequest(x.parts.NewID(now, fmt.Sprint(at, url, method)), now)
	r.URL, r.Host, r.Method, r.Tenant = url, hostOf(url), method, tenantName
	if labels != nil {
		r.QStash = &QStash{Labels: labels}
	}
	if _, err := x.s.Create(x.ctx, r, "", nil, CreateOptions{}); err != nil {
		x.t.Fatal(err)
	}
	for i, tr := range tries {
		x.try(r, now.Add(time.Duration(i+1)*time.Second), tr)
	}
	return r.ID
}

// try puts request r through one attempt, at when.
func (x *findFixture) try(r *Request, when time.Time, tr try) {
	x.t.Helper()
	b, err := x.s.Begin(x.ctx, r.ID, when)
	if err != nil || b.State != Started {
		x.t.Fatalf("begin %s: %+v %v", r.ID, b, err)
	}
	outcome := "success"
	if tr.class != "" {
		outcome = "retryable"
	}
	o := Outcome{Attempt: Attempt{N: b.N, StartedAt: when, Outcome: outcome, StatusCode: tr.code, FailureClass: tr.class},
		Status: tr.next, NextAttemptAt: when, Host: r.Host, Tenant: r.Tenant, Labels: r.Labels()}
	if res, err := x.s.Finish(x.ctx, r.ID, o, when); err != nil || res != Recorded {
		x.t.Fatalf("finish %s: %v %v", r.ID, res, err)
	}
}

// find lists every page of f for scope with pages of limit, checking
// that each page's cursor goes on where it ended.
func (x *findFixture) find(scope tenant.Scope, f Filter, limit int) []string {
	x.t.Helper()
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			x.t.Fatal("more than 100 pages")
		}
		page, err := x.s.Find(x.ctx, scope, f, cursor, limit, nil)
		if err != nil {
			x.t.Fatalf("find %+v: %v", f, err)
		}
		if len(page.Requests) > limit {
			x.t.Fatalf("page of %d for limit %d", len(page.Requests), limit)
		}
		for _, r := range page.Requests {
			out = append(out, r.ID)
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

func (x *findFixture) at(sec int) time.Time { return x.base.Add(time.Duration(sec) * time.Second) }

// newestFirst is ids in the order a list by creation gives them.
func newestFirst(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

func TestFindEachFilterAndTheirCombinations(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	all := tenant.Only(tenant.Default)
	aOK := x.add(0, "", "POST", "https://a.com/orders?token=s3cret", nil, ok200)
	aRetry := x.add(10, "", "GET", "https://a.com:8443/orders", []string{"billing"}, retry503)
	aFailed := x.add(20, "", "POST", "https://a.com/refunds", []string{"billing", "eu"}, retry503, fail404)
	bTimeout := x.add(30, "", "PUT", "http://b.org/x", nil, timedOut)
	b503 := x.add(40, "", "POST", "http://b.org/y", []string{"eu"}, fail503)
	bPending := x.add(50, "", "DELETE", "http://b.org/z", nil)
	bCreated201 := x.add(60, "", "POST", "http://b.org/w", nil, try{201, "", Completed})

	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"host", Filter{Host: "a.com"}, newestFirst(aOK, aRetry, aFailed)},
		{"host:port, the scheme's port", Filter{Host: "a.com:443"}, newestFirst(aOK, aFailed)},
		{"host:port, its own port", Filter{Host: "a.com:8443"}, []string{aRetry}},
		{"status", Filter{Statuses: StatusesOf(Failed)}, newestFirst(aFailed, bTimeout, b503)},
		{"failureClass", Filter{FailureClass: "server_error"}, newestFirst(aRetry, b503)},
		{"failureClass of the last attempt only", Filter{FailureClass: "client_error"}, []string{aFailed}},
		{"statusCode of a failure", Filter{StatusCode: 503}, newestFirst(aRetry, b503)},
		{"statusCode of a success", Filter{StatusCode: 200}, []string{aOK}},
		{"statusCode 201", Filter{StatusCode: 201}, []string{bCreated201}},
		{"label", Filter{Label: "eu"}, newestFirst(aFailed, b503)},
		{"created range", Filter{CreatedFrom: x.at(10), CreatedTo: x.at(40)}, newestFirst(aRetry, aFailed, bTimeout, b503)},
		{"created from", Filter{CreatedFrom: x.at(50)}, newestFirst(bPending, bCreated201)},
		{"created to", Filter{CreatedTo: x.at(0)}, []string{aOK}},
		{"finished range", Filter{FinishedFrom: x.at(23), FinishedTo: x.at(41)}, []string{b503, bTimeout}},
		{"finished from, newest finish first", Filter{FinishedFrom: x.at(0)}, []string{bCreated201, b503, bTimeout, aFailed, aOK}},
		{"method needs another filter, and has one", Filter{Method: "post", Host: "b.org"}, newestFirst(b503, bCreated201)},
		{"urlContains within a host", Filter{Host: "a.com", URLContains: "ORDERS"}, newestFirst(aOK, aRetry)},
		{"urlContains never matches a masked secret", Filter{Host: "a.com", URLContains: "s3cret"}, nil},
		{"host and status", Filter{Host: "b.org", Statuses: StatusesOf(Failed)}, newestFirst(bTimeout, b503)},
		{"host and failureClass", Filter{Host: "b.org", FailureClass: "timeout"}, []string{bTimeout}},
		{"label and statusCode", Filter{Label: "billing", StatusCode: 503}, []string{aRetry}},
		{"host, method and created range", Filter{Host: "a.com", Method: "POST", CreatedFrom: x.at(5)}, []string{aFailed}},
		{"finished and host", Filter{FinishedFrom: x.at(0), Host: "b.org", StatusCode: 503}, []string{b503}},
		{"nothing matches", Filter{Host: "c.net"}, nil},
		{"no filter", Filter{}, newestFirst(aOK, aRetry, aFailed, bTimeout, b503, bPending, bCreated201)},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 2, 50} {
			got := x.find(all, tt.f, limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s, pages of %d: got %v, want %v", tt.name, limit, got, tt.want)
			}
		}
	}
}

func TestFindRefusesWhatNoIndexServes(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	now := time.Now()
	for _, tt := range []struct {
		f     Filter
		field string
		says  string
	}{
		{Filter{URLContains: "orders"}, "urlContains", "add host or label"},
		{Filter{URLContains: "orders", Statuses: StatusesOf(Failed)}, "urlContains", "add host or label"},
		{Filter{Method: "POST"}, "method", "add host, label, failureClass, statusCode, createdFrom/createdTo or finishedFrom/finishedTo"},
		{Filter{Method: "POST", Statuses: StatusesOf(Completed)}, "method", "add host"},
		{Filter{CreatedFrom: now, CreatedTo: now.Add(-time.Second)}, "createdFrom", "createdFrom is after createdTo"},
		{Filter{FinishedFrom: now, FinishedTo: now.Add(-time.Second)}, "finishedFrom", "finishedFrom is after finishedTo"},
	} {
		_, err := x.s.Find(x.ctx, tenant.All, tt.f, "", 10, nil)
		var fe *FilterError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Message, tt.says) {
			t.Errorf("%+v: got %v, want an error on %s saying %q", tt.f, err, tt.field, tt.says)
		}
	}
	for _, c := range []struct {
		cursor string
		f      Filter
	}{
		{"nope", Filter{}},
		{tid + ".123", Filter{}},
		{tid, Filter{FinishedFrom: now}},
		{tid + ".x", Filter{FinishedFrom: now}},
	} {
		if _, err := x.s.Find(x.ctx, tenant.All, c.f, c.cursor, 10, nil); !errors.Is(err, ErrCursor) {
			t.Errorf("cursor %q with %+v: %v", c.cursor, c.f, err)
		}
	}
}

// A tenant's filtered list holds its own requests only, whatever the
// filter; an admin sees every tenant's, or one named.
func TestFindKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	a1 := x.add(0, "team-a", "POST", "https://shared.io/a", []string{"l"}, fail503)
	b1 := x.add(1, "team-b", "POST", "https://shared.io/b", []string{"l"}, fail503)
	d1 := x.add(2, "", "POST", "https://shared.io/d", []string{"l"}, fail503)
	for _, f := range []Filter{{Host: "shared.io"}, {Label: "l"}, {StatusCode: 503}, {FailureClass: "server_error"},
		{FinishedFrom: x.at(0)}, {CreatedFrom: x.at(0)}, {}} {
		if got := x.find(tenant.Only("team-a"), f, 10); !slices.Equal(got, []string{a1}) {
			t.Errorf("team-a, %+v: %v", f, got)
		}
		if got := x.find(tenant.Only("team-b"), f, 1); !slices.Equal(got, []string{b1}) {
			t.Errorf("team-b, %+v: %v", f, got)
		}
		if got := x.find(tenant.All, f, 1); len(got) != 3 || !slices.Contains(got, d1) {
			t.Errorf("admin, %+v: %v", f, got)
		}
	}
}

// A page that examines ScanBudget entries without filling ends early with
// a cursor, and the next page goes on from there.
func TestFindEndsASparsePageEarly(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	want := x.add(0, "", "DELETE", "https://a.com/x", nil)
	pipe := x.rdb.Pipeline()
	for i := 1; i <= ScanBudget+10; i++ {
		now := x.at(1).Add(time.Duration(i) * time.Millisecond)
		r := newRequest(x.parts.NewID(now, fmt.Sprint(i)), now)
		r.URL, r.Host = "https://a.com/y", "a.com"
		k := x.s.k(r.ID)
		pipe.HSet(x.ctx, k.req(r.ID), r.fields()...)
		pipe.Set(x.ctx, k.spec(r.ID), r.spec(), 0)
		pipe.ZAdd(x.ctx, k.of("").host("a.com"), redis.Z{Member: r.ID})
	}
	if _, err := pipe.Exec(x.ctx); err != nil {
		t.Fatal(err)
	}
	page, err := x.s.Find(x.ctx, tenant.All, Filter{Host: "a.com", Method: "DELETE"}, "", 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Requests) != 0 || page.NextCursor == "" {
		t.Fatalf("first page: %d requests, cursor %q; want none and a cursor", len(page.Requests), page.NextCursor)
	}
	page, err = x.s.Find(x.ctx, tenant.All, Filter{Host: "a.com", Method: "DELETE"}, page.NextCursor, 10, nil)
	if err != nil || len(page.Requests) != 1 || page.Requests[0].ID != want || page.NextCursor != "" {
		t.Fatalf("second page: %+v %v", page, err)
	}
}

// indexed lists which of the filter indexes hold id.
func (x *findFixture) indexed(id string) []string {
	x.t.Helper()
	k := x.s.k(id)
	var out []string
	for _, t := range []string{"", "team-a"} {
		tk := k.of(t)
		for _, pattern := range []string{string(tk) + "idx:host:*", string(tk) + "idx:label:*", string(tk) + "idx:class:*", string(tk) + "idx:code:*"} {
			keys, err := x.rdb.Keys(x.ctx, pattern).Result()
			if err != nil {
				x.t.Fatal(err)
			}
			for _, key := range keys {
				if x.rdb.ZScore(x.ctx, key, id).Err() == nil {
					out = append(out, key[len(k):])
				}
			}
		}
		members, _ := x.rdb.ZRange(x.ctx, tk.finished(), 0, -1).Result()
		for _, m := range members {
			if parseFinishedMember(m).id == id {
				out = append(out, tk.finished()[len(k):])
			}
		}
	}
	slices.Sort(out)
	return out
}

// Each index entry goes when the request leaves what it indexes: a
// success after failures leaves the failure indexes, a redrive leaves
// them and the finished index, a cancel enters the finished index, and
// an expired record leaves every index at the sweeper's next trim.
func TestFilterIndexesFollowTheRequest(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	recovered := x.add(0, "", "POST", "https://a.com/x", nil, retry503, ok200)
	if got, want := x.indexed(recovered), []string{"idx:finished", "idx:host:a.com"}; !slices.Equal(got, want) {
		t.Errorf("recovered after a 503: %v, want %v", got, want)
	}

	failed := x.add(1, "team-a", "POST", "https://b.com/x", []string{"l1", "l2"}, fail503)
	want := []string{"t:team-a:idx:class:server_error", "t:team-a:idx:code:503", "t:team-a:idx:finished", "t:team-a:idx:host:b.com",
		"t:team-a:idx:label:l1", "t:team-a:idx:label:l2"}
	if got := x.indexed(failed); !slices.Equal(got, want) {
		t.Errorf("failed: %v, want %v", got, want)
	}
	if _, err := x.s.Redrive(x.ctx, failed, RedriveInput{Scope: tenant.All, Actor: "t", Limit: 5, Now: x.at(100)}); err != nil {
		t.Fatal(err)
	}
	want = []string{"t:team-a:idx:host:b.com", "t:team-a:idx:label:l1", "t:team-a:idx:label:l2"}
	if got := x.indexed(failed); !slices.Equal(got, want) {
		t.Errorf("redriven: %v, want %v", got, want)
	}

	retrying := x.add(2, "", "PUT", "https://c.com/x", nil, retry503)
	if _, err := x.s.Cancel(x.ctx, tenant.All, retrying, "api", x.at(200)); err != nil {
		t.Fatal(err)
	}
	want = []string{"idx:class:server_error", "idx:code:503", "idx:finished", "idx:host:c.com"}
	if got := x.indexed(retrying); !slices.Equal(got, want) {
		t.Errorf("canceled after a 503: %v, want %v", got, want)
	}
	if got := x.find(tenant.All, Filter{FinishedFrom: x.at(200)}, 10); !slices.Equal(got, []string{retrying}) {
		t.Errorf("finished since the cancel: %v", got)
	}

	// Expiry: the records go (as their TTL makes them go), then the
	// sweeper trims a retention later.
	for _, id := range []string{recovered, retrying} {
		k := x.s.k(id)
		x.rdb.Del(x.ctx, k.req(id), k.spec(id), k.attempts(id))
	}
	if _, _, err := x.s.TrimIndexes(x.ctx, time.Now().Add(2*time.Hour), 500); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{recovered, retrying} {
		if got := x.indexed(id); len(got) != 0 {
			t.Errorf("%s expired, still in %v", id, got)
		}
	}
	if got := x.indexed(failed); !slices.Equal(got, []string{"t:team-a:idx:host:b.com", "t:team-a:idx:label:l1", "t:team-a:idx:label:l2"}) {
		t.Errorf("the live redriven request lost entries: %v", got)
	}

	// Removed (a QStash DLQ delete): every entry goes at once.
	gone := x.add(3, "", "POST", "https://d.com/x", []string{"l3"}, fail404)
	if err := x.s.Remove(x.ctx, "", gone, ""); err != nil {
		t.Fatal(err)
	}
	if got := x.indexed(gone); len(got) != 0 {
		t.Errorf("removed, still in %v", got)
	}
}

// A request redriven and failed again shows once in a finished range,
// under its new finish time; the stale entry goes at the sweeper's trim.
func TestFindShowsARefinishedRequestOnce(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	id := x.add(0, "", "POST", "https://a.com/x", nil, fail503)
	if _, err := x.s.Redrive(x.ctx, id, RedriveInput{Scope: tenant.All, Actor: "t", Limit: 5, Now: x.at(10)}); err != nil {
		t.Fatal(err)
	}
	b, err := x.s.Begin(x.ctx, id, x.at(11))
	if err != nil {
		t.Fatal(err)
	}
	o := Outcome{Attempt: Attempt{N: b.N, StartedAt: x.at(11), Outcome: "permanent", StatusCode: 404, FailureClass: "client_error"},
		Status: Failed, Host: "a.com"}
	if _, err := x.s.Finish(x.ctx, id, o, x.at(11)); err != nil {
		t.Fatal(err)
	}
	if got := x.find(tenant.All, Filter{FinishedFrom: x.at(0)}, 10); !slices.Equal(got, []string{id}) {
		t.Errorf("finished since: %v", got)
	}
	if got := x.find(tenant.All, Filter{FinishedFrom: x.at(0), FinishedTo: x.at(5)}, 10); len(got) != 0 {
		t.Errorf("its first finish still shows: %v", got)
	}
	if got := x.find(tenant.All, Filter{StatusCode: 503}, 10); len(got) != 0 {
		t.Errorf("its first failure still shows: %v", got)
	}
}

// A resend is a new request: it enters its host and label indexes, and
// its original keeps every entry it had.
func TestResendEntersTheNewRequestsIndexes(t *testing.T) {
	t.Parallel()
	x := newFindFixture(t)
	orig := x.add(0, "", "POST", "https://a.com/x", []string{"l"}, fail404)
	r, err := x.s.Get(x.ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.s.Resend(x.ctx, r, ResendInput{Actor: "t", Now: x.at(60)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.indexed(res.ID), []string{"idx:host:a.com", "idx:label:l"}; !slices.Equal(got, want) {
		t.Errorf("the resend is in %v, want %v", got, want)
	}
	want := []string{"idx:class:client_error", "idx:code:404", "idx:finished", "idx:host:a.com", "idx:label:l"}
	if got := x.indexed(orig); !slices.Equal(got, want) {
		t.Errorf("the original is in %v, want %v", got, want)
	}
	if got := x.find(tenant.All, Filter{Label: "l", Statuses: StatusesOf(Pending)}, 10); !slices.Equal(got, []string{res.ID}) {
		t.Errorf("pending with label l: %v", got)
	}
}
