// Command worker is retryd's delivery worker: an asynq server that performs
// the HTTP attempts. Run as many as needed; they share nothing but Redis.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "retryd worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return app.RunWorker(ctx, cfg, app.NewLogger(stdout, cfg.LogLevel))
}
