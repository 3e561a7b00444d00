package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// tail follows outcomes live: it reads the newest requests every interval
// and prints each change of a request's status or attempt count once. The
// API has no push channel, so this polls; one GET of the newest page per
// interval.
func (x *cli) tailCmd() *cobra.Command {
	var interval time.Duration
	var limit int
	var status string
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow outcomes live (attempts, completions, failures) until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			seen := map[string]string{} // id -> status/attempts last printed
			first := true
			for {
				raw, err := x.c.Raw(ctx, http.MethodGet, client.PathRequests, client.ListQuery(client.ListOptions{Filter: client.Filter{Status: status}, Limit: limit}), nil, nil)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				var page struct {
					Data []json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal(raw, &page); err != nil {
					return err
				}
				// Oldest first, so the output reads in time order.
				for i := len(page.Data) - 1; i >= 0; i-- {
					var r client.Request
					if err := json.Unmarshal(page.Data[i], &r); err != nil {
						return err
					}
					state := fmt.Sprintf("%s/%d", r.Status, r.AttemptCount)
					if seen[r.ID] == state {
						continue
					}
					seen[r.ID] = state
					if first && r.Status != "pending" && r.Status != "retrying" {
						continue // history: tail shows what happens from now on
					}
					x.tailLine(page.Data[i], &r)
				}
				if first {
					fmt.Fprintf(x.errOut, "retryctl: following the newest %d requests every %v (Ctrl-C to stop)\n", limit, interval)
				}
				first = false
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to look")
	cmd.Flags().IntVar(&limit, "limit", 100, "how many of the newest requests to watch (1-500)")
	cmd.Flags().StringVar(&status, "status", "", "only requests in this status")
	return cmd
}

func (x *cli) tailLine(raw json.RawMessage, r *client.Request) {
	if x.json {
		x.printRaw(raw)
		return
	}
	last := ""
	switch {
	case r.LastStatusCode != nil:
		last = fmt.Sprintf(" last=%d", *r.LastStatusCode)
	case r.FailureClass != nil:
		last = " last=" + *r.FailureClass
	}
	fmt.Fprintf(x.out, "%s %s %-9s %s%s %s %s\n", time.Now().UTC().Format("15:04:05"), r.ID, r.Status,
		r.Counts(), last, r.Method, shorten(r.URL, 60))
}
