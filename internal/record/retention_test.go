package record

import (
	"context"
	"errors"
	"testing"
	"time"

	retryids "github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// finished stores a request of tenant t and finishes its first attempt
// (a 200 with a response body) as status, at now.
func finished(t *testing.T, s *Store, owner string, status Status, now time.Time) string {
	t.Helper()
	ctx := context.Background()
	r := newRequest(retryids.New(now), now)
	r.Tenant, r.Body, r.Headers = owner, "card 4242", map[string]string{"Authorization": "Bearer s"}
	if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Begin(ctx, r.ID, now)
	if err != nil || b.State != Started {
		t.Fatalf("begin: %+v %v", b, err)
	}
	body := "ok card 4242"
	if _, err := s.Finish(ctx, r.ID, Outcome{Attempt: Attempt{N: b.N, StartedAt: now, StatusCode: 200, Outcome: "success", ResponseBody: &body},
		Status: status, Result: &body, Tenant: owner, Host: hostOf(r.URL)}, now); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// Two tenants, different retention: the one whose admin set a short
// retention loses its finished (and canceled) requests at the sweeper's
// trim once it ends (and the trim's minute of slack), while the other's,
// of the default retention, stay. No key of a finished request has a TTL.
func TestRetentionPerTenant(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t) // default retention: an hour
	ctx := context.Background()
	now := time.Now()
	if err := s.SetTenantRetention(ctx, "brief", Retention{Records: 400 * time.Millisecond}, now); err != nil {
		t.Fatal(err)
	}
	brief := finished(t, s, "brief", Completed, now)
	lasting := finished(t, s, "lasting", Completed, now)
	pending := newRequest(retryids.New(now), now)
	pending.Tenant = "brief"
	if _, err := s.Create(ctx, pending, "", nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, tenant.All, pending.ID, "test", now); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{brief, lasting, pending.ID} {
		for _, key := range []string{k0.req(id), k0.attempts(id), k0.spec(id), k0.result(id)} {
			if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 && ttl != -2 {
				t.Errorf("%s has a TTL (%v): the trim ends a finished request", key, ttl)
			}
		}
	}
	// Within the slack, nothing goes.
	if n, _, err := s.TrimIndexes(ctx, now.Add(30*time.Second), 100); err != nil || n != 0 {
		t.Errorf("TrimIndexes within the slack removed %d, %v", n, err)
	}
	if n, _, err := s.TrimIndexes(ctx, now.Add(2*time.Minute), 100); err != nil || n != 6 {
		t.Errorf("TrimIndexes removed %d, %v; want the status, host and finished entries of brief's two requests", n, err)
	}
	for _, id := range []string{brief, pending.ID} {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("brief's %s outlived its retention: %v", id, err)
		}
	}
	if _, err := s.Get(ctx, lasting); err != nil {
		t.Fatalf("the other tenant's request went with it: %v", err)
	}
	for _, tk := range []tkeys{k0.of("brief"), k0.of("lasting")} {
		want := int64(0)
		if tk == k0.of("lasting") {
			want = 1
		}
		listed := int64(0)
		for _, key := range tk.statusIndexes() {
			listed += rdb.ZCard(ctx, key).Val()
		}
		if listed != want {
			t.Errorf("%s: the status indexes hold %d entries, want %d", tk, listed, want)
		}
		if n := rdb.ZCard(ctx, tk.finished()).Val(); n != want {
			t.Errorf("%s: the finished index holds %d entries, want %d", tk, n, want)
		}
	}
}

// A tenant's retention reaches a process that read it before within
// RetentionRefresh, and not per request: a payload retention set on
// another process applies to the requests it finishes after that (they
// enter the payload-expiry index). The records' retention is read by the
// trim each time it runs.
func TestRetentionReachesOtherProcessesWithinTheRefresh(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	admin, worker := NewStore(rdb, time.Hour), NewStore(rdb, time.Hour)
	ctx := context.Background()
	now := time.Now()
	before := finished(t, worker, "acme", Completed, now)
	if err := admin.SetTenantRetention(ctx, "acme", Retention{Payload: 30 * time.Minute}, now); err != nil {
		t.Fatal(err)
	}
	stale := finished(t, worker, "acme", Completed, now.Add(RetentionRefresh/2))
	fresh := finished(t, worker, "acme", Completed, now.Add(RetentionRefresh+time.Second))
	for _, c := range []struct {
		id      string
		indexed bool
	}{{before, false}, {stale, false}, {fresh, true}} {
		if indexed := rdb.ZScore(ctx, k0.of("acme").payloadDue(), c.id).Err() == nil; indexed != c.indexed {
			t.Errorf("request %s in the payload-expiry index: %v, want %v", c.id, indexed, c.indexed)
		}
	}
}

// A tenant's retention is refused when its payloads would outlive its
// records, counting what it inherits from the defaults; set to zero it is
// the defaults again.
func TestSetTenantRetentionRefusesAPayloadOutlivingItsRecord(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	s.SetPayloadRetention(30 * time.Minute)
	ctx := context.Background()
	now := time.Now()
	for _, set := range []Retention{
		{Payload: 2 * time.Hour},    // over the default hour of records
		{Records: 10 * time.Minute}, // under the default half hour of payloads
		{Records: time.Minute, Payload: 2 * time.Minute},
	} {
		if err := s.SetTenantRetention(ctx, "acme", set, now); !errors.Is(err, ErrPayloadOutlivesRecord) {
			t.Errorf("%+v: %v, want ErrPayloadOutlivesRecord", set, err)
		}
	}
	if rdb.Exists(ctx, RetentionKey).Val() != 0 {
		t.Fatal("a refused retention was stored")
	}
	set := Retention{Records: 10 * time.Minute, Payload: 5 * time.Minute}
	if err := s.SetTenantRetention(ctx, "acme", set, now); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TenantRetention(ctx, "acme"); err != nil || got != set {
		t.Errorf("read back %+v, %v; want %+v", got, err, set)
	}
	if got, _ := s.retentionOf(ctx, "acme", now); got != set {
		t.Errorf("in effect: %+v, want %+v", got, set)
	}
	if got, _ := s.retentionOf(ctx, "other", now); got != s.DefaultRetention() {
		t.Errorf("another tenant's: %+v, want the defaults", got)
	}
	if err := s.SetTenantRetention(ctx, "acme", Retention{}, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.retentionOf(ctx, "acme", now); got != s.DefaultRetention() || rdb.HExists(ctx, RetentionKey, "acme").Val() {
		t.Errorf("cleared: %+v, want the defaults", got)
	}
}

// Once a tenant's payload retention ends, its finished requests' payloads
// are erased as by an expunge (expungedBy "retention"), keeping the
// record; another tenant's payloads, without one, are kept and cost no
// index entry. Each entry is read once.
func TestExpirePayloads(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	now := time.Now()
	if err := s.SetTenantRetention(ctx, "gdpr", Retention{Payload: time.Minute}, now); err != nil {
		t.Fatal(err)
	}
	done := finished(t, s, "gdpr", Completed, now)
	failed := finished(t, s, "gdpr", Failed, now.Add(10*time.Second))
	kept := finished(t, s, "", Completed, now)
	if n := rdb.Exists(ctx, d0.payloadDue()).Val(); n != 0 {
		t.Errorf("a tenant without a payload retention has a payload-expiry index")
	}
	if n, more, err := s.ExpirePayloads(ctx, now.Add(59*time.Second), 100); err != nil || n != 0 || more {
		t.Fatalf("before the payload retention ended: erased %d (more %v), %v", n, more, err)
	}
	// A batch of one is full: more may be due.
	if n, more, err := s.ExpirePayloads(ctx, now.Add(61*time.Second), 1); err != nil || n != 1 || !more {
		t.Fatalf("erased %d (more %v), %v; want the first request's, and more", n, more, err)
	}
	r, err := s.Get(ctx, done)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Expunged || r.ExpungedBy != RetentionActor || !r.ExpungedAt.Equal(now.Add(61*time.Second).Truncate(time.Millisecond)) ||
		r.Body != "" || len(r.Headers) != 0 || r.HasResult || r.Attempts[0].ResponseBody != nil || r.Status != Completed || r.LastStatusCode != 200 {
		t.Errorf("after its payload retention: %+v", r)
	}
	if r, _ := s.Get(ctx, failed); r.Expunged || r.Body != "card 4242" {
		t.Errorf("a request finished later lost its payload early: %+v", r)
	}
	if n, more, err := s.ExpirePayloads(ctx, now.Add(71*time.Second), 100); err != nil || n != 1 || more {
		t.Fatalf("erased %d (more %v), %v; want the failed request's, and no more", n, more, err)
	}
	if n := rdb.ZCard(ctx, k0.of("gdpr").payloadDue()).Val(); n != 0 {
		t.Errorf("%d entries left in the payload-expiry index", n)
	}
	if r, _ := s.Get(ctx, kept); r.Expunged || r.Body != "card 4242" || r.Result != "ok card 4242" {
		t.Errorf("the default tenant's payload: %+v", r)
	}
	if _, err := s.Resend(ctx, mustGet(t, s, failed), ResendInput{Actor: "a", Now: now}); !errors.Is(err, ErrExpunged) {
		t.Errorf("resend of an expired payload: %v, want ErrExpunged", err)
	}
	// A manual expunge takes the request out of the index too; turning
	// the payload retention off drops the index.
	third := finished(t, s, "gdpr", Completed, now)
	if _, err := s.Expunge(ctx, tenant.All, third, "dpo", now); err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, k0.of("gdpr").payloadDue()).Val(); n != 0 {
		t.Errorf("an expunged request stayed in the payload-expiry index")
	}
	finished(t, s, "gdpr", Completed, now)
	if err := s.SetTenantRetention(ctx, "gdpr", Retention{}, now); err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, k0.of("gdpr").payloadDue()).Val() != 0 {
		t.Errorf("the index of a tenant whose payload retention was turned off stays")
	}
	// One left by a default payload retention since turned off (a restart
	// without PAYLOAD_RETENTION): the first sweep of a process drops it.
	other := NewStore(rdb, time.Hour)
	other.SetPayloadRetention(time.Minute)
	finished(t, other, "", Completed, now)
	if _, _, err := NewStore(rdb, time.Hour).ExpirePayloads(ctx, now, 100); err != nil || rdb.Exists(ctx, d0.payloadDue()).Val() != 0 {
		t.Errorf("a payload-expiry index of before stays: %v", err)
	}
}

func mustGet(t *testing.T, s *Store, id string) *Request {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
