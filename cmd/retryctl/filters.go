package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// timeFlag reads a time bound: RFC 3339, or a duration that long ago
// ("90m", "2h"), which is what an on-call engineer types.
type timeFlag struct {
	t   *time.Time
	now func() time.Time
}

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f timeFlag) Set(v string) error {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		*f.t = t
		return nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(v, "-"))
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is neither an RFC 3339 time (2025-06-01T12:00:00Z) nor a duration ago (90m, 2h)", v)
	}
	*f.t = f.now().Add(-d)
	return nil
}

func (timeFlag) Type() string { return "time" }

// filterFlags adds the list filters to cmd as flags filling f.
func filterFlags(cmd *cobra.Command, f *client.Filter) {
	fl := cmd.Flags()
	fl.StringVar(&f.Status, "status", "", "pending, retrying, completed, failed or canceled; several comma-separated (failed,pending)")
	fl.StringVar(&f.WaitingFor, "waiting-for", "", "what a pending or retrying request waits for: paused, queue, rate, parallelism, fair_share or endpoint_open; several comma-separated")
	fl.StringVar(&f.Host, "host", "", "the destination's host name, or host:port")
	fl.StringVar(&f.Method, "method", "", "the HTTP method (with another filter: host, label, ...)")
	fl.StringVar(&f.FailureClass, "failure-class", "", "the last attempt's failure class (client_error, server_error, timeout, ...)")
	fl.IntVar(&f.StatusCode, "status-code", 0, "the last attempt's status code")
	for _, t := range []struct {
		name string
		at   *time.Time
		what string
	}{{"created-from", &f.CreatedFrom, "created at or after"}, {"created-to", &f.CreatedTo, "created at or before"},
		{"finished-from", &f.FinishedFrom, "finished at or after (lists by finish time)"}, {"finished-to", &f.FinishedTo, "finished at or before"}} {
		fl.Var(timeFlag{t: t.at, now: time.Now}, t.name, t.what+": an RFC 3339 time, or a duration ago (90m)")
	}
	fl.StringVar(&f.Label, "label", "", "one of the request's labels")
	fl.StringVar(&f.URLContains, "url-contains", "", "text in the URL, any case (with --host or --label)")
}

func (x *cli) listCmd() *cobra.Command {
	var o client.ListOptions
	cmd := &cobra.Command{
		Use:   "list [--host H] [--status S] [--failure-class C] [--created-from 1h] ...",
		Short: "List requests, newest first, by any of the filters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return x.listPage(cmd.Context(), client.PathRequests, client.ListQuery(o))
		},
	}
	filterFlags(cmd, &o.Filter)
	cmd.Flags().IntVar(&o.Limit, "limit", 0, "how many (1-500; the API's default is 50)")
	cmd.Flags().StringVar(&o.Cursor, "cursor", "", "continue after this page")
	cmd.Flags().StringVar(&o.Tenant, "tenant", "", "with an admin key: this tenant's only")
	return cmd
}

// bulkFlags adds what a bulk call by filter takes besides its filter.
func bulkFlags(cmd *cobra.Command, f *client.Filter, o *client.BulkOptions) {
	filterFlags(cmd, f)
	cmd.Flags().IntVar(&o.Limit, "limit", 0, "with filters: look at most at this many (1-1000; the API's default is 100)")
	cmd.Flags().StringVar(&o.Cursor, "cursor", "", "with filters: go on after an earlier call")
	cmd.Flags().StringVar(&o.Tenant, "tenant", "", "with filters and an admin key: this tenant's only")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "with filters: show what would be done, change nothing")
}

// oneOrFilter checks that a command names one id or a filter, not both.
func oneOrFilter(args []string, f client.Filter, o client.BulkOptions) error {
	switch {
	case len(args) == 1 && !f.Empty():
		return errors.New("give an ID or filters, not both")
	case len(args) == 1 && (o.DryRun || o.Limit != 0 || o.Cursor != "" || o.Tenant != ""):
		return errors.New("--dry-run, --limit, --cursor and --tenant go with filters")
	case len(args) == 0 && f.Empty():
		return errors.New("give the ID of a request, or filters (--host, --status, ...) to act on every request they select")
	}
	return nil
}

// bulkReport prints what a bulk call did (verb) or would do, and what
// it skipped.
func (x *cli) bulkReport(verb string, did []string, skipped []client.Skipped, dryRun bool, next *string, stopped *client.Stopped) {
	would := ""
	if dryRun {
		would = "would be "
	}
	for _, id := range did {
		fmt.Fprintf(x.out, "%s %s%s\n", id, would, verb)
	}
	for _, s := range skipped {
		fmt.Fprintf(x.out, "%s %sskipped: %s\n", s.ID, would, s.Reason)
	}
	if dryRun {
		fmt.Fprintf(x.out, "dry run: %d would be %s, %d skipped; nothing changed\n", len(did), verb, len(skipped))
	} else {
		fmt.Fprintf(x.out, "%d %s, %d skipped\n", len(did), verb, len(skipped))
	}
	if stopped != nil {
		fmt.Fprintf(x.out, "stopped early: %s\n", stopped.Message)
	}
	if next != nil {
		fmt.Fprintf(x.out, "more: --cursor %s\n", *next)
	}
}

func (x *cli) resendCmd() *cobra.Command {
	var in client.ResendInput
	var idemKey string
	var f client.Filter
	var o client.BulkOptions
	cmd := &cobra.Command{
		Use:   "resend ID [--reason R] [--actor A] [--idempotency-key K] | resend --host H [filters] [--dry-run]",
		Short: "Send finished requests (completed, failed or canceled) again, each as a new request: one by id, or every one the filters select",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := oneOrFilter(args, f, o); err != nil {
				return err
			}
			if len(args) == 0 {
				return x.bulkResend(cmd.Context(), f, o, in)
			}
			var h http.Header
			if idemKey != "" {
				h = http.Header{"Idempotency-Key": {idemKey}}
			}
			var r client.Request
			if printed, err := x.fetchWith(cmd.Context(), http.MethodPost, client.PathRequests+"/"+url.PathEscape(args[0])+"/resend", nil,
				in, h, &r); printed || err != nil {
				return err
			}
			fmt.Fprintf(x.out, "%s resent as %s (%s)\n", args[0], r.ID, r.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Actor, "actor", "", "who resends (recorded on the new request; the API's default is api)")
	cmd.Flags().StringVar(&in.Reason, "reason", "", "why (recorded on the new request)")
	cmd.Flags().StringVar(&idemKey, "idempotency-key", "", "with an ID: a repeated call with the same key returns the same new request")
	bulkFlags(cmd, &f, &o)
	return cmd
}

func (x *cli) bulkResend(ctx context.Context, f client.Filter, o client.BulkOptions, in client.ResendInput) error {
	o.Actor = in.Actor
	q := client.BulkQuery(f, o)
	if in.Reason != "" {
		q.Set("reason", in.Reason)
	}
	var res client.BulkResendResult
	if printed, err := x.fetch(ctx, http.MethodPost, client.PathRequests+"/resend", q, nil, &res); printed || err != nil {
		return err
	}
	did := res.WouldResend
	if !o.DryRun {
		did = nil
		for _, r := range res.Resent {
			did = append(did, r.ID+" as "+r.ResendID)
		}
	}
	x.bulkReport("resent", did, res.Skipped, o.DryRun, res.NextCursor, res.Stopped)
	return nil
}

func (x *cli) expungeCmd() *cobra.Command {
	var in client.ExpungeInput
	var f client.Filter
	var o client.BulkOptions
	cmd := &cobra.Command{
		Use:   "expunge ID [--actor A] | expunge --host H [filters] [--dry-run]",
		Short: "Erase finished requests' bodies, headers and response bodies, keeping their metadata: one by id, or every one the filters select",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := oneOrFilter(args, f, o); err != nil {
				return err
			}
			if len(args) == 0 {
				o.Actor = in.Actor
				var res client.BulkExpungeResult
				if printed, err := x.fetch(cmd.Context(), http.MethodDelete, client.PathRequests+"/payload", client.BulkQuery(f, o), nil, &res); printed || err != nil {
					return err
				}
				did := res.Expunged
				if o.DryRun {
					did = res.WouldExpunge
				}
				x.bulkReport("expunged", did, res.Skipped, o.DryRun, res.NextCursor, res.Stopped)
				return nil
			}
			var r client.Request
			if printed, err := x.fetch(cmd.Context(), http.MethodDelete, client.PathRequests+"/"+url.PathEscape(args[0])+"/payload", nil,
				in, &r); printed || err != nil {
				return err
			}
			by := "-"
			if r.ExpungedBy != nil {
				by = *r.ExpungedBy
			}
			fmt.Fprintf(x.out, "%s payload expunged (%s, by %s at %s)\n", r.ID, r.Status, by, when(r.ExpungedAt))
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Actor, "actor", "", "who erases (recorded as expungedBy; the API's default is api)")
	bulkFlags(cmd, &f, &o)
	return cmd
}
