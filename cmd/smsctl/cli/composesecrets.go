package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/internal/stacksecrets"
)

func (c *cmd) composeSecretsCommand() *cobra.Command {
	var forSimulator bool
	envFile := ".env"
	cmd := &cobra.Command{
		Use:   "compose-secrets [DIR] [--simulator] [--env-file .env]",
		Short: "Make the secret files docker-compose.yml mounts (default ./secrets)",
		Long: `Make, in DIR (default $SMSORCH_SECRETS, else ./secrets beside
docker-compose.yml: run it there), every secret file of the compose stack
that is missing or empty: fresh passwords, payload key, codec token and
intake secret, and an empty file for each secret that is yours to give
(the providers' credentials, named senders, the web UI's client secret;
empty means not given). A file that holds a value is kept, so running it
again is safe. With --simulator the providers' credentials are made too:
the simulator accepts whatever it is given.

A stack that kept its secrets in .env (1.0.0) has them moved: each value
.env still holds (POSTGRES_PASSWORD, SMSORCH_CODEC_KEYS, …) goes into its
file, and a file that holds another value is an error. Then remove those
lines from .env.

The directory is made 0700 (one open to other users is warned of) and
its files 0644: compose mounts each file as it
is on the host into containers that run as users of their own.`,
		Example: `  smsctl compose-secrets --simulator
  mkdir -p -m 700 secrets && docker run --rm -u "$(id -u)" -v "$PWD/secrets:/secrets" smsorch:local smsctl compose-secrets /secrets`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError("compose-secrets takes one directory at most, got %q", args)
			}
			return nil
		},
		RunE: func(cc *cobra.Command, args []string) error {
			envGiven := cc.Flags().Changed("env-file")
			env, err := stacksecrets.ReadEnvFile(envFile)
			if err != nil {
				return usageError("--env-file: %v", err)
			}
			if env == nil && envGiven {
				return usageError("--env-file %s: no such file: give the compose settings file whose secrets move into their files", envFile)
			}
			// Where compose looks: the shell's SMSORCH_SECRETS, else .env's.
			dir := c.getenv("SMSORCH_SECRETS")
			if dir == "" {
				dir = env["SMSORCH_SECRETS"]
			}
			if dir == "" {
				dir = "secrets"
			}
			if len(args) == 1 {
				dir = args[0]
			}
			rep, err := stacksecrets.Make(dir, forSimulator, env)
			if err != nil {
				return err
			}
			type row struct {
				Name  string `json:"name"`
				Wrote bool   `json:"wrote"`
				Empty bool   `json:"empty"`
				From  string `json:"from,omitempty"`
			}
			rows := make([]row, len(rep.Results))
			var moved []string
			for i, r := range rep.Results {
				rows[i] = row{r.Name, r.Wrote, r.Empty, r.From}
				if r.From != "" {
					moved = append(moved, r.From)
				}
			}
			c.print(map[string]any{"dir": dir, "secrets": rows, "warnings": rep.Warnings}, func(w io.Writer) {
				for _, r := range rep.Results {
					what := "kept"
					if r.Wrote {
						what = "made"
					}
					line := fmt.Sprintf("%-24s %s  %s", r.Name, what, r.What)
					switch {
					case r.From != "":
						line += " (from " + envFile + "'s " + r.From + ")"
					case r.Empty:
						line += " (empty: " + r.IfEmpty + "; yours to fill in)"
					}
					fmt.Fprintln(w, line)
				}
				if len(moved) > 0 {
					fmt.Fprintf(w, "Moved from %s: %s. Remove those lines from it.\n", envFile, strings.Join(moved, ", "))
				}
				for _, warn := range rep.Warnings {
					fmt.Fprintln(w, "warning:", warn)
				}
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&forSimulator, "simulator", false, "make the providers' credentials too, for `docker compose --profile sim up`")
	cmd.Flags().StringVar(&envFile, "env-file", envFile, "the compose settings file whose old secret variables are moved into their files")
	return cmd
}
