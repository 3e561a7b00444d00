package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// requestFlags are the flags that describe one request, shared by submit
// and schedules create.
type requestFlags struct {
	method      string
	headers     []string
	data        string
	retries     int
	backoff     time.Duration
	maxBackoff  time.Duration
	timeout     time.Duration
	callback    string
	flowKey     string
	parallelism int
	rate        int
	period      time.Duration
	credential  string
	proxy       string
}

func (f *requestFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.method, "method", "X", "", "HTTP method (the API's default is GET)")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, `a header "Name: value" (repeatable)`)
	fl.StringVarP(&f.data, "data", "d", "", "the body, sent as is; @FILE reads it from FILE")
	fl.StringVar(&f.data, "body", "", "the same as --data")
	fl.IntVar(&f.retries, "retries", 0, "retries after the first attempt (0-25; the API's default is 5)")
	fl.DurationVar(&f.backoff, "backoff", 0, "base delay before a retry, e.g. 500ms, 2s (the API's default is 1s)")
	fl.DurationVar(&f.maxBackoff, "max-backoff", 0, "cap on one delay, e.g. 10m (the API's default is 1h)")
	fl.DurationVar(&f.timeout, "timeout", 0, "one attempt's deadline, e.g. 10s (the API's default is 30s)")
	fl.StringVar(&f.callback, "callback", "", "a URL told the final outcome")
	fl.StringVar(&f.flowKey, "flow-key", "", "the flow-control key shared by requests limited together")
	fl.IntVar(&f.parallelism, "parallelism", 0, "with --flow-key: at most this many at once")
	fl.IntVar(&f.rate, "rate", 0, "with --flow-key: at most this many started per --period")
	fl.DurationVar(&f.period, "period", 0, "with --rate: its period (the API's default is 1s)")
	fl.StringVar(&f.credential, "credential", "", "the tenant's credential its deliveries use (else the endpoint's settings)")
	fl.StringVar(&f.proxy, "proxy", "", "the tenant's proxy credential its deliveries leave through (else the endpoint's settings)")
}

// submission builds the request body; flags not given are left to the
// API's defaults.
func (f *requestFlags) submission(cmd *cobra.Command, target string) (client.Submission, error) {
	s := client.Submission{URL: target, Method: strings.ToUpper(f.method), CallbackURL: f.callback,
		BackoffMs: f.backoff.Milliseconds(), MaxBackoffMs: f.maxBackoff.Milliseconds(), TimeoutMs: f.timeout.Milliseconds(),
		Credential: f.credential, Proxy: f.proxy}
	if cmd.Flags().Changed("retries") {
		n := f.retries
		s.MaxRetries = &n
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return s, fmt.Errorf(`--header %q: give it as "Name: value"`, h)
		}
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		s.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	s.Body = f.data
	if file, ok := strings.CutPrefix(f.data, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return s, fmt.Errorf("--data: %w", err)
		}
		s.Body = string(b)
	}
	if f.flowKey != "" {
		s.FlowControl = &client.FlowControl{Key: f.flowKey, Parallelism: f.parallelism, Rate: f.rate, PeriodMs: f.period.Milliseconds()}
	} else if f.parallelism != 0 || f.rate != 0 || f.period != 0 {
		return s, errors.New("--parallelism, --rate and --period go with --flow-key")
	}
	return s, nil
}

func (x *cli) submitCmd() *cobra.Command {
	var f requestFlags
	var delay time.Duration
	var idemKey string
	cmd := &cobra.Command{
		Use:   "submit URL [-X METHOD] [-H 'Name: value']... [-d BODY|@FILE] [--retries N] [--backoff D] [--flow-key K]",
		Short: "Submit a request for retryd to deliver",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.submission(cmd, args[0])
			if err != nil {
				return err
			}
			s.DelayMs = delay.Milliseconds()
			var h http.Header
			if idemKey != "" {
				h = http.Header{"Idempotency-Key": {idemKey}}
			}
			var a client.Accepted
			if printed, err := x.fetchWith(cmd.Context(), http.MethodPost, client.PathRequests, nil, s, h, &a); printed || err != nil {
				return err
			}
			fmt.Fprintf(x.out, "%s %s\n", a.ID, a.Status)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().DurationVar(&delay, "delay", 0, "first attempt after this long, e.g. 10m")
	cmd.Flags().StringVar(&idemKey, "idempotency-key", "", "a repeated submission with the same key is accepted once")
	return cmd
}

// flowActionCmd is flows pause|resume KEY. A resume says how many
// waiting requests it released, as the API answered: after it none wait.
func (x *cli) flowActionCmd(action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " KEY",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var info client.FlowInfo
			if printed, err := x.fetch(cmd.Context(), http.MethodPost, client.PathFlows+"/"+url.PathEscape(args[0])+"/"+action, nil, nil, &info); printed || err != nil {
				return err
			}
			state := "running"
			if info.IsPaused {
				state = "paused"
			}
			if info.Released != nil {
				fmt.Fprintf(x.out, "%s %s (%d released, %d waiting)\n", info.FlowControlKey, state, *info.Released, info.WaitListSize)
				return nil
			}
			fmt.Fprintf(x.out, "%s %s (%d waiting)\n", info.FlowControlKey, state, info.WaitListSize)
			return nil
		},
	}
}

// flowGetCmd is flows get KEY: one key's state, its pins and its pause.
func (x *cli) flowGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get KEY",
		Short: "One flow-control key: waiting, in flight, limits and pins, paused or not",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var info client.FlowInfo
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathFlows+"/"+url.PathEscape(args[0]), nil, nil, &info); printed || err != nil {
				return err
			}
			limit := func(n int, pinned bool, unit string) string {
				if n == 0 {
					return "-"
				}
				s := fmt.Sprint(n) + unit
				if pinned {
					s += " (pinned)"
				}
				return s
			}
			w := x.table()
			fmt.Fprintf(w, "key\t%s\ntenant\t%s\npaused\t%s\nwaiting\t%d\nin flight\t%d\n", info.FlowControlKey, info.Tenant, yesNo(info.IsPaused), info.WaitListSize, info.ParallelismCount)
			fmt.Fprintf(w, "parallelism\t%s\nrate\t%s\n", limit(info.ParallelismMax, info.IsPinnedParallelism, ""),
				limit(info.RateMax, info.IsPinnedRate, fmt.Sprintf("/%ds", max(info.RatePeriod, 1))))
			return w.Flush()
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (x *cli) scheduleCreateCmd() *cobra.Command {
	var f requestFlags
	var in struct {
		Cron     string            `json:"cron"`
		Timezone string            `json:"timezone,omitempty"`
		CatchUp  string            `json:"catchUp,omitempty"`
		Request  client.Submission `json:"request"`
	}
	cmd := &cobra.Command{
		Use:   "create URL --cron SPEC [--timezone TZ] [--catch-up last] [request flags as submit's]",
		Short: "Create a schedule: a request submitted at every tick of a cron spec",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in.Cron == "" {
				return errors.New("give --cron, e.g. --cron '*/5 * * * *' or --cron @hourly")
			}
			s, err := f.submission(cmd, args[0])
			if err != nil {
				return err
			}
			in.Request = s
			var sc client.Schedule
			if printed, err := x.fetch(cmd.Context(), http.MethodPost, client.PathSchedules, nil, in, &sc); printed || err != nil {
				return err
			}
			next := "-"
			if len(sc.NextFireTimes) > 0 {
				next = sc.NextFireTimes[0].UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(x.out, "%s created (%s %s, next %s)\n", sc.ID, sc.Cron, sc.Timezone, next)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&in.Cron, "cron", "", "5 cron fields or a descriptor (@hourly, @every 30s)")
	cmd.Flags().StringVar(&in.Timezone, "timezone", "", "IANA time zone (the API's default is UTC)")
	cmd.Flags().StringVar(&in.CatchUp, "catch-up", "", "none or last: fire a tick missed while retryd was down")
	return cmd
}

// scheduleActionCmd is schedules pause|resume|delete ID.
func (x *cli) scheduleActionCmd(action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			method, path := http.MethodPost, client.PathSchedules+"/"+url.PathEscape(args[0])+"/"+action
			if action == "delete" {
				method, path = http.MethodDelete, client.PathSchedules+"/"+url.PathEscape(args[0])
			}
			var sc client.Schedule
			if printed, err := x.fetch(cmd.Context(), method, path, nil, nil, &sc); printed || err != nil {
				return err
			}
			done := map[string]string{"pause": "paused", "resume": "resumed", "delete": "deleted"}[action]
			fmt.Fprintf(x.out, "%s %s\n", args[0], done)
			return nil
		},
	}
}
