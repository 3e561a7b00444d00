// Command api is retryd's HTTP API: it accepts requests, serves their
// records, and (with -dev) runs a whole retryd in one process on an embedded
// in-memory Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/timerslack"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "retryd api:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	dev := fs.Bool("dev", false, "zero-setup local mode: embedded in-memory Redis, in-process worker, loopback and private destinations allowed, listening on 127.0.0.1; nothing persists")
	listen := fs.String("listen", "", "address to listen on (default :PORT, or 127.0.0.1:PORT with -dev)")
	qstashDev := fs.String("qstash-dev", "127.0.0.1:8080", "with -dev, also serve as QStash's local development server on this address, with the SDK's dev token and signing keys (\"\" to not)")
	healthcheck := fs.Bool("healthcheck", false, "ask the API on PORT for /healthz and exit 0 if it answers 200 (container health checks)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	if *healthcheck {
		return app.Healthcheck(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", cfg.Port))
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
	return app.RunAPI(ctx, cfg, app.Options{Dev: *dev, Listen: *listen, QStashDevAddr: *qstashDev, Faults: faultpoint.FromEnv(getenv)}, log)
}
