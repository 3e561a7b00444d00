package record

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/tenant"
)

func TestExpungeScript(t *testing.T) {
	t.Parallel()
	spec := `{"u":"https://e.com/hook","m":"POST","h":{"Authorization":"Bearer s"},"b":"card 4242","k":"sub-key","fc":{"key":"k1","periodMs":3600000},"rf":{"id":"01m8mhyychtfy2pdj6g0","atMs":1800000000000,"actor":"a"}}`
	attempts := []string{
		`{"n":1,"startedAtMs":1800000000000,"durationMs":12,"statusCode":500,"outcome":"retryable","failureClass":"server_error","responseBody":"oops for card 4242"}`,
		`{"n":2,"startedAtMs":1800000001000,"durationMs":9,"statusCode":200,"outcome":"success","responseBody":"ok card 4242"}`,
	}
	cases := []struct {
		name    string
		status  Status
		wantErr error
		already bool
	}{
		{name: "a completed request: payload erased, metadata kept", status: Completed},
		{name: "a failed request (a DLQ entry): payload erased", status: Failed},
		{name: "a retrying request: refused, nothing erased", status: Retrying, wantErr: ErrExpungeUnfinished},
		{name: "a pending request: refused, nothing erased", status: Pending, wantErr: ErrExpungeUnfinished},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStoreOn(t)
			initial := state{k0.req(tid): reqHash(c.status, fAttemptCount, "2", fHasResult, "1", fLastStatusCode, "200"),
				k0.spec(tid): spec, k0.attempts(tid): attempts, k0.result(tid): "ok card 4242"}
			seed(t, rdb, initial)
			ctx := context.Background()
			already, err := s.Expunge(ctx, tenant.All, tid, "erin", t0)
			if !errors.Is(err, c.wantErr) || already {
				t.Fatalf("Expunge = %v, %v; want %v", already, err, c.wantErr)
			}
			got := dump(t, rdb, k0.req(tid), k0.spec(tid), k0.attempts(tid), k0.result(tid))
			if c.wantErr != nil {
				if diff := cmp.Diff(initial, got); diff != "" {
					t.Errorf("a refused expunge changed (-want +got):\n%s", diff)
				}
				return
			}
			want := state{
				k0.req(tid):  reqHash(c.status, fAttemptCount, "2", fLastStatusCode, "200", fExpunged, "1", fExpungedAt, t0ms, fExpungedBy, "erin"),
				k0.spec(tid): `{"u":"https://e.com/hook","m":"POST","k":"sub-key","fc":{"key":"k1","periodMs":3600000},"rf":{"id":"01m8mhyychtfy2pdj6g0","atMs":1800000000000,"actor":"a"}}`,
				k0.attempts(tid): []string{
					`{"n":1,"startedAtMs":1800000000000,"durationMs":12,"statusCode":500,"outcome":"retryable","failureClass":"server_error"}`,
					`{"n":2,"startedAtMs":1800000001000,"durationMs":9,"statusCode":200,"outcome":"success"}`,
				},
			}
			if diff := cmp.Diff(want, got, jsonAware); diff != "" {
				t.Errorf("after expunge (-want +got):\n%s", diff)
			}
			r, err := s.Get(ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Expunged || r.ExpungedBy != "erin" || !r.ExpungedAt.Equal(t0) || r.Body != "" || len(r.Headers) != 0 || r.HasResult ||
				r.ResentFrom == nil || r.ResentFrom.AtMs != 1800000000000 || r.FlowControl.PeriodMs != 3600000 {
				t.Errorf("read back: %+v", r)
			}
			if already, err := s.Expunge(ctx, tenant.All, tid, "other", t0.Add(1)); err != nil || !already {
				t.Errorf("second expunge = %v, %v; want already", already, err)
			}
			if by := rdb.HGet(ctx, k0.req(tid), fExpungedBy).Val(); by != "erin" {
				t.Errorf("second expunge rewrote the audit: %q", by)
			}
		})
	}
	s, _ := newStoreOn(t)
	if _, err := s.Expunge(context.Background(), tenant.All, tid, "erin", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}
