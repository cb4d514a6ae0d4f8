package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/internal/pki"
)

func (c *cmd) certsCommand() *cobra.Command {
	var dir string
	var names []string
	var days, caDays int
	cmd := &cobra.Command{
		Use:   "certs --dir DIR [--server-name NAME]...",
		Short: "Make the certificates of a Temporal with mutual TLS and roles (docker-compose.yml's certs service)",
		Long: `Make what is missing of a stack's certificates in DIR and keep the rest:
a CA (DIR/ca/ca.pem, its key beside it) and an admin's certificate
(DIR/ca/admin.pem), and for each service a directory with ca.pem,
cert.pem and key.pem:

  temporal   the servers' (serverAuth and clientAuth, for --server-name)
  worker     OU smsorch-worker: polls and completes tasks
  intake     OU smsorch-worker and smsorch-intake: also starts SendSMS runs
  ui         OU smsorch-operator: reads runs and decides

A certificate is made anew when it is missing, not signed by the CA, for
other names, or within 30 days of its end; services read theirs at start.
docker-compose.yml runs this at every "docker compose up".`,
		Args: flagsOnly("certs takes flags only"),
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				return usageError("certs needs --dir, the directory to keep the certificates in")
			}
			validity := time.Duration(days) * 24 * time.Hour
			if len(names) == 0 || validity <= pki.Renewal || caDays < days {
				return usageError("certs needs a --server-name, --days above 30 and --ca-days at least --days")
			}
			made, err := pki.EnsureStack(dir, names, time.Duration(caDays)*24*time.Hour, validity, time.Now())
			if err != nil {
				return fmt.Errorf("certificates in %s: %w", dir, err)
			}
			c.print(made, func(w io.Writer) {
				for _, r := range made {
					what := "kept"
					if r.New {
						what = "made"
					}
					rel, err := filepath.Rel(dir, r.Path)
					if err != nil || strings.HasPrefix(rel, "..") {
						rel = r.Path
					}
					fmt.Fprintf(w, "%s %s, valid until %s\n", what, rel, r.NotAfter.UTC().Format("2006-01-02"))
				}
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the directory to keep the certificates in (docker-compose.yml: /certs)")
	cmd.Flags().StringSliceVar(&names, "server-name", []string{"temporal"}, "a DNS name of the Temporal servers; the first is the one clients check (repeat for more)")
	cmd.Flags().IntVar(&days, "days", 397, "how long each service's certificate is valid")
	cmd.Flags().IntVar(&caDays, "ca-days", 3650, "how long a new CA is valid")
	return cmd
}
