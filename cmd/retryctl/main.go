// Command retryctl is retryd's operator CLI: submit, list, inspect,
// cancel, resend and expunge requests, work the dead-letter queue, manage
// schedules, pause and resume flow-control keys, keep the tenant's
// credentials and signing secrets, and follow outcomes live. It reads RETRYD_URL (default http://127.0.0.1:3000)
// and RETRYD_API_KEY. Tables are for people; --json prints the API's JSON
// as sent. Any error exits non-zero with the API's message.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/retryd/retryd/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	root := newRoot(getenv, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "retryctl:", err)
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
			fmt.Fprintln(stderr, "retryctl: set RETRYD_API_KEY to a key of the API's API_KEYS or ADMIN_KEYS")
		}
		return 1
	}
	return 0
}
