package record

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retryd/retryd/internal/redistest"
)

// Two processes see each other's listeners; a process that stops renewing
// its entries drops out after their time; one that stops is forgotten.
func TestListenersAreSharedAndLapse(t *testing.T) {
	t.Parallel()
	s := NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	t0 := time.Now()
	if _, err := s.Listeners(ctx, []string{"10.0.0.1:3000", "0.0.0.0:3000"}, t0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := s.Listeners(ctx, []string{"10.0.0.2:9090"}, t0.Add(time.Second), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0.0.0.0:3000", "10.0.0.1:3000", "10.0.0.2:9090"}, got); diff != "" {
		t.Errorf("listeners (-want +got):\n%s", diff)
	}
	// The API did not renew: past its entries' time only the worker is left.
	got, _ = s.Listeners(ctx, []string{"10.0.0.2:9090"}, t0.Add(11*time.Second), 10*time.Second)
	if diff := cmp.Diff([]string{"10.0.0.2:9090"}, got); diff != "" {
		t.Errorf("after the API's entries lapsed (-want +got):\n%s", diff)
	}
	if err := s.ForgetListeners(ctx, []string{"10.0.0.2:9090"}); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.Listeners(ctx, nil, t0.Add(12*time.Second), 10*time.Second); len(got) != 0 {
		t.Errorf("a stopped process is still listed: %v", got)
	}
}
