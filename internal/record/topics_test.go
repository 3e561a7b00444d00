package record

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

func TestTopicsAddRemoveAndStayTheirTenants(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	now := time.Now()
	a := []Endpoint{{Name: "one", URL: "https://a.example/1"}, {URL: "https://a.example/2"}}
	if err := s.AddEndpoints(ctx, "team-a", "orders", a, now); err != nil {
		t.Fatal(err)
	}
	// The same URL again takes the new name and keeps its place.
	if err := s.AddEndpoints(ctx, "team-a", "orders", []Endpoint{{Name: "three", URL: "https://a.example/3"}, {Name: "uno", URL: "https://a.example/1"}}, now); err != nil {
		t.Fatal(err)
	}
	tp, err := s.GetTopic(ctx, "team-a", "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{{Name: "uno", URL: "https://a.example/1"}, {URL: "https://a.example/2"}, {Name: "three", URL: "https://a.example/3"}}
	if fmt.Sprint(tp.Endpoints) != fmt.Sprint(want) || tp.CreatedAt.IsZero() {
		t.Errorf("endpoints %v, want %v (created %v)", tp.Endpoints, want, tp.CreatedAt)
	}
	if _, err := s.GetTopic(ctx, "team-b", "orders"); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b sees team-a's topic: %v", err)
	}
	if err := s.DeleteTopic(ctx, "team-b", "orders"); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b deleted team-a's topic: %v", err)
	}
	if err := s.AddEndpoints(ctx, "team-b", "orders", []Endpoint{{URL: "https://b.example/"}}, now); err != nil {
		t.Fatal(err)
	}
	// Removing from another tenant's topic finds nothing to remove from.
	if err := s.RemoveEndpoints(ctx, "team-c", "orders", []Endpoint{{URL: "https://a.example/1"}}, now); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-c removed from a topic it does not have: %v, want ErrNotFound", err)
	}
	// Remove by name, and by URL.
	if err := s.RemoveEndpoints(ctx, "team-a", "orders", []Endpoint{{Name: "three"}, {URL: "https://a.example/2"}}, now); err != nil {
		t.Fatal(err)
	}
	tp, _ = s.GetTopic(ctx, "team-a", "orders")
	if len(tp.Endpoints) != 1 || tp.Endpoints[0].URL != "https://a.example/1" {
		t.Errorf("after removals: %v", tp.Endpoints)
	}
	list, err := s.ListTopics(ctx, tenant.Only("team-a"))
	if err != nil || len(list) != 1 || list[0].Name != "orders" {
		t.Errorf("team-a's topics %v %v", list, err)
	}
	if all, _ := s.ListTopics(ctx, tenant.All); len(all) != 2 {
		t.Errorf("an admin sees %d topics, want 2", len(all))
	}
	// The last endpoint removed deletes the topic.
	if err := s.RemoveEndpoints(ctx, "team-a", "orders", []Endpoint{{URL: "https://a.example/1"}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTopic(ctx, "team-a", "orders"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an emptied topic: %v", err)
	}
	if list, _ := s.ListTopics(ctx, tenant.Only("team-a")); len(list) != 0 {
		t.Errorf("an emptied topic is still listed: %v", list)
	}
	// Limits: nothing is added past them.
	var many []Endpoint
	for i := range MaxTopicEndpoints + 1 {
		many = append(many, Endpoint{URL: fmt.Sprintf("https://m.example/%d", i)})
	}
	if err := s.AddEndpoints(ctx, "team-a", "big", many, now); !errors.Is(err, ErrTopicFull) {
		t.Errorf("101 endpoints: %v", err)
	}
	if _, err := s.GetTopic(ctx, "team-a", "big"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused add left a topic: %v", err)
	}
}

func TestPublicationIsItsTenants(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	p := &Publication{ID: "01m8mhyychtfy2pdj6p1", Tenant: "team-a", Topic: "orders", CreatedAt: time.Now(),
		Children: []Child{{ID: "01m8mhyychtfy2pdj6c1", Endpoint: "one", URL: "https://a.example/1"}}}
	if err := s.SavePublication(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPublication(ctx, tenant.Only("team-a"), p.ID)
	if err != nil || got.Topic != "orders" || len(got.Children) != 1 || got.Children[0].Endpoint != "one" {
		t.Errorf("publication %+v %v", got, err)
	}
	if _, err := s.GetPublication(ctx, tenant.Only("team-b"), p.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("team-b reads team-a's publication: %v", err)
	}
}

// Publishes that resume one another add their children to one
// publication, listed in their endpoints' order.
func TestPublicationChildrenAreMerged(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	id := "01m8mhyychtfy2pdj6p2"
	c := func(i int) Child {
		return Child{ID: fmt.Sprintf("01m8mhyychtfy2pdj6c%d", i), URL: fmt.Sprintf("https://a.example/%d", i), Index: i}
	}
	first := &Publication{ID: id, Tenant: "team-a", Topic: "orders", CreatedAt: time.UnixMilli(1000), Children: []Child{c(0), c(1)}}
	second := &Publication{ID: id, Tenant: "team-a", Topic: "orders", CreatedAt: time.UnixMilli(2000), Children: []Child{c(2), c(1), c(3)}}
	for _, p := range []*Publication{second, first} {
		if err := s.SavePublication(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetPublication(ctx, tenant.Only("team-a"), id)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Child{c(0), c(1), c(2), c(3)}; fmt.Sprint(got.Children) != fmt.Sprint(want) || got.CreatedAt.UnixMilli() != 2000 {
		t.Errorf("children %v created %v, want %v created at the first save (2000)", got.Children, got.CreatedAt.UnixMilli(), want)
	}
}

// A publication's Idempotency-Key names the first publication and whether
// a later publish has its body; a release by another publication is a
// no-op.
func TestClaimPublication(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	if prev, err := s.ClaimPublication(ctx, "team-a", "k", "pub-1", "h1"); prev != nil || err != nil {
		t.Fatalf("first claim: %+v %v", prev, err)
	}
	for _, tc := range []struct {
		hash string
		want Claim
	}{{"h1", Claim{ID: "pub-1", SameBody: true}}, {"h2", Claim{ID: "pub-1"}}} {
		if prev, err := s.ClaimPublication(ctx, "team-a", "k", "pub-2", tc.hash); err != nil || prev == nil || *prev != tc.want {
			t.Errorf("claim with body %s: %+v %v, want %+v", tc.hash, prev, err, tc.want)
		}
	}
	if prev, err := s.ClaimPublication(ctx, "team-b", "k", "pub-3", "h1"); prev != nil || err != nil {
		t.Errorf("another tenant's key: %+v %v, want its own claim", prev, err)
	}
	if err := s.ReleasePublication(ctx, "team-a", "k", "pub-2"); err != nil {
		t.Fatal(err)
	}
	if prev, _ := s.ClaimPublication(ctx, "team-a", "k", "pub-4", "h1"); prev == nil || prev.ID != "pub-1" {
		t.Errorf("pub-2 released pub-1's claim: %+v", prev)
	}
	if err := s.ReleasePublication(ctx, "team-a", "k", "pub-1"); err != nil {
		t.Fatal(err)
	}
	if prev, _ := s.ClaimPublication(ctx, "team-a", "k", "pub-5", "h1"); prev != nil {
		t.Errorf("after its release the key still names %+v", prev)
	}
}
