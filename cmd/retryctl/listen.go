package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// listenCmd serves a local destination to try retryd with: it prints each
// delivery and answers it, failing the first ones when asked, so a
// newcomer sees retries without a destination of their own (or internet).
func (x *cli) listenCmd() *cobra.Command {
	var fail, status int
	cmd := &cobra.Command{
		Use:   "listen [address]",
		Short: "Serve a local destination that prints every delivery (default 127.0.0.1:4000)",
		Long: "listen serves a destination on address (default 127.0.0.1:4000) that prints each call it gets and answers it:\n" +
			"--fail N answers 503 to the first N calls, then --status (default 200). Stop it with Ctrl-C.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr := "127.0.0.1:4000"
			if len(args) == 1 {
				addr = args[0]
			}
			return x.listen(cmd.Context(), addr, fail, status)
		},
	}
	cmd.Flags().IntVar(&fail, "fail", 0, "answer 503 to the first N calls")
	cmd.Flags().IntVar(&status, "status", http.StatusOK, "the answer after the failures")
	return cmd
}

func (x *cli) listen(ctx context.Context, addr string, fail, status int) error {
	if status < 100 || status > 599 {
		return fmt.Errorf("--status %d is not an HTTP status", status)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	var mu sync.Mutex
	calls := 0
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		mu.Lock()
		defer mu.Unlock() // one line per call, in order
		calls++
		n := calls
		code := status
		if n <= fail {
			code = http.StatusServiceUnavailable
		}
		fmt.Fprintf(x.out, "%s  call %d  %s %s  attempt %s  request %s  -> %d  %q\n", time.Now().Format("15:04:05.000"), n,
			r.Method, r.URL.RequestURI(), r.Header.Get("Retryd-Attempt"), r.Header.Get("Retryd-Request-Id"), code, body)
		w.WriteHeader(code)
	})}
	fmt.Fprintf(x.out, "listening on http://%s (first %d calls answered 503, then %d)\n", ln.Addr(), fail, status)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
