package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryd/retryd/client"
)

// tenantQuery is ?tenant= for an admin acting on another tenant than
// the default one; nil without it.
func tenantQuery(t string) url.Values {
	if t == "" {
		return nil
	}
	return url.Values{"tenant": {t}}
}

func (x *cli) credentialsCmd() *cobra.Command {
	var tenant string
	creds := &cobra.Command{
		Use:   "credentials",
		Short: "The tenant's credentials (OAuth2, basic, bearer, headers, mTLS, proxies); their secrets are never shown",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return x.listCredentials(cmd, tenant) },
	}
	creds.PersistentFlags().StringVar(&tenant, "tenant", "", "with an admin key: this tenant's (else the default tenant's)")
	var file string
	create := &cobra.Command{
		Use:   "create NAME --from-file FILE.json",
		Short: "Store a credential from a JSON document ({\"type\": ..., its members}; - reads standard input), replacing one of that name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readDocument(cmd, file)
			if err != nil {
				return err
			}
			var c client.Credential
			path := client.PathCredentials + "/" + url.PathEscape(args[0])
			if printed, err := x.fetch(cmd.Context(), http.MethodPut, path, tenantQuery(tenant), body, &c); printed || err != nil {
				return err
			}
			fmt.Fprintf(x.out, "%s %s stored\n", c.Name, c.Type)
			return nil
		},
	}
	create.Flags().StringVarP(&file, "from-file", "f", "", "the credential as JSON; - for standard input")
	_ = create.MarkFlagRequired("from-file")
	creds.AddCommand(create,
		&cobra.Command{
			Use:   "list",
			Short: "List the tenant's credentials",
			Args:  cobra.NoArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return x.listCredentials(cmd, tenant) },
		},
		&cobra.Command{
			Use:   "get NAME",
			Short: "Show a credential: its type and non-secret members, when last used, its last error",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var c client.Credential
				path := client.PathCredentials + "/" + url.PathEscape(args[0])
				if printed, err := x.fetch(cmd.Context(), http.MethodGet, path, tenantQuery(tenant), nil, &c); printed || err != nil {
					return err
				}
				x.credentialDetail(&c)
				return nil
			},
		},
		&cobra.Command{
			Use:   "delete NAME",
			Short: "Delete a credential; requests that name it fail their next attempt",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var c client.Credential
				path := client.PathCredentials + "/" + url.PathEscape(args[0])
				if printed, err := x.fetch(cmd.Context(), http.MethodDelete, path, tenantQuery(tenant), nil, &c); printed || err != nil {
					return err
				}
				fmt.Fprintf(x.out, "%s deleted\n", c.Name)
				return nil
			},
		},
		&cobra.Command{
			Use:   "rekey",
			Short: "Seal every credential and signing secret again under the first of SECRETS_KEYS (an admin key)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				var res struct {
					Resealed int `json:"resealed"`
				}
				if printed, err := x.fetch(cmd.Context(), http.MethodPost, client.PathCredentials+"/rekey", nil, nil, &res); printed || err != nil {
					return err
				}
				fmt.Fprintf(x.out, "%d resealed\n", res.Resealed)
				return nil
			},
		})
	return creds
}

// readDocument reads a JSON document from file (- for standard input),
// refusing what is not JSON before the API sees it.
func readDocument(cmd *cobra.Command, file string) (json.RawMessage, error) {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("--from-file: %w", err)
	}
	if !json.Valid(raw) {
		return nil, errors.New("--from-file: not a JSON document; give {\"type\": \"bearer\", \"token\": \"...\"} or the like")
	}
	return raw, nil
}

func (x *cli) listCredentials(cmd *cobra.Command, tenant string) error {
	var res struct {
		Data []client.Credential `json:"data"`
	}
	if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathCredentials, tenantQuery(tenant), nil, &res); printed || err != nil {
		return err
	}
	w := x.table()
	fmt.Fprintln(w, "NAME\tTYPE\tDETAIL\tUPDATED\tLAST USED\tLAST ERROR")
	for _, c := range res.Data {
		lastErr := c.LastError
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Type, shorten(credentialDetail(&c), 60), when(&c.UpdatedAt), when(c.LastUsedAt),
			shorten(lastErr, 60))
	}
	return w.Flush()
}

// credentialDetail is the one thing that tells a credential apart in a
// list: where it gets tokens, who it is, where it leads.
func credentialDetail(c *client.Credential) string {
	switch {
	case c.TokenURL != "":
		return c.ClientID + " at " + c.TokenURL
	case c.URL != "":
		return c.URL
	case c.Username != "":
		return c.Username
	case len(c.HeaderNames) > 0:
		return strings.Join(c.HeaderNames, ", ")
	case c.Certificate != nil:
		return c.Certificate.Subject
	}
	return "-"
}

func (x *cli) credentialDetail(c *client.Credential) {
	w := x.table()
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s:\t%s\n", k, v)
		}
	}
	row("name", c.Name)
	row("tenant", c.Tenant)
	row("type", c.Type)
	row("token url", c.TokenURL)
	row("client id", c.ClientID)
	row("scopes", strings.Join(c.Scopes, " "))
	row("audience", c.Audience)
	row("auth style", c.AuthStyle)
	row("username", c.Username)
	row("headers", strings.Join(c.HeaderNames, ", "))
	row("url", c.URL)
	if cert := c.Certificate; cert != nil {
		row("certificate", cert.Subject+" (issuer "+cert.Issuer+"), expires "+cert.NotAfter.Format(time.RFC3339))
		row("fingerprint", "sha256:"+cert.Fingerprint)
	}
	row("created", when(&c.CreatedAt))
	row("updated", when(&c.UpdatedAt))
	row("last used", when(c.LastUsedAt))
	row("last error", c.LastError)
	_ = w.Flush()
}

func (x *cli) signingSecretsCmd() *cobra.Command {
	var tenant string
	list := func(cmd *cobra.Command, _ []string) error {
		var res struct {
			Data []client.SigningSecret `json:"data"`
		}
		if printed, err := x.fetch(cmd.Context(), http.MethodGet, client.PathSigningSecrets, tenantQuery(tenant), nil, &res); printed || err != nil {
			return err
		}
		w := x.table()
		fmt.Fprintln(w, "ID\tTYPE\tCREATED\tFINGERPRINT\tPUBLIC KEY")
		for _, s := range res.Data {
			pub := s.PublicKey
			if pub == "" {
				pub = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.Type, when(&s.CreatedAt), s.Fingerprint, pub)
		}
		return w.Flush()
	}
	secrets := &cobra.Command{
		Use:   "signing-secrets",
		Short: "The tenant's Standard Webhooks signing secrets: its deliveries are signed with each",
		Args:  cobra.NoArgs,
		RunE:  list,
	}
	secrets.PersistentFlags().StringVar(&tenant, "tenant", "", "with an admin key: this tenant's (else the default tenant's)")
	var typ string
	create := &cobra.Command{
		Use:   "create [--type ed25519]",
		Short: "Make a signing secret; an hmac secret (whsec_…) is shown this once, an ed25519 one shows its public key (whpk_…)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var body any
			if typ != "" {
				body = map[string]string{"type": typ}
			}
			var s client.SigningSecret
			if printed, err := x.fetch(cmd.Context(), http.MethodPost, client.PathSigningSecrets, tenantQuery(tenant), body, &s); printed || err != nil {
				return err
			}
			fmt.Fprintf(x.out, "%s %s fingerprint %s\n", s.ID, s.Type, s.Fingerprint)
			if s.Secret != "" {
				fmt.Fprintf(x.out, "secret: %s\n(shown this once: give it to your receivers now)\n", s.Secret)
			}
			if s.PublicKey != "" {
				fmt.Fprintf(x.out, "public key: %s\n", s.PublicKey)
			}
			return nil
		},
	}
	create.Flags().StringVar(&typ, "type", "", "hmac (the default) or ed25519")
	secrets.AddCommand(create,
		&cobra.Command{Use: "list", Short: "List the tenant's signing secrets, newest first", Args: cobra.NoArgs, RunE: list},
		&cobra.Command{
			Use:   "delete ID",
			Short: "Delete a signing secret",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var s client.SigningSecret
				path := client.PathSigningSecrets + "/" + url.PathEscape(args[0])
				if printed, err := x.fetch(cmd.Context(), http.MethodDelete, path, tenantQuery(tenant), nil, &s); printed || err != nil {
					return err
				}
				fmt.Fprintf(x.out, "%s deleted\n", s.ID)
				return nil
			},
		})
	return secrets
}

// endpointSettingsCmd is endpoints settings ENDPOINT: shows the
// endpoint's credential and proxy, sets them with --credential and
// --proxy, removes them with --clear.
func (x *cli) endpointSettingsCmd() *cobra.Command {
	var in client.EndpointSettings
	var tenant string
	var clear bool
	cmd := &cobra.Command{
		Use:   "settings ENDPOINT [--credential NAME] [--proxy NAME] [--clear]",
		Short: "The credential and proxy the tenant's requests to ENDPOINT (scheme://host:port) use when they name none",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := cmd.Flags().Changed("credential") || cmd.Flags().Changed("proxy")
			if clear && set {
				return errors.New("--clear goes alone, without --credential or --proxy")
			}
			method := http.MethodGet
			var body any
			switch {
			case clear:
				method = http.MethodDelete
			}
			path := client.PathEndpoints + "/" + url.PathEscape(strings.Replace(args[0], "://", ":", 1)) + "/settings"
			if set {
				// PUT replaces both: keep the one not given as it is.
				var cur client.EndpointSettings
				if printed, err := x.fetch(cmd.Context(), http.MethodGet, path, tenantQuery(tenant), nil, &cur); printed || err != nil {
					return err
				}
				if !cmd.Flags().Changed("credential") {
					in.Credential = cur.Credential
				}
				if !cmd.Flags().Changed("proxy") {
					in.Proxy = cur.Proxy
				}
				method, body = http.MethodPut, map[string]string{"credential": in.Credential, "proxy": in.Proxy}
			}
			var got client.EndpointSettings
			if printed, err := x.fetch(cmd.Context(), method, path, tenantQuery(tenant), body, &got); printed || err != nil {
				return err
			}
			if clear {
				fmt.Fprintf(x.out, "%s settings removed\n", got.Endpoint)
				return nil
			}
			orNone := func(v string) string {
				if v == "" {
					return "(none)"
				}
				return v
			}
			fmt.Fprintf(x.out, "%s credential %s proxy %s\n", got.Endpoint, orNone(got.Credential), orNone(got.Proxy))
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Credential, "credential", "", "the tenant's credential (not a proxy)")
	cmd.Flags().StringVar(&in.Proxy, "proxy", "", "the tenant's proxy credential")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the endpoint's settings")
	cmd.Flags().StringVar(&tenant, "tenant", "", "with an admin key: this tenant's (else the default tenant's)")
	return cmd
}
