package agree

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Two processes on one Redis that read ALLOW_PRIVATE_TARGETS differently
// both name it, with both values, in Disagreements and their logs; the
// worker's Explain names its value and the API's; a process that stops is
// forgotten, and the disagreement with it.
func TestProcessesNameTheSettingsTheyDisagreeOn(t *testing.T) {
	t.Parallel()
	store := record.NewStore(redistest.Start(t).Client(), time.Hour)
	ctx := context.Background()
	var apiLog, workerLog syncBuffer
	api := New(store, Self(config.Config{AllowPrivateTargets: true, Partitions: 1}, config.API), clock.Real, slog.New(slog.NewTextHandler(&apiLog, nil)))
	worker := New(store, Self(config.Config{Partitions: 1}, config.Worker), clock.Real, slog.New(slog.NewTextHandler(&workerLog, nil)))
	for _, b := range []*Book{api, worker, api} {
		if err := b.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string]*Book{"api": api, "worker": worker} {
		ds := b.Disagreements()
		if len(ds) != 1 || !strings.HasPrefix(ds[0], "ALLOW_PRIVATE_TARGETS: false (worker ") || !strings.Contains(ds[0], "true (api ") {
			t.Errorf("%s: disagreements %q, want ALLOW_PRIVATE_TARGETS with both values and who has them", name, ds)
		}
	}
	for name, log := range map[string]*syncBuffer{"api": &apiLog, "worker": &workerLog} {
		if !strings.Contains(log.String(), "disagree") || !strings.Contains(log.String(), "ALLOW_PRIVATE_TARGETS") {
			t.Errorf("the %s's log does not name the disagreement:\n%s", name, log.String())
		}
	}
	want := "this worker has ALLOW_PRIVATE_TARGETS=false, the API that accepted it had true"
	if got := worker.Explain(config.DestinationRules...); got != want {
		t.Errorf("worker.Explain = %q, want %q", got, want)
	}

	// The API stops: the worker forgets it at its next renewal.
	stopped, stop := context.WithCancel(ctx)
	stop()
	api.Run(stopped)
	if err := worker.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ds, got := worker.Disagreements(), worker.Explain(config.DestinationRules...); len(ds) != 0 || got != "" {
		t.Errorf("after the API stopped: disagreements %q, Explain %q; want none", ds, got)
	}
}
