//go:build !race

package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/server/common/config"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	postgresschema "go.temporal.io/server/schema/postgresql/v12"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"

	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/logging"
)

// PostgresHistoryShards is the number of history shards of a Temporal
// service on PostgreSQL. It is fixed when the schema is created: every
// server of the cluster, now and later, uses it. Four let two servers
// share the work and let the survivor take every shard when one dies.
const PostgresHistoryShards = 4

// PostgresMaxConns and PostgresVisibilityMaxConns bound each service's
// pools (defaults.PostgresMaxConnsPerServer adds them up).
const (
	PostgresMaxConns           = defaults.PostgresMaxConns
	PostgresVisibilityMaxConns = defaults.PostgresVisibilityMaxConns
)

// VisibilitySuffix names the visibility database beside the main one:
// postgres://…/temporal keeps its runs' visibility in temporal_visibility.
const VisibilitySuffix = defaults.VisibilitySuffix

// IsPostgres reports whether a Temporal database address is a PostgreSQL DSN.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// postgresStores is the pair of databases a Temporal service on
// PostgreSQL uses: persistence and visibility (each schema has its own
// version table, so they cannot share one database).
type postgresStores struct {
	dsn                     string // as given, for connecting ourselves
	persistence, visibility *config.SQL
}

// parsePostgres reads postgres://user:password@host:port/db?sslmode=…
// into the server's SQL settings. Query parameters are passed on as
// connection attributes.
func parsePostgres(dsn string) (postgresStores, error) {
	redacted := logging.RedactDSN(dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		return postgresStores{}, fmt.Errorf("the Temporal database address %s is not a URL like postgres://user@127.0.0.1:5432/temporal", redacted)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return postgresStores{}, fmt.Errorf("the Temporal database address %s names no database: write it like postgres://user@127.0.0.1:5432/temporal (the visibility store goes to temporal%s)", redacted, VisibilitySuffix)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return postgresStores{}, fmt.Errorf("the Temporal database address %s names no host", redacted)
	}
	if port == "" {
		port = "5432"
	}
	if u.User == nil || u.User.Username() == "" {
		return postgresStores{}, fmt.Errorf("the Temporal database address %s names no user: write postgres://USER[:PASSWORD]@host/db", redacted)
	}
	password, _ := u.User.Password()
	attrs := map[string]string{}
	for k, v := range u.Query() {
		attrs[k] = v[len(v)-1]
	}
	sqlCfg := func(name string, maxConns int) *config.SQL {
		a := make(map[string]string, len(attrs))
		for k, v := range attrs {
			a[k] = v
		}
		return &config.SQL{
			PluginName:        postgresql.PluginNamePGX,
			DatabaseName:      name,
			ConnectAddr:       net.JoinHostPort(host, port),
			ConnectProtocol:   "tcp",
			User:              u.User.Username(),
			Password:          password,
			ConnectAttributes: a,
			MaxConns:          maxConns,
			MaxIdleConns:      maxConns,
		}
	}
	return postgresStores{dsn: dsn, persistence: sqlCfg(db, PostgresMaxConns), visibility: sqlCfg(db+VisibilitySuffix, PostgresVisibilityMaxConns)}, nil
}

// withDatabase returns dsn with its database replaced by name.
func withDatabase(dsn, name string) string {
	u, _ := url.Parse(dsn) // parsed before
	u.Path = "/" + name
	return u.String()
}

// setup creates the two databases when they are missing and creates or
// upgrades their schemas to the versions this server needs, under an
// advisory lock so that servers starting at once set up once. The lock is
// held until release: the caller releases it once the server has written
// its cluster metadata (temporal.NewServer does), which servers starting
// together on a new database otherwise race for, the loser exiting with
// "SaveClusterMetadata encountered version mismatch".
func (p postgresStores) setup(ctx context.Context, logger serverlog.Logger) (release func(), err error) {
	redacted := logging.RedactDSN(p.dsn)
	for _, name := range []string{p.persistence.DatabaseName, p.visibility.DatabaseName} {
		if err := createDatabase(ctx, p.dsn, name); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to the Temporal database %s: %w", redacted, err)
	}
	// Session lock: released by the unlock below or when the connection ends.
	const lockKey = "smsorch temporal schema"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", lockKey); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("lock the Temporal schema in %s: %w", redacted, err)
	}
	release = func() {
		_, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", lockKey)
		_ = conn.Close(context.Background())
	}
	for _, s := range []struct {
		cfg     *config.SQL
		name    string
		version string
	}{
		{p.persistence, "postgresql/v12/temporal", postgresschema.Version},
		{p.visibility, "postgresql/v12/visibility", postgresschema.VisibilityVersion},
	} {
		if err := upgradeSchema(s.cfg, s.name, logger); err != nil {
			release()
			return nil, fmt.Errorf("set up the Temporal schema %s (version %s) in database %s on %s: %w", s.name, s.version, s.cfg.DatabaseName, s.cfg.ConnectAddr, err)
		}
	}
	return release, nil
}

// upgradeSchema brings one database from whatever version it has (none
// when new) to the newest schema embedded in the server.
func upgradeSchema(cfg *config.SQL, schemaName string, logger serverlog.Logger) error {
	conn, err := sqltool.NewConnection(cfg, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ReadSchemaVersion(); err != nil {
		// A new database: the version tables at version 0.0, then every update.
		if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
			return err
		}
	}
	return schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: schemaName}, logger).Run()
}

// createDatabase creates the database name on the server of dsn unless it
// exists. It connects to the maintenance database "postgres" for that.
func createDatabase(ctx context.Context, dsn, name string) error {
	conn, err := pgx.Connect(ctx, withDatabase(dsn, name))
	if err == nil {
		return conn.Close(ctx) // it exists
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name: no such database
		return fmt.Errorf("connect to the Temporal database %s: %w", logging.RedactDSN(withDatabase(dsn, name)), err)
	}
	admin, err := pgx.Connect(ctx, withDatabase(dsn, "postgres"))
	if err != nil {
		return fmt.Errorf("database %s does not exist and the maintenance database to create it is not reachable (%w): create it yourself (CREATE DATABASE %s)", name, err, name)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// Another server made it meanwhile: duplicate_database, or a unique
	// violation on pg_database when both got that far at once.
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create the Temporal database %s: %w (grant CREATEDB, or create it yourself)", name, err)
	}
	return nil
}
