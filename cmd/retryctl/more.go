package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// tenantsCmd is tenants list, and tenants retention TENANT [--retention D]
// [--payload-retention D] [--clear].
func (x *cli) tenantsCmd() *cobra.Command {
	tenants := &cobra.Command{Use: "tenants", Short: "The tenants (an admin's key), and their settings: retention"}
	tenants.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the tenants: those API_KEYS names and those that stored a request",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var doc struct {
				Tenants []struct {
					Tenant string `json:"tenant"`
					Keys   int    `json:"keys"`
				} `json:"tenants"`
			}
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathTenants, nil, nil, &doc); printed || err != nil {
				return err
			}
			w := x.table()
			fmt.Fprintln(w, "TENANT\tKEYS")
			for _, t := range doc.Tenants {
				fmt.Fprintf(w, "%s\t%d\n", t.Tenant, t.Keys)
			}
			return w.Flush()
		},
	})
	var records, payload string
	var clear bool
	retention := &cobra.Command{
		Use:   "retention TENANT [--retention D] [--payload-retention D | off] [--clear]",
		Short: "Show a tenant's retention; an admin sets it (--retention, --payload-retention) or goes back to the defaults (--clear)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := cmd.Flags().Changed("retention") || cmd.Flags().Changed("payload-retention")
			if clear && set {
				return errors.New("--clear goes back to the defaults: give it without --retention or --payload-retention")
			}
			method, path := http.MethodGet, client.PathTenants+"/"+url.PathEscape(args[0])+"/retention"
			var body any
			switch {
			case clear:
				method = http.MethodDelete
			case set:
				in := client.RetentionSettings{}
				if cmd.Flags().Changed("retention") {
					in.Retention = &records
				}
				if cmd.Flags().Changed("payload-retention") {
					in.PayloadRetention = &payload
					if payload == "off" {
						in.PayloadRetention = nil
					}
				}
				method, body = http.MethodPut, in
			}
			var doc client.Retention
			if printed, err := x.fetch(cmd.Context(), method, path, nil, body, &doc); printed || err != nil {
				return err
			}
			w := x.table()
			fmt.Fprintf(w, "tenant\t%s\n", doc.Tenant)
			fmt.Fprintf(w, "retention\t%s\t%s\n", doc.Retention, origin(doc.Set.Retention))
			fmt.Fprintf(w, "payload retention\t%s\t%s\n", orDash(doc.PayloadRetention, "as long as the record"), origin(doc.Set.PayloadRetention))
			return w.Flush()
		},
	}
	retention.Flags().StringVar(&records, "retention", "", "how long the tenant's finished records are kept (30d, 720h)")
	retention.Flags().StringVar(&payload, "payload-retention", "", "erase a finished request's payload this long after it finished (7d, 24h); off: the default")
	retention.Flags().BoolVar(&clear, "clear", false, "forget what was set: the defaults (RETENTION, PAYLOAD_RETENTION) apply again")
	tenants.AddCommand(retention)
	return tenants
}

// origin says where a retention comes from: set for the tenant, or the
// process-wide default.
func origin(set *string) string {
	if set != nil {
		return "(set for the tenant)"
	}
	return "(the default)"
}

func orDash(s *string, none string) string {
	if s == nil {
		return none
	}
	return *s
}

// scheduleGetCmd is schedules get ID.
func (x *cli) scheduleGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "One schedule: its cron, state, next ticks, the requests it made and the request it submits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sc client.Schedule
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathSchedules+"/"+url.PathEscape(args[0]), nil, nil, &sc); printed || err != nil {
				return err
			}
			state := "active"
			if sc.Paused {
				state = "paused"
			}
			w := x.table()
			fmt.Fprintf(w, "id\t%s\ncron\t%s\ntimezone\t%s\nstate\t%s\n", sc.ID, sc.Cron, sc.Timezone, state)
			if sc.CatchUp != "" {
				fmt.Fprintf(w, "catch up\t%s\n", sc.CatchUp)
			}
			for i, t := range sc.NextFireTimes {
				fmt.Fprintf(w, "%s\t%s\n", map[bool]string{true: "next", false: ""}[i == 0], t.UTC().Format(time.RFC3339))
			}
			for i, f := range sc.LastFires {
				fmt.Fprintf(w, "%s\t%s %s\n", map[bool]string{true: "last fires", false: ""}[i == 0], f.FireTime.UTC().Format(time.RFC3339), f.RequestID)
			}
			method, _ := sc.Request["method"].(string)
			u, _ := sc.Request["url"].(string)
			fmt.Fprintf(w, "request\t%s %s\n", strings.TrimSpace(method+" "), u)
			return w.Flush()
		},
	}
}

// queuesCmd is retryd's QStash queues (/v2/queues): ordered lines of
// messages with a parallelism.
func (x *cli) queuesCmd() *cobra.Command {
	queues := &cobra.Command{
		Use:   "queues",
		Short: "QStash queues (/v2/queues): list, get, set, pause, resume, delete",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var qs []client.Queue
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathQueues, nil, nil, &qs); printed || err != nil {
				return err
			}
			w := x.table()
			fmt.Fprintln(w, "NAME\tPARALLELISM\tLAG\tPAUSED")
			for _, q := range qs {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", q.Name, q.Parallelism, q.Lag, yesNo(q.Paused))
			}
			return w.Flush()
		},
	}
	show := func(cmd *cobra.Command, name string) error {
		var q client.Queue
		if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathQueues+"/"+url.PathEscape(name), nil, nil, &q); printed || err != nil {
			return err
		}
		fmt.Fprintf(x.out, "%s parallelism %d, lag %d, paused %s\n", q.Name, q.Parallelism, q.Lag, yesNo(q.Paused))
		return nil
	}
	queues.AddCommand(&cobra.Command{
		Use: "get NAME", Short: "One queue: parallelism, lag (messages not yet delivered), paused", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return show(cmd, args[0]) },
	})
	var parallelism int
	set := &cobra.Command{
		Use: "set NAME --parallelism N", Short: "Create a queue or change its parallelism", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("parallelism") {
				return errors.New("give --parallelism N: how many of the queue's messages are delivered at once")
			}
			in := map[string]any{"queueName": args[0], "parallelism": parallelism}
			if _, err := x.c.Raw(cmd.Context(), http.MethodPost, client.PathQueues, nil, in, nil); err != nil {
				return err
			}
			return show(cmd, args[0])
		},
	}
	set.Flags().IntVar(&parallelism, "parallelism", 1, "messages of the queue delivered at once")
	queues.AddCommand(set)
	for _, a := range []struct{ action, short string }{
		{"pause", "Pause a queue: its messages wait, in order, until it is resumed"},
		{"resume", "Resume a paused queue"},
		{"delete", "Delete a queue"},
	} {
		queues.AddCommand(&cobra.Command{
			Use: a.action + " NAME", Short: a.short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				method, path := http.MethodPost, client.PathQueues+"/"+url.PathEscape(args[0])+"/"+a.action
				if a.action == "delete" {
					method, path = http.MethodDelete, client.PathQueues+"/"+url.PathEscape(args[0])
				}
				if _, err := x.c.Raw(cmd.Context(), method, path, nil, nil, nil); err != nil {
					return err
				}
				if a.action == "delete" {
					fmt.Fprintf(x.out, "%s deleted\n", args[0])
					return nil
				}
				return show(cmd, args[0])
			},
		})
	}
	return queues
}
