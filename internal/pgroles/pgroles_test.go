package pgroles

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/pgtest"
)

func adminDSN() string {
	if v := os.Getenv(pgtest.EnvDSN); v != "" {
		return v
	}
	return pgtest.DefaultDSN
}

// on is the address of db on the admin's server, as user (with password).
func on(t *testing.T, user, password, db string) string {
	t.Helper()
	u, err := url.Parse(adminDSN())
	require.NoError(t, err)
	if password == "" {
		u.User = url.User(user)
	} else {
		u.User = url.UserPassword(user, password)
	}
	u.Path = "/" + db
	return u.String()
}

func exec(t *testing.T, ctx context.Context, dsn string, sql ...string) error {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	for _, s := range sql {
		if _, err := c.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func query[T any](t *testing.T, ctx context.Context, dsn, sql string, args ...any) T {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = c.Close(context.Background()) }()
	var v T
	require.NoError(t, c.QueryRow(ctx, sql, args...).Scan(&v))
	return v
}

func TestEachServiceGetsARoleThatOwnsOnlyItsDatabases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	ledgerDB, temporalDB := "smsorch_roles_ledger_"+id, "smsorch_roles_temporal_"+id
	ledgerRole, temporalRole := "smsorch_ledger_"+id, "smsorch_temporal_"+id
	admin := adminDSN()
	superuser := query[string](t, ctx, admin, "SELECT current_user")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, db := range []string{ledgerDB, temporalDB, temporalDB + "_visibility"} {
			_ = exec(t, ctx, admin, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		}
		for _, r := range []string{ledgerRole, temporalRole} {
			_ = exec(t, ctx, admin, "DROP ROLE IF EXISTS "+r)
		}
	})
	// A stack of 1.0.0: the ledger's database and tables the superuser's.
	require.NoError(t, exec(t, ctx, admin, "CREATE DATABASE "+ledgerDB))
	require.NoError(t, exec(t, ctx, on(t, superuser, "", ledgerDB),
		"CREATE TABLE events (id serial PRIMARY KEY, key text)",
		"CREATE TABLE slots (id bigint GENERATED ALWAYS AS IDENTITY, at timestamptz)",
		"CREATE SEQUENCE loose", "CREATE VIEW open_events AS SELECT * FROM events"))

	grants := func(ledgerPassword string) []Grant {
		return []Grant{
			{Service: "SMSORCH_LEDGER", DSN: on(t, ledgerRole, ledgerPassword, ledgerDB) + "?sslmode=disable"},
			{Service: "SMSORCH_TEMPORAL_DB", DSN: on(t, temporalRole, "t-pw-1", temporalDB), Also: []string{temporalDB + "_visibility"}},
		}
	}
	done, err := Ensure(ctx, admin, grants("l'pw-1"))
	require.NoError(t, err)
	require.Equal(t, []Done{
		{Service: "SMSORCH_LEDGER", Role: ledgerRole, Databases: []string{ledgerDB}, Created: true},
		{Service: "SMSORCH_TEMPORAL_DB", Role: temporalRole, Databases: []string{temporalDB, temporalDB + "_visibility"}, Created: true},
	}, done)

	// Each role owns its databases and what was in them, and works there.
	for db, role := range map[string]string{ledgerDB: ledgerRole, temporalDB: temporalRole, temporalDB + "_visibility": temporalRole} {
		require.Equal(t, role, query[string](t, ctx, admin, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", db), "%s's owner", db)
	}
	notOwned := query[int](t, ctx, on(t, superuser, "", ledgerDB), `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND pg_get_userbyid(c.relowner) <> $1`, ledgerRole)
	require.Zero(t, notOwned, "every table, view, sequence and index of the old ledger is the ledger role's")
	require.NoError(t, exec(t, ctx, on(t, ledgerRole, "", ledgerDB),
		"INSERT INTO events (key) VALUES ('order-58213-shipped')", "INSERT INTO slots (at) VALUES (now())",
		"SELECT nextval('loose')", "SELECT * FROM open_events", "CREATE TABLE later (id int)"), "the ledger's role works in its database")
	require.NoError(t, exec(t, ctx, on(t, temporalRole, "", temporalDB), "CREATE TABLE executions (id int)"), "Temporal's role makes its schema")

	// And reaches no other: the worker's password opens no door to
	// Temporal's history, nor the server's to the ledger.
	for _, c := range []struct{ role, db string }{{ledgerRole, temporalDB}, {ledgerRole, temporalDB + "_visibility"}, {temporalRole, ledgerDB}} {
		err := exec(t, ctx, on(t, c.role, "", c.db), "SELECT 1")
		require.Error(t, err, "%s reaches %s", c.role, c.db)
		require.Contains(t, err.Error(), "permission denied for database")
	}
	for _, r := range []string{ledgerRole, temporalRole} {
		require.False(t, query[bool](t, ctx, admin, "SELECT rolsuper OR rolcreatedb OR rolcreaterole FROM pg_roles WHERE rolname = $1", r), "%s may not make roles or databases", r)
	}

	// Again, with the ledger's password changed: nothing new, the new password set.
	before := query[string](t, ctx, admin, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", ledgerRole)
	done, err = Ensure(ctx, admin, grants("l-pw-2"))
	require.NoError(t, err)
	require.False(t, done[0].Created)
	require.NotEqual(t, before, query[string](t, ctx, admin, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", ledgerRole), "the changed password is set")
}

func TestGrantsThatWouldShareOrElevateAreRefusedBeforeAnythingChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := adminDSN()
	superuser := query[string](t, ctx, admin, "SELECT current_user")
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	for _, c := range []struct {
		name   string
		grants []Grant
		says   string
	}{
		{"the superuser as a service", []Grant{{Service: "SMSORCH_LEDGER", DSN: on(t, superuser, "x", "ledger_"+id)}}, "SMSORCH_LEDGER connects as the superuser " + superuser + ": give the service a role of its own"},
		{"no password", []Grant{{Service: "SMSORCH_LEDGER", DSN: on(t, "l_"+id, "", "ledger_"+id)}}, "SMSORCH_LEDGER gives the role l_" + id + " no password"},
		{"no database", []Grant{{Service: "SMSORCH_LEDGER", DSN: "postgres://l:pw@127.0.0.1:5432"}}, "names no user or no database"},
		{"one database for two", []Grant{{Service: "SMSORCH_LEDGER", DSN: on(t, "l_"+id, "a", "shared_"+id)}, {Service: "SMSORCH_TEMPORAL_DB", DSN: on(t, "t_"+id, "b", "shared_"+id)}}, "is both l_" + id + "'s and t_" + id + "'s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Ensure(ctx, admin, c.grants)
			require.ErrorContains(t, err, c.says)
		})
	}
	// Another superuser named by a service is refused, not demoted.
	other := "smsorch_super_" + id
	require.NoError(t, exec(t, ctx, admin, "CREATE ROLE "+other+" SUPERUSER LOGIN"))
	t.Cleanup(func() { _ = exec(t, context.Background(), admin, "DROP ROLE IF EXISTS "+other) })
	_, err := Ensure(ctx, admin, []Grant{{Service: "SMSORCH_LEDGER", DSN: on(t, other, "pw", "ledger_"+id)}})
	require.ErrorContains(t, err, fmt.Sprintf("SMSORCH_LEDGER connects as %s, a superuser", other))
	require.True(t, query[bool](t, ctx, admin, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", other))
	require.Zero(t, query[int](t, ctx, admin, "SELECT count(*) FROM pg_database WHERE datname = $1", "ledger_"+id), "nothing was made")
}
