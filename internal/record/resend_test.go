package record

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/tenant"
)

func TestResendScript(t *testing.T) {
	t.Parallel()
	const other = "01m8mhyychtfy2pdj6gb"
	spec := `{"u":"https://e.com/hook","m":"POST","h":{"X-A":"1"},"b":"hello","k":"sub-key","fc":{"key":"k1","parallelism":2},"cr":"partner","px":"egress"}`
	cases := []struct {
		name    string
		initial state
		in      ResendInput
		// twice resends a second time with the same input.
		twice   bool
		wantErr error
		check   func(t *testing.T, s *Store, got state, res *ResendResult)
	}{
		{
			name:    "a completed request makes a new pending one with the same payload, linked both ways",
			initial: state{k0.req(tid): reqHash(Completed, fAttemptCount, "2"), k0.spec(tid): spec},
			in:      ResendInput{Actor: "erin", Reason: "partner lost it", Now: t0},
			check: func(t *testing.T, s *Store, got state, res *ResendResult) {
				n, err := s.Get(context.Background(), res.ID)
				if err != nil {
					t.Fatal(err)
				}
				if n.Status != Pending || n.URL != "https://e.com/hook" || n.Method != "POST" || n.Body != "hello" ||
					n.Headers["X-A"] != "1" || n.MaxRetries != 1 || n.AttemptCount != 0 || n.FlowControl == nil || n.FlowControl.Key != "k1" ||
					n.Credential != "partner" || n.Proxy != "egress" {
					t.Errorf("new request %+v", n)
				}
				if n.IdempotencyKey != "" {
					t.Errorf("the new request carries the original's Idempotency-Key %q", n.IdempotencyKey)
				}
				want := &ResentFrom{ID: tid, AtMs: t0.UnixMilli(), Actor: "erin", Reason: "partner lost it"}
				if diff := cmp.Diff(want, n.ResentFrom); diff != "" {
					t.Errorf("resentFrom (-want +got):\n%s", diff)
				}
				o, _ := s.Get(context.Background(), tid)
				if diff := cmp.Diff([]string{res.ID}, o.Resends); diff != "" || o.Status != Completed {
					t.Errorf("original's resends (-want +got):\n%s (status %s)", diff, o.Status)
				}
				if diff := cmp.Diff(zset{res.ID}, got[d0.index(Pending)]); diff != "" {
					t.Errorf("pending index (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "the same Idempotency-Key gives the same new request",
			initial: state{k0.req(tid): reqHash(Failed), k0.spec(tid): spec},
			in:      ResendInput{Actor: "erin", IdemKey: "k", Now: t0}, twice: true,
			check: func(t *testing.T, s *Store, got state, res *ResendResult) {
				if !res.Replayed {
					t.Error("second call not a replay")
				}
				if diff := cmp.Diff(zset{res.ID}, got[d0.index(Pending)]); diff != "" {
					t.Errorf("pending index (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "the same Idempotency-Key on another request: refused",
			initial: state{k0.req(tid): reqHash(Canceled), k0.spec(tid): spec, d0.resendIdem("k"): other + " 01m8mhyychtfy2pdj6gc"},
			in:      ResendInput{Actor: "erin", IdemKey: "k", Now: t0}, wantErr: ErrResendKeyReused,
		},
		{
			name:    "a retrying request: refused, nothing written",
			initial: state{k0.req(tid): reqHash(Retrying), k0.spec(tid): spec},
			in:      ResendInput{Actor: "erin", Now: t0}, wantErr: ErrUnfinished,
		},
		{
			name:    "an expunged request: refused",
			initial: state{k0.req(tid): reqHash(Completed, fExpunged, "1"), k0.spec(tid): spec},
			in:      ResendInput{Actor: "erin", Now: t0}, wantErr: ErrExpunged,
		},
		{
			name:    "the owner at its limit: refused",
			initial: state{k0.req(tid): reqHash(Completed), k0.spec(tid): spec, k0.req(other): reqHash(Pending), d0.owner("o"): zset{other}},
			in:      ResendInput{Actor: "erin", Owner: Owner{ID: "o", Limit: 1}, Now: t0}, wantErr: ErrOwnerLimit,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			seed(t, rdb, c.initial)
			ctx := context.Background()
			orig, err := s.Get(ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Resend(ctx, orig, c.in)
			if err == nil && c.twice {
				res, err = s.Resend(ctx, orig, c.in)
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Resend = %v, want %v", err, c.wantErr)
			}
			got := dump(t, rdb, d0.index(Pending), d0.legacyAll(), k0.req(tid))
			if got[d0.legacyAll()] != nil {
				t.Errorf("the resend wrote the all index of earlier versions: %v", got)
			}
			if c.wantErr != nil {
				if got[d0.index(Pending)] != nil {
					t.Errorf("a refused resend stored a request: %v", got)
				}
				if diff := cmp.Diff(c.initial[k0.req(tid)], got[k0.req(tid)]); diff != "" {
					t.Errorf("a refused resend changed the original (-want +got):\n%s", diff)
				}
				return
			}
			c.check(t, s, got, res)
		})
	}
}

// A resend racing a redrive of the same failed request: either the resend
// saw it failed (both succeed, the resend first), or the redrive came
// first and the resend is refused; never a resend of a request already
// back in delivery, and the original lists exactly the resends made.
func TestResendRacingARedrive(t *testing.T) {
	t.Parallel()
	s, rdb := newStoreOn(t)
	ctx := context.Background()
	for i := range 20 {
		id := tid[:len(tid)-2] + string("0123456789abcdefghjk"[i]) + "0"
		seed(t, rdb, state{k0.req(id): reqHash(Failed), k0.spec(id): `{"u":"https://e.com","m":"GET"}`, d0.index(Failed): zset{id}})
		orig, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var resendErr, redriveErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, resendErr = s.Resend(ctx, orig, ResendInput{Actor: "a", Now: t0})
		}()
		_, redriveErr = s.Redrive(ctx, id, RedriveInput{Scope: tenant.All, Actor: "b", Limit: 3, Now: t0})
		<-done
		if redriveErr != nil {
			t.Fatalf("redrive %d: %v", i, redriveErr)
		}
		if resendErr != nil && !errors.Is(resendErr, ErrUnfinished) {
			t.Fatalf("resend %d: %v", i, resendErr)
		}
		o, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[resendErr == nil]; len(o.Resends) != want || o.Status != Pending {
			t.Errorf("%d: resend err %v, original %s with resends %v", i, resendErr, o.Status, o.Resends)
		}
	}
}

// On a Redis Cluster with several partitions, a resend and an expunge
// each run in one slot, whatever the request's partition.
func TestResendAndExpungeOnRedisCluster(t *testing.T) {
	t.Parallel()
	s, parts := clusterStore(t, 3, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	for p := range parts.Len() {
		r := newRequest(parts.NewIDIn(now, p), now)
		r.Tenant = "team-a"
		if _, err := s.Create(ctx, r, "", nil, CreateOptions{}); err != nil {
			t.Fatalf("partition %d: create: %v", p, err)
		}
		if _, err := s.Cancel(ctx, tenant.All, r.ID, "api", now); err != nil {
			t.Fatalf("partition %d: cancel: %v", p, err)
		}
		orig, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Resend(ctx, orig, ResendInput{Actor: "a", IdemKey: "k", Owner: Owner{ID: "o", Limit: 100}, Now: now})
		if err != nil {
			t.Fatalf("partition %d: resend: %v", p, err)
		}
		if parts.OfID(res.ID) != p {
			t.Errorf("partition %d: the resend %s is in partition %d", p, res.ID, parts.OfID(res.ID))
		}
		if _, err := s.Expunge(ctx, tenant.All, r.ID, "dpo", now); err != nil {
			t.Fatalf("partition %d: expunge: %v", p, err)
		}
	}
}
