package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// DefaultURL is where retryctl looks for the API without RETRYD_URL or
// PORT.
const DefaultURL = "http://127.0.0.1:3000"

// baseURL is where the API is: RETRYD_URL; else, with PORT set (as the
// API read it in the same shell, e.g. "PORT=3100 retryd -dev"), that port
// on loopback; else DefaultURL.
func baseURL(getenv func(string) string) string {
	if u := getenv("RETRYD_URL"); u != "" {
		return u
	}
	if p := strings.TrimSpace(getenv("PORT")); p != "" {
		return "http://127.0.0.1:" + p
	}
	return DefaultURL
}

// cli is one invocation's settings and outputs.
type cli struct {
	c      *client.Client
	json   bool
	out    io.Writer
	errOut io.Writer
}

func newRoot(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	base := baseURL(getenv)
	x := &cli{c: client.New(base, getenv("RETRYD_API_KEY")), out: stdout, errOut: stderr}
	root := &cobra.Command{
		Use:   "retryctl",
		Short: "Operate retryd: requests, the dead-letter queue, schedules, flow control",
		Long: "retryctl talks to the retryd API at RETRYD_URL (without it, http://127.0.0.1:$PORT when PORT is set, else " + DefaultURL + ") with RETRYD_API_KEY.\n" +
			"Tables are for people; --json prints the API's JSON as sent.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolVar(&x.json, "json", false, "print the API's JSON instead of a table")
	root.AddCommand(x.submitCmd(), x.listCmd(), x.getCmd(), x.cancelCmd(), x.resendCmd(), x.expungeCmd(), x.dlqCmd(), x.schedulesCmd(), x.topicsCmd(), x.flowsCmd(), x.endpointsCmd(), x.queuesCmd(), x.tenantsCmd(), x.credentialsCmd(), x.signingSecretsCmd(), x.tailCmd(), x.listenCmd())
	return root
}

// fetch calls the API. With --json it prints the answer as sent and
// reports printed; otherwise it decodes the answer into out.
func (x *cli) fetch(ctx context.Context, method, path string, query url.Values, body, out any) (printed bool, err error) {
	return x.fetchWith(ctx, method, path, query, body, nil, out)
}

// fetchWith is fetch with request headers.
func (x *cli) fetchWith(ctx context.Context, method, path string, query url.Values, body any, header http.Header, out any) (printed bool, err error) {
	raw, err := x.c.Raw(ctx, method, path, query, body, header)
	if err != nil {
		return false, err
	}
	if x.json {
		x.printRaw(raw)
		return true, nil
	}
	return false, json.Unmarshal(raw, out)
}

// printRaw prints the API's JSON answer, one document per line.
func (x *cli) printRaw(raw []byte) {
	fmt.Fprintln(x.out, strings.TrimSpace(string(raw)))
}

func (x *cli) table() *tabwriter.Writer { return tabwriter.NewWriter(x.out, 0, 0, 2, ' ', 0) }

// listPage prints a page of requests (GET path with query) as a table,
// and the cursor of the next page.
func (x *cli) listPage(ctx context.Context, path string, query url.Values) error {
	var page client.Page
	if printed, err := x.fetch(ctx, http.MethodGet, path, query, nil, &page); printed || err != nil {
		return err
	}
	x.requestTable(page.Data)
	if page.NextCursor != nil {
		fmt.Fprintf(x.out, "more: --cursor %s\n", *page.NextCursor)
	}
	return nil
}

// requestTable prints requests as a table.
func (x *cli) requestTable(rs []client.Request) {
	w := x.table()
	fmt.Fprintln(w, "ID\tSTATUS\tWAITING FOR\tNEXT ATTEMPT\tATTEMPTS\tLAST\tMETHOD\tURL\tUPDATED")
	for _, r := range rs {
		last := "-"
		switch {
		case r.LastStatusCode != nil:
			last = fmt.Sprint(*r.LastStatusCode)
		case r.FailureClass != nil:
			last = *r.FailureClass
		}
		waiting := "-"
		if r.WaitingFor != nil {
			waiting = *r.WaitingFor
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, waiting, nextAttempt(&r), r.Counts(), last, r.Method,
			shorten(r.URL, 60), when(r.UpdatedAt))
	}
	_ = w.Flush()
}

// nextAttempt is when retryd starts r's next attempt (its nextRetryAt);
// for a request that waits for an event rather than a time, that event.
func nextAttempt(r *client.Request) string {
	switch {
	case r.NextRetryAt != nil:
		return when(r.NextRetryAt)
	case r.WaitingFor != nil:
		if event, ok := map[string]string{"paused": "resume", "queue": "its turn", "parallelism": "a free slot",
			"fair_share": "a free share", "endpoint_open": "a good probe"}[*r.WaitingFor]; ok {
			return "on " + event
		}
		return "on an event"
	}
	return "-"
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (x *cli) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a request with its attempts and redrives",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r client.Request
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathRequests+"/"+url.PathEscape(args[0]), nil, nil, &r); printed || err != nil {
				return err
			}
			x.requestDetail(&r)
			return nil
		},
	}
}

func (x *cli) requestDetail(r *client.Request) {
	w := x.table()
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("id", r.ID)
	row("tenant", r.Tenant)
	row("status", r.Status)
	row("request", r.Method+" "+r.URL)
	if r.Credential != "" {
		row("credential", r.Credential)
	}
	if r.Proxy != "" {
		row("proxy", r.Proxy)
	}
	row("attempts", r.Counts())
	switch {
	case r.WaitingFor != nil:
		row("waiting", strings.TrimPrefix(client.Waiting(*r.WaitingFor, r.NextRetryAt), "waiting "))
	case r.NextRetryAt != nil:
		row("next attempt", when(r.NextRetryAt))
	}
	if r.LastError != nil {
		row("last error", *r.LastError)
	}
	if r.FailureClass != nil {
		row("failure class", *r.FailureClass)
	}
	row("redrives", fmt.Sprint(r.RedriveCount))
	if rf := r.ResentFrom; rf != nil {
		v := rf.ID + " at " + when(rf.At) + " by " + rf.Actor
		if rf.Reason != nil {
			v += ": " + *rf.Reason
		}
		row("resent from", v)
	}
	if len(r.Resends) > 0 {
		row("resends", strings.Join(r.Resends, " "))
	}
	if r.Expunged {
		by := "-"
		if r.ExpungedBy != nil {
			by = *r.ExpungedBy
		}
		if by == "retention" {
			row("payload", "expired at "+when(r.ExpungedAt)+": its payload retention ended (body, headers and response bodies erased)")
		} else {
			row("payload", "expunged at "+when(r.ExpungedAt)+" by "+by+" (body, headers and response bodies erased)")
		}
	}
	row("created", when(r.CreatedAt))
	row("updated", when(r.UpdatedAt))
	if r.Callback != nil {
		row("callback", fmt.Sprintf("%s (%s, %d attempts)", r.Callback.URL, r.Callback.Status, r.Callback.Attempts))
	}
	_ = w.Flush()
	if len(r.Attempts) > 0 {
		fmt.Fprintln(x.out)
		w := x.table()
		fmt.Fprintln(w, "N\tSTARTED\tMS\tSTATUS\tOUTCOME\tERROR")
		for _, a := range r.Attempts {
			code, ms, errText := "-", "-", ""
			if a.StatusCode != nil {
				code = fmt.Sprint(*a.StatusCode)
			}
			if !a.Called {
				code = "no call" // what stopped it is its error; it is not counted as an attempt
			}
			if a.DurationMs != nil {
				ms = fmt.Sprint(*a.DurationMs)
			}
			if a.Error != nil {
				errText = shorten(*a.Error, 80)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", a.N, when(a.StartedAt), ms, code, a.Outcome, errText)
		}
		_ = w.Flush()
	}
	for _, rd := range r.Redrives {
		fmt.Fprintf(x.out, "redrive %d at %s by %s: %s\n", rd.N, when(rd.At), rd.Actor, rd.Reason)
	}
}

func (x *cli) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a pending or retrying request",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r client.Request
			if printed, err := x.fetch(cmd.Context(), http.MethodDelete, client.PathRequests+"/"+url.PathEscape(args[0]), nil, nil, &r); printed || err != nil {
				return err
			}
			fmt.Fprintf(x.out, "%s %s\n", r.ID, r.Status)
			return nil
		},
	}
}

func (x *cli) dlqCmd() *cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "The dead-letter queue: failed requests"}
	var o client.DLQOptions
	list := &cobra.Command{
		Use:   "list",
		Short: "List failed requests, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return x.listPage(cmd.Context(), client.PathDLQ, client.DLQQuery(o))
		},
	}
	list.Flags().StringVar(&o.FailureClass, "failure-class", "", "client_error, redirect, server_error, rate_limited, timeout, network, blocked_destination, interrupted or endpoint_down")
	list.Flags().StringVar(&o.Host, "host", "", "a destination host name, or host:port")
	list.Flags().IntVar(&o.Limit, "limit", 0, "how many (1-500; the API's default is 50)")
	list.Flags().StringVar(&o.Cursor, "cursor", "", "continue after this page")
	list.Flags().StringVar(&o.Tenant, "tenant", "", "with an admin key: this tenant's only")
	dlq.AddCommand(list, x.redriveCmd())
	return dlq
}

func (x *cli) redriveCmd() *cobra.Command {
	var in client.BulkRedriveInput
	var all, dryRun bool
	cmd := &cobra.Command{
		Use:   "redrive [ID] --actor A --reason R | redrive --all [--failure-class C] [--host H] [--limit N] --actor A --reason R [--dry-run]",
		Short: "Send failed requests again (one by id, or every one the filters select)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch {
			case len(args) == 1 && all:
				return errors.New("give an ID or --all, not both")
			case len(args) == 0 && !all:
				return errors.New("give the ID of a failed request, or --all with filters")
			case len(args) == 1 && (in.FailureClass != "" || in.Host != "" || dryRun):
				return errors.New("--failure-class, --host and --dry-run go with --all")
			}
			if len(args) == 1 {
				var r client.Request
				if printed, err := x.fetch(ctx, http.MethodPost, client.PathDLQ+"/"+url.PathEscape(args[0])+"/redrive", nil,
					client.RedriveInput{Actor: in.Actor, Reason: in.Reason}, &r); printed || err != nil {
					return err
				}
				fmt.Fprintf(x.out, "%s redriven (%s, redrive %d)\n", r.ID, r.Status, r.RedriveCount)
				return nil
			}
			if dryRun {
				return x.dryRun(ctx, in)
			}
			var res client.BulkRedriveResult
			if printed, err := x.fetch(ctx, http.MethodPost, client.PathDLQ+"/redrive", nil, in, &res); printed || err != nil {
				return err
			}
			for _, id := range res.Redriven {
				fmt.Fprintf(x.out, "%s redriven\n", id)
			}
			for _, s := range res.Skipped {
				fmt.Fprintf(x.out, "%s skipped: %s\n", s.ID, s.Reason)
			}
			fmt.Fprintf(x.out, "%d redriven, %d skipped\n", len(res.Redriven), len(res.Skipped))
			for _, e := range res.EndpointsOpen {
				fmt.Fprintf(x.out, "%d of them go to %s (tenant %s), still %s: they wait for a probe that succeeds\n",
					len(e.IDs), e.Endpoint, e.Tenant, e.State)
			}
			if res.Stopped != nil {
				fmt.Fprintf(x.out, "stopped early: %s\n", res.Stopped.Message)
			}
			if res.NextCursor != nil {
				fmt.Fprintln(x.out, "more may match: run it again")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Actor, "actor", "", "who redrives (recorded in the request's audit trail)")
	cmd.Flags().StringVar(&in.Reason, "reason", "", "why (recorded in the request's audit trail)")
	cmd.Flags().BoolVar(&all, "all", false, "every failed request the filters select")
	cmd.Flags().StringVar(&in.FailureClass, "failure-class", "", "with --all: only this failure class")
	cmd.Flags().StringVar(&in.Host, "host", "", "with --all: only this destination host (or host:port)")
	cmd.Flags().IntVar(&in.Limit, "limit", 0, "with --all: at most this many (1-1000; the API's default is 100)")
	cmd.Flags().StringVar(&in.Tenant, "tenant", "", "with --all and an admin key: this tenant's only")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "with --all: show what would be redriven, change nothing")
	return cmd
}

// dryRun asks the API what the bulk redrive would do, changing nothing:
// the API walks as the real call does, so requests at their redrive
// limit are listed as skipped, not counted.
func (x *cli) dryRun(ctx context.Context, in client.BulkRedriveInput) error {
	in.DryRun = true
	var res client.BulkRedriveResult
	if printed, err := x.fetch(ctx, http.MethodPost, client.PathDLQ+"/redrive", nil, in, &res); printed || err != nil {
		return err
	}
	for _, id := range res.WouldRedrive {
		fmt.Fprintf(x.out, "%s would be redriven\n", id)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(x.out, "%s would be skipped: %s\n", s.ID, s.Reason)
	}
	fmt.Fprintf(x.out, "dry run: %d would be redriven, %d skipped; nothing changed\n", len(res.WouldRedrive), len(res.Skipped))
	return nil
}

func (x *cli) schedulesCmd() *cobra.Command {
	schedules := &cobra.Command{Use: "schedules", Short: "Recurring requests"}
	var limit int
	var cursor string
	list := &cobra.Command{
		Use:   "list",
		Short: "List schedules, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page client.SchedulePage
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathSchedules, client.PageQuery(limit, cursor), nil, &page); printed || err != nil {
				return err
			}
			w := x.table()
			fmt.Fprintln(w, "ID\tCRON\tTIMEZONE\tSTATE\tNEXT\tLAST REQUEST\tURL")
			for _, s := range page.Data {
				state, next, last := "active", "-", "-"
				if s.Paused {
					state = "paused"
				}
				if len(s.NextFireTimes) > 0 {
					next = s.NextFireTimes[0].UTC().Format(time.RFC3339)
				}
				if len(s.LastFires) > 0 {
					last = s.LastFires[0].RequestID
				}
				u, _ := s.Request["url"].(string)
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Cron, s.Timezone, state, next, last, shorten(u, 50))
			}
			_ = w.Flush()
			if page.NextCursor != nil {
				fmt.Fprintf(x.out, "more: --cursor %s\n", *page.NextCursor)
			}
			return nil
		},
	}
	list.Flags().IntVar(&limit, "limit", 0, "how many (1-500)")
	list.Flags().StringVar(&cursor, "cursor", "", "continue after this page")
	schedules.AddCommand(list, x.scheduleGetCmd(), x.scheduleCreateCmd(),
		x.scheduleActionCmd("pause", "Pause a schedule: no tick fires until it is resumed"),
		x.scheduleActionCmd("resume", "Resume a paused schedule from its next tick"),
		x.scheduleActionCmd("delete", "Delete a schedule (the requests it made stay)"))
	return schedules
}

func (x *cli) endpointsCmd() *cobra.Command {
	endpoints := &cobra.Command{
		Use:   "endpoints",
		Short: "Endpoints that are not closed: state, since, failure ratio, waiting requests, next probe",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res struct {
				Data []client.EndpointHealth `json:"data"`
			}
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathEndpoints, nil, nil, &res); printed || err != nil {
				return err
			}
			w := x.table()
			fmt.Fprintln(w, "ENDPOINT\tTENANT\tSTATE\tSINCE\tFAILED\tWAITING\tNEXT PROBE")
			for _, e := range res.Data {
				next := "-"
				if e.NextProbeAt != nil {
					next = e.NextProbeAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.0f%%\t%d\t%s\n", e.Endpoint, e.Tenant, e.State, e.Since.Format(time.RFC3339),
					100*e.FailureRatio, e.Waiting, next)
			}
			return w.Flush()
		},
	}
	for _, c := range []struct{ action, short string }{
		{"open", "Open an endpoint: its requests wait until it is closed (it is never probed)"},
		{"close", "Close an endpoint: its waiting requests resume in the order they came"},
	} {
		endpoints.AddCommand(&cobra.Command{
			Use:   c.action + " ENDPOINT",
			Short: c.short + "; ENDPOINT is scheme://host:port",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id := strings.Replace(args[0], "://", ":", 1)
				var e client.EndpointHealth
				path := client.PathEndpoints + "/" + url.PathEscape(id) + "/" + c.action
				if printed, err := x.fetch(cmd.Context(), http.MethodPost, path, nil, nil, &e); printed || err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", e.Endpoint, e.State)
				return nil
			},
		})
	}
	endpoints.AddCommand(x.endpointSettingsCmd())
	return endpoints
}

func (x *cli) flowsCmd() *cobra.Command {
	flows := &cobra.Command{
		Use:   "flows",
		Short: "Active flow-control keys: paused or not, in flight, waiting, limits, effective rate",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res struct {
				Data []client.Flow `json:"data"`
			}
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathFlows, nil, nil, &res); printed || err != nil {
				return err
			}
			w := x.table()
			// Shares of the recent attempts (the last minute or two):
			// failed for any reason, and overloaded (429, 503, timeout),
			// the part adaptive backpressure acts on.
			fmt.Fprintln(w, "KEY\tPAUSED\tIN FLIGHT\tWAITING\tPARALLELISM\tRATE\tEFFECTIVE RATE\tRECENT ATTEMPTS\tFAILED\tOVERLOADED (429/503/TIMEOUT)")
			for _, f := range res.Data {
				par, rate, eff := "-", "-", "-"
				if f.Parallelism != nil {
					par = fmt.Sprint(*f.Parallelism)
				}
				if f.Rate != nil && f.PeriodMs != nil {
					rate = fmt.Sprintf("%d/%dms", *f.Rate, *f.PeriodMs)
				}
				if f.EffectiveRate != nil {
					eff = fmt.Sprintf("%.1f/s", *f.EffectiveRate)
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%.0f%%\t%.0f%%\n", f.Key, yesNo(f.Paused), f.InFlight, f.Waiting, par, rate, eff,
					f.RecentAttempts, 100*f.FailureShare, 100*f.OverloadShare)
			}
			return w.Flush()
		},
	}
	flows.AddCommand(x.flowGetCmd(), x.flowActionCmd("pause", "Pause a flow-control key: its requests wait (nothing is lost) until it is resumed"),
		x.flowActionCmd("resume", "Resume a paused flow-control key: its waiting requests start in order"))
	return flows
}
