package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/handlers"
)

// workerWatch tuning: the first look waits for workers started with the
// API; later looks follow asynq's heartbeats.
const (
	workerWatchFirst = 15 * time.Second
	workerWatchEvery = 30 * time.Second
)

// liveWorkers counts the workers whose heartbeat asynq holds.
func liveWorkers(in *asynq.Inspector) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		servers, err := in.Servers()
		return len(servers), err
	}
}

// watchWorkers logs when no worker runs, and when one runs again: an API
// alone takes requests that nothing delivers.
func watchWorkers(ctx context.Context, count func(context.Context) (int, error), log *slog.Logger) {
	t := time.NewTimer(workerWatchFirst)
	defer t.Stop()
	none := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := count(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.Warn("could not count the workers", "err", err)
			}
		case n == 0 && !none:
			log.Warn(handlers.NoWorkers)
		case n > 0 && none:
			log.Info("a worker runs again", "workers", n)
		}
		if err == nil {
			none = n == 0
		}
		t.Reset(workerWatchEvery)
	}
}
