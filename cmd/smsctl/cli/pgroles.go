package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/pgroles"
	"github.com/acme/smsorch/internal/secrets"
)

// EnvPostgresAdmin is the superuser's address postgres-roles connects with.
const EnvPostgresAdmin = "SMSORCH_PG_ADMIN"

func (c *cmd) postgresRolesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "postgres-roles",
		Short: "Give the Temporal servers and the workers each a PostgreSQL role that owns only its databases (docker-compose.yml's postgres-roles service)",
		Long: `Connect to PostgreSQL as the superuser (` + EnvPostgresAdmin + `) and make, for the
addresses the services use, each one's role with its password and its
databases:

  SMSORCH_TEMPORAL_DB   the Temporal servers': the database and its _visibility
  SMSORCH_LEDGER        the workers': the ledger's database

A role that exists gets its password set again; a database that exists is
handed to its role with everything in it; CONNECT to each is taken from
PUBLIC, so that the workers' password does not open Temporal's history,
nor the servers' the ledger. Each address may be given in a file named
by NAME_FILE instead, and its password apart from it, in NAME_PASSWORD or
a file named by NAME_PASSWORD_FILE. docker-compose.yml runs this at every start.`,
		Args: flagsOnly("postgres-roles takes no arguments: it reads " + EnvPostgresAdmin + ", SMSORCH_TEMPORAL_DB and SMSORCH_LEDGER"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			get := func(name string) string {
				v, err := secrets.DSN(c.getenv, name)
				if err == nil && v == "" {
					err = fmt.Errorf("%s is not set", name)
				}
				errs = append(errs, err)
				return v
			}
			admin, temporal, ledger := get(EnvPostgresAdmin), get("SMSORCH_TEMPORAL_DB"), get("SMSORCH_LEDGER")
			if err := errors.Join(errs...); err != nil {
				return usageError("%v: postgres-roles needs the superuser's address and each service's (docs/operations.md, \"Docker Compose\")", err)
			}
			var visibility []string
			if db := pgroles.DatabaseOf(temporal); db != "" {
				visibility = []string{db + defaults.VisibilitySuffix}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			done, err := pgroles.Ensure(ctx, admin, []pgroles.Grant{
				{Service: "SMSORCH_TEMPORAL_DB", DSN: temporal, Also: visibility},
				{Service: "SMSORCH_LEDGER", DSN: ledger},
			})
			if err != nil {
				return err
			}
			c.print(done, func(w io.Writer) {
				for _, d := range done {
					what := "kept"
					if d.Created {
						what = "made"
					}
					fmt.Fprintf(w, "%s role %s for %s, owning %s\n", what, d.Role, d.Service, strings.Join(d.Databases, ", "))
				}
			})
			return nil
		},
	}
}
