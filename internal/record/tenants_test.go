package record

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// Two tenants on one store, over two partitions: each lists, counts,
// names idempotency keys and acts on its own requests only; an admin
// (tenant.All) sees both; the default tenant's keys are where they were
// before tenants.
func TestTenantsAreApart(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	parts, _ := partition.New(2)
	s := NewPartitioned(rdb, time.Hour, parts)
	ctx := context.Background()
	now := time.Now()
	a, b := tenant.Only("team-a"), tenant.Only("team-b")
	create := func(owner, idem string) (*Request, *Replay) {
		t.Helper()
		r := newRequest(parts.NewID(now, idem), now)
		r.Tenant = owner
		replay, err := s.Create(ctx, r, idem, []byte("body"), CreateOptions{Owner: Owner{ID: "tenant:" + owner, Limit: 10}})
		if err != nil {
			t.Fatal(err)
		}
		return r, replay
	}
	ra, _ := create("team-a", "same-key")
	rb, replay := create("team-b", "same-key")
	if replay != nil {
		t.Fatalf("team-b's Idempotency-Key replayed team-a's request %s", replay.ID)
	}
	if _, replay := create("team-a", "same-key"); replay == nil || replay.ID != ra.ID {
		t.Fatalf("team-a's own replay: %+v", replay)
	}
	rd, _ := create("", "")

	if _, err := s.GetIn(ctx, b, ra.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b read team-a's request: %v", err)
	}
	if got, err := s.GetIn(ctx, a, ra.ID); err != nil || got.Tenant != "team-a" {
		t.Errorf("team-a's own: %+v %v", got, err)
	}
	if _, err := s.Cancel(ctx, b, ra.ID, "api", now); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b canceled team-a's request: %v", err)
	}
	listed := func(scope tenant.Scope) []string {
		page, err := s.List(ctx, scope, "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range page.Requests {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	if got := listed(b); !slices.Equal(got, []string{rb.ID}) {
		t.Errorf("team-b lists %v, want only %s", got, rb.ID)
	}
	if got := listed(tenant.Only(tenant.Default)); !slices.Equal(got, []string{rd.ID}) {
		t.Errorf("default lists %v", got)
	}
	if got := listed(tenant.All); !slices.Equal(got, sorted(ra.ID, rb.ID, rd.ID)) {
		t.Errorf("an admin lists %v", got)
	}
	if got := listed(tenant.Scope{}); len(got) != 0 {
		t.Errorf("no scope lists %v", got)
	}
	// The default tenant's index is the one of before tenants.
	if !slices.Contains(rdb.ZRange(ctx, keysOf(parts.Tag(parts.OfID(rd.ID))).of("").index(Pending), 0, -1).Val(), rd.ID) {
		t.Error("the default tenant's request is not in the pre-tenant index")
	}
	// Each tenant's failed requests are its DLQ; the sweeper and the
	// metrics find every tenant.
	for _, r := range []*Request{ra, rb} {
		bg, _ := s.Begin(ctx, r.ID, now)
		if _, err := s.Finish(ctx, r.ID, Outcome{Attempt: Attempt{N: bg.N, StartedAt: now, Outcome: "permanent"}, Status: Failed,
			Host: r.Host, Tenant: r.Tenant}, now); err != nil {
			t.Fatal(err)
		}
	}
	dlq, err := s.ListFailed(ctx, a, DLQFilter{Host: "e.com"}, "", 10, nil)
	if err != nil || len(dlq.Requests) != 1 || dlq.Requests[0].ID != ra.ID {
		t.Errorf("team-a's DLQ by host: %+v %v", dlq, err)
	}
	if _, err := s.Redrive(ctx, ra.ID, RedriveInput{Scope: b, Limit: 3, Now: now}); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b redrove team-a's request: %v", err)
	}
	if _, err := s.Redrive(ctx, ra.ID, RedriveInput{Scope: a, Limit: 3, Now: now}); err != nil {
		t.Errorf("team-a's own redrive: %v", err)
	}
	tenants, err := s.Tenants(ctx)
	if err != nil || !slices.Equal(tenants, []string{"default", "team-a", "team-b"}) {
		t.Errorf("tenants %v %v", tenants, err)
	}
	if n, _ := s.StatusCount(ctx, "team-b", Failed); n != 1 {
		t.Errorf("team-b's failed count %d", n)
	}
	if n, _ := s.StatusCount(ctx, "team-a", Pending); n != 1 {
		t.Errorf("team-a's pending count after the redrive %d", n)
	}
	var unfinished []string
	for part := 0; part < parts.Len(); part++ {
		ids, _, err := s.UnfinishedIDs(ctx, part, "team-a", Pending, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := s.UnfinishedRecords(ctx, part, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range batch {
			unfinished = append(unfinished, u.ID)
		}
	}
	if !slices.Equal(unfinished, []string{ra.ID}) {
		t.Errorf("the sweeper's view of team-a: %v", unfinished)
	}
}

func TestSchedulesAreTheirTenants(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	now := time.Now()
	mk := func(id, owner string) {
		t.Helper()
		sc := &Schedule{ID: id, Tenant: owner, Cron: "* * * * *", Request: []byte(`{}`), NextFireAt: now, CreatedAt: now,
			QStash: &ScheduleQStash{Alias: "nightly"}}
		if err := s.CreateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	mk("01m8mhyychtfy2pdj6s1", "team-a")
	mk("01m8mhyychtfy2pdj6s2", "team-b")
	for owner, want := range map[string]string{"team-a": "01m8mhyychtfy2pdj6s1", "team-b": "01m8mhyychtfy2pdj6s2"} {
		if id, err := s.ScheduleByAlias(ctx, owner, "nightly"); err != nil || id != want {
			t.Errorf("%s's alias nightly: %s %v, want %s", owner, id, err, want)
		}
		if n, _ := s.CountSchedules(ctx, owner); n != 1 {
			t.Errorf("%s counts %d schedules", owner, n)
		}
	}
	if _, err := s.GetScheduleIn(ctx, tenant.Only("team-b"), "01m8mhyychtfy2pdj6s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b read team-a's schedule: %v", err)
	}
	if err := s.DeleteSchedule(ctx, tenant.Only("team-b"), "01m8mhyychtfy2pdj6s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b deleted team-a's schedule: %v", err)
	}
	list, _, err := s.ListSchedules(ctx, tenant.Only("team-a"), "", 10)
	if err != nil || len(list) != 1 || list[0].Tenant != "team-a" {
		t.Errorf("team-a's schedules: %+v %v", list, err)
	}
	if all, _, _ := s.ListSchedules(ctx, tenant.All, "", 10); len(all) != 2 {
		t.Errorf("an admin sees %d schedules", len(all))
	}
}
