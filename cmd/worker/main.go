// Command worker is retryd's delivery worker: an asynq server that performs
// the HTTP attempts. Run as many as needed; they share nothing but Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/timerslack"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "retryd worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	healthcheck := fs.Bool("healthcheck", false, "ask the worker's METRICS_ADDR for /healthz and exit 0 if it answers 200 (container health checks)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	if *healthcheck {
		if cfg.MetricsAddr == "" {
			return fmt.Errorf("-healthcheck needs METRICS_ADDR: without it the worker listens on nothing")
		}
		addr := cfg.MetricsAddr
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		return app.Healthcheck(ctx, "http://"+addr+"/healthz")
	}
	log := app.NewLogger(stdout, cfg.LogLevel)
	// First, before anything starts: with TIMER_SLACK set, on success it
	// executes the program again and does not return. Signals are caught
	// only after it, so none is taken by an image the exec replaces.
	if err := timerslack.Ensure(cfg.TimerSlack); err != nil {
		log.Warn("running with the system's timer slack", "err", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.RunWorker(ctx, cfg, app.WorkerOptions{Faults: faultpoint.FromEnv(getenv)}, log)
}
