package record

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

func TestDLQHostFilterTakesHostOrHostPort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 40) + ".elb.eu-west-1.amazonaws.example" // 63 characters
	cases := []struct {
		url, filter string
		want        bool
	}{
		{"https://" + long + "/hook", long, true},
		{"https://" + long + "/hook", long[:60], false},
		{"http://127.0.0.1:8093/x", "127.0.0.1:8093", true},
		{"http://127.0.0.1:8093/x", "127.0.0.1", true},
		{"http://127.0.0.1:8093/x", "127.0.0.1:8094", false},
		{"https://api.example.com/x", "api.example.com:443", true},
		{"http://api.example.com/x", "api.example.com:443", false},
		{"http://[::1]:9000/x", "[::1]:9000", true},
		{"http://[::1]:9000/x", "::1", true},
		{"http://[::1]:9000/x", "[::1]", true},
		{"https://API.Example.com/x", "api.example.com", true},
	}
	for _, c := range cases {
		r := decode("01x", map[string]string{fStatus: "failed"}, `{"u":"`+c.url+`","m":"GET"}`)
		if got := (DLQFilter{Host: strings.ToLower(c.filter)}).Match(r); got != c.want {
			t.Errorf("host=%s on %s: %v, want %v", c.filter, c.url, got, c.want)
		}
	}
}

func TestLastErrorIsKeptUpToItsLimit(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	now := time.Now()
	for _, c := range []struct {
		name    string
		err     string
		want    string
		clipped bool
	}{
		{"a network error", `Post "http://10.1.2.3:8080/some/long/path/of/the/hook": dial tcp 10.1.2.3:8080: connect: connection refused`, "", false},
		{"an error over the limit", strings.Repeat("x", ErrorLimit+100), "", true},
	} {
		id := "01m8mhyychtfy2pdj6g" + map[bool]string{false: "7", true: "8"}[c.clipped]
		if _, err := s.Create(ctx, newRequest(id, now), "", nil, CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := s.Begin(ctx, id, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(ctx, id, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, Outcome: "permanent", Error: c.err}, Status: Failed}, now); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !c.clipped && r.LastError != c.err:
			t.Errorf("%s: lastError %q, want it whole", c.name, r.LastError)
		case c.clipped && (len(r.LastError) > ErrorLimit || !strings.HasSuffix(r.LastError, "…")):
			t.Errorf("%s: lastError of %d bytes, want at most %d with a mark", c.name, len(r.LastError), ErrorLimit)
		}
		if got := r.Attempts[len(r.Attempts)-1].Error; got != c.err {
			t.Errorf("%s: the attempt's error was cut (%d of %d bytes)", c.name, len(got), len(c.err))
		}
	}
}

// The DLQ's host filter reads the failed-by-host index; failed requests
// recorded before the index existed are indexed on first use.
func TestDLQHostFilterUsesTheHostIndex(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	now := time.Now()
	// A request failed through Finish: indexed.
	r := newRequest("01m8mhyychtfy2pdj6ga", now)
	r.URL, r.Host = "https://a.example:8443/x", "a.example"
	if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Begin(ctx, r.ID, now)
	if _, err := s.Finish(ctx, r.ID, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, Outcome: "permanent"}, Status: Failed, Host: r.Host}, now); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ZRange(ctx, d0.failedHost("a.example"), 0, -1).Val(); len(got) != 1 || got[0] != r.ID {
		t.Fatalf("failed-by-host index %v", got)
	}
	// A failed request of before the index: in the failed index only.
	old := "01m8mhyychtfy2pdj6gb"
	seed(t, rdb, state{k0.req(old): reqHash(Failed), k0.spec(old): `{"u":"https://a.example/old","m":"GET"}`, d0.index(Failed): zset{old}})
	for _, filter := range []string{"a.example", "a.example:8443"} {
		page, err := s.ListFailed(ctx, tenant.All, DLQFilter{Host: filter}, "", 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range page.Requests {
			got = append(got, p.ID)
		}
		want := []string{old, r.ID}
		if filter == "a.example:8443" {
			want = []string{r.ID}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("host=%s (-want +got):\n%s", filter, diff)
		}
	}
	if rdb.Exists(ctx, k0.hostIndexReady()).Val() != 1 {
		t.Error("the backfill left no marker")
	}
	// Redriven since: not listed, and its entry is dropped.
	if _, err := s.Redrive(ctx, r.ID, RedriveInput{Scope: tenant.All, Actor: "a", Limit: 3, Now: now}); err != nil {
		t.Fatal(err)
	}
	page, _ := s.ListFailed(ctx, tenant.All, DLQFilter{Host: "a.example"}, "", 10, nil)
	if len(page.Requests) != 1 || page.Requests[0].ID != old {
		t.Errorf("after a redrive: %d listed", len(page.Requests))
	}
	if rdb.ZScore(ctx, d0.failedHost("a.example"), r.ID).Err() == nil {
		t.Error("the redriven request's entry stayed in the index")
	}
}

// The credential and proxy a request names are kept with what the client
// sent, and read back with it.
func TestCreateKeepsTheCredentialAndProxyNamed(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	now := time.Now()
	r := newRequest("01m8mhyychtfy2pdj6g9", now)
	r.Credential, r.Proxy = "partner-oauth", "fixed-egress"
	if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Credential != "partner-oauth" || got.Proxy != "fixed-egress" {
		t.Errorf("read back credential %q, proxy %q; want partner-oauth, fixed-egress", got.Credential, got.Proxy)
	}
	plain := newRequest("01m8mhyychtfy2pdj6ga", now)
	if _, err := s.Create(ctx, plain, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, plain.ID); got.Credential != "" || got.Proxy != "" {
		t.Errorf("a request naming none reads back credential %q, proxy %q", got.Credential, got.Proxy)
	}
}
