package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// topicsCmd: retryctl topics list|get|add|remove|delete|publish|publication.
func (x *cli) topicsCmd() *cobra.Command {
	topics := &cobra.Command{Use: "topics", Short: "Topics: named sets of endpoints a request is published to, one request each"}
	path := func(name string, rest ...string) string {
		return strings.Join(append([]string{client.PathTopics, url.PathEscape(name)}, rest...), "/")
	}
	showTopic := func(tp client.Topic) {
		w := x.table()
		fmt.Fprintf(w, "topic:\t%s\ntenant:\t%s\n", tp.Name, tp.Tenant)
		for _, e := range tp.Endpoints {
			fmt.Fprintf(w, "endpoint:\t%s\t%s\n", e.URL, e.Name)
		}
		_ = w.Flush()
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res client.TopicList
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathTopics, nil, nil, &res); printed || err != nil {
				return err
			}
			w := x.table()
			fmt.Fprintln(w, "TOPIC\tTENANT\tENDPOINTS")
			for _, tp := range res.Data {
				fmt.Fprintf(w, "%s\t%s\t%d\n", tp.Name, tp.Tenant, len(tp.Endpoints))
			}
			return w.Flush()
		},
	}
	get := &cobra.Command{
		Use:   "get <topic>",
		Short: "A topic's endpoints",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tp client.Topic
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, path(args[0]), nil, nil, &tp); printed || err != nil {
				return err
			}
			showTopic(tp)
			return nil
		},
	}
	// endpoints reads URLs, each optionally name=URL.
	endpoints := func(args []string) client.Endpoints {
		var eps client.Endpoints
		for _, a := range args {
			name, u, ok := strings.Cut(a, "=")
			if !ok || strings.Contains(name, "://") {
				name, u = "", a
			}
			eps.Endpoints = append(eps.Endpoints, client.Endpoint{Name: name, URL: u})
		}
		return eps
	}
	change := func(use, short, method string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " <topic> [name=]<url>...",
			Short: short,
			Args:  cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				var tp client.Topic
				if printed, err := x.fetch(cmd.Context(), method, path(args[0], "endpoints"), nil, endpoints(args[1:]), &tp); printed || err != nil {
					return err
				}
				showTopic(tp)
				return nil
			},
		}
	}
	del := &cobra.Command{
		Use:   "delete <topic>",
		Short: "Delete a topic (the requests published to it stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tp client.Topic
			if printed, err := x.fetch(cmd.Context(), http.MethodDelete, path(args[0]), nil, nil, &tp); printed || err != nil {
				return err
			}
			fmt.Fprintf(x.out, "deleted topic %s\n", tp.Name)
			return nil
		},
	}
	var body, method string
	publish := &cobra.Command{
		Use:   "publish <topic>",
		Short: "Publish a request to every endpoint of a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := map[string]any{"method": method}
			if body == "-" {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return err
				}
				body = string(b)
			}
			if body != "" {
				s["body"] = body
			}
			var p client.Publication
			if printed, err := x.fetch(cmd.Context(), http.MethodPost, path(args[0], "requests"), nil, s, &p); printed || err != nil {
				return err
			}
			x.showPublication(p)
			return nil
		},
	}
	publish.Flags().StringVar(&body, "body", "", "the body each endpoint receives (- reads stdin)")
	publish.Flags().StringVar(&method, "method", http.MethodPost, "the HTTP method")
	publication := &cobra.Command{
		Use:   "publication <id>",
		Short: "A publish's requests and their statuses",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p client.Publication
			if printed, err := x.fetch(cmd.Context(), http.MethodGet, "/publications/"+url.PathEscape(args[0]), nil, nil, &p); printed || err != nil {
				return err
			}
			x.showPublication(p)
			return nil
		},
	}
	topics.AddCommand(list, get, change("add", "Add endpoints to a topic (made on first use)", http.MethodPost),
		change("remove", "Remove endpoints of a topic, by URL (or by name: name=)", http.MethodDelete), del, publish, publication)
	return topics
}

func (x *cli) showPublication(p client.Publication) {
	w := x.table()
	fmt.Fprintf(w, "publication:\t%s\ntopic:\t%s\n", p.ID, p.Topic)
	fmt.Fprintln(w, "REQUEST\tSTATUS\tENDPOINT\tURL")
	for _, r := range p.Requests {
		st := "expired"
		if r.Status != nil {
			st = *r.Status
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.ID, st, r.Endpoint, r.URL)
	}
	_ = w.Flush()
}
