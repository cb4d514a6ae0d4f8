package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/internal/stacksecrets"
)

func (c *cmd) composeSecretsCommand() *cobra.Command {
	var forSimulator bool
	cmd := &cobra.Command{
		Use:   "compose-secrets [DIR] [--simulator]",
		Short: "Make the secret files docker-compose.yml mounts (default ./secrets)",
		Long: `Make, in DIR (default ./secrets, beside docker-compose.yml), every secret
file of the compose stack that is missing: fresh passwords, payload key,
codec token and intake secret, and an empty file for each secret that is
yours to give (the providers' credentials, named senders, the web UI's
client secret; empty means not given). A file that is there is kept, so
running it again is safe. With --simulator the providers' credentials are
made too: the simulator accepts whatever it is given.

The directory is 0700 and its files 0644: compose mounts each file as it
is on the host into containers that run as users of their own.`,
		Example: `  smsctl compose-secrets --simulator
  docker run --rm -u "$(id -u)" -v "$PWD/secrets:/secrets" smsorch:local smsctl compose-secrets /secrets`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("compose-secrets takes one directory at most, got %q", args)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			dir := "secrets"
			if len(args) == 1 {
				dir = args[0]
			}
			res, err := stacksecrets.Make(dir, forSimulator)
			if err != nil {
				return err
			}
			type row struct {
				Name  string `json:"name"`
				Wrote bool   `json:"wrote"`
				Empty bool   `json:"empty"`
			}
			rows := make([]row, len(res))
			for i, r := range res {
				rows[i] = row{r.Name, r.Wrote, r.Empty}
			}
			c.print(rows, func(w io.Writer) {
				for _, r := range res {
					what := "kept"
					if r.Wrote {
						what = "made"
					}
					line := fmt.Sprintf("%-24s %s  %s", r.Name, what, r.What)
					if r.Empty {
						line += " (empty: " + r.IfEmpty + "; yours to fill in)"
					}
					fmt.Fprintln(w, line)
				}
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&forSimulator, "simulator", false, "make the providers' credentials too, for `docker compose --profile sim up`")
	return cmd
}
