package pgroles

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func reviewCleanup(t *testing.T, dbs, roles []string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, db := range dbs {
			_ = exec(t, ctx, adminDSN(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		}
		for _, r := range roles {
			_ = exec(t, ctx, adminDSN(), "DROP ROLE IF EXISTS "+r)
		}
	})
}

// The two services named with one role (SMSORCH_DB_USER set to
// TEMPORAL_DB_USER) are refused, as one database for two is: else one
// role owns the ledger and Temporal's history, and the workers' password
// opens Temporal's databases.
func TestReviewOneRoleForBothServicesIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	ledgerDB, temporalDB, role := "rv_ledger_"+id, "rv_temporal_"+id, "rv_shared_"+id
	reviewCleanup(t, []string{ledgerDB, temporalDB, temporalDB + "_visibility"}, []string{role})
	_, err := Ensure(ctx, adminDSN(), []Grant{
		{Service: "SMSORCH_TEMPORAL_DB", DSN: on(t, role, "pw-same", temporalDB), Also: []string{temporalDB + "_visibility"}},
		{Service: "SMSORCH_LEDGER", DSN: on(t, role, "pw-same", ledgerDB)},
	})
	if err == nil {
		// What it did: the worker's address reads Temporal's database.
		reach := exec(t, ctx, on(t, role, "pw-same", temporalDB), "SELECT 1")
		require.Error(t, err, "one role for both services was accepted; the ledger's credentials reach %s (connect error: %v)", temporalDB, reach)
	}
}

// The password set is the one the service connects with, whatever the
// server's standard_conforming_strings: with it off (a server
// configured for old applications), a backslash in a password ends the
// literal and what follows runs as the superuser.
func TestReviewAPasswordWithABackslashIsSetAsGiven(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	ledgerDB, role, injected := "rv_ledger_"+id, "rv_ledger_"+id, "rv_injected_"+id
	reviewCleanup(t, []string{ledgerDB}, []string{role, injected})
	admin := adminDSN() + "?options=-c%20standard_conforming_strings%3Doff"
	password := `pw\'; CREATE ROLE ` + injected + ` SUPERUSER LOGIN; --`
	_, err := Ensure(ctx, admin, []Grant{{Service: "SMSORCH_LEDGER", DSN: on(t, role, password, ledgerDB)}})
	require.NoError(t, err)
	require.Zero(t, query[int](t, ctx, adminDSN(), "SELECT count(*) FROM pg_roles WHERE rolname = $1", injected),
		"the ledger's password ran as SQL as the superuser and made the superuser %s", injected)
}

// A role that may SET ROLE to a superuser is a superuser in all but
// name: pgroles refuses a service that names another superuser, and must
// refuse one that names a member of one (an existing role granted the
// superuser's role), else the workers' password opens Temporal's history
// with one SET ROLE.
func TestReviewAMemberOfTheSuperuserIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := adminDSN()
	superuser := query[string](t, ctx, admin, "SELECT current_user")
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	ledgerDB, temporalDB, member, temporalRole := "rv_ledger_"+id, "rv_temporal_"+id, "rv_member_"+id, "rv_temporal_role_"+id
	reviewCleanup(t, []string{ledgerDB, temporalDB}, []string{member, temporalRole})
	require.NoError(t, exec(t, ctx, admin, "CREATE ROLE "+member+" LOGIN", "GRANT "+superuser+" TO "+member))
	_, err := Ensure(ctx, admin, []Grant{
		{Service: "SMSORCH_TEMPORAL_DB", DSN: on(t, temporalRole, "t-pw", temporalDB)},
		{Service: "SMSORCH_LEDGER", DSN: on(t, member, "l-pw", ledgerDB)},
	})
	if err == nil {
		// What the ledger's address then does: become the superuser and
		// let itself into Temporal's database.
		escalate := exec(t, ctx, on(t, member, "l-pw", ledgerDB), "SET ROLE "+superuser, "GRANT CONNECT ON DATABASE "+temporalDB+" TO "+member)
		reach := exec(t, ctx, on(t, member, "l-pw", temporalDB), "SELECT 1")
		require.Error(t, err, "the ledger's role %s, a member of the superuser %s, was accepted (SET ROLE and GRANT: %v; connect to %s: %v)", member, superuser, escalate, temporalDB, reach)
	}
}

// What a worker's role does in the database it owns does not run as the
// superuser when postgres-roles runs again (at every up): the ledger's
// role owns its database, so it may set that database's search_path and
// put its own functions in public ahead of pg_catalog's, and Ensure's
// connection to the database, as the superuser, calls them.
func TestReviewTheLedgersRoleCannotBecomeSuperuserThroughPgroles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := adminDSN()
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	ledgerDB, ledgerRole := "rv_ledger_"+id, "rv_ledger_"+id
	reviewCleanup(t, []string{ledgerDB}, []string{ledgerRole})
	grants := []Grant{{Service: "SMSORCH_LEDGER", DSN: on(t, ledgerRole, "l-pw", ledgerDB)}}
	_, err := Ensure(ctx, admin, grants)
	require.NoError(t, err)
	// A compromised worker, with the ledger's address only.
	require.NoError(t, exec(t, ctx, on(t, ledgerRole, "l-pw", ledgerDB),
		"CREATE TABLE events (key text)",
		`CREATE FUNCTION public.pg_get_userbyid(oid) RETURNS name LANGUAGE plpgsql AS $$
		 BEGIN
		   IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		     EXECUTE 'ALTER ROLE `+ledgerRole+` SUPERUSER';
		   END IF;
		   RETURN pg_catalog.pg_get_userbyid($1);
		 END $$`,
		"ALTER DATABASE "+ledgerDB+" SET search_path = public, pg_catalog"))
	require.False(t, query[bool](t, ctx, admin, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", ledgerRole))

	// The next `docker compose up`.
	_, err = Ensure(ctx, admin, grants)
	require.NoError(t, err)
	require.False(t, query[bool](t, ctx, admin, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", ledgerRole),
		"the ledger's role made itself a superuser through postgres-roles")
}
