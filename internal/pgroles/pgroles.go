// Package pgroles gives each service of a stack a PostgreSQL role of its
// own that owns only its databases: the Temporal servers theirs, the
// workers the ledger's. docker-compose.yml runs it once at each start
// (`smsctl postgres-roles`), as the superuser, so that no worker holds
// a password that reaches Temporal's history, and no Temporal server one
// that reaches the ledger.
package pgroles

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/acme/smsorch/internal/logging"
)

// Grant is one service's access: the role and password of DSN, owning
// the database of DSN and the others named in Also.
type Grant struct {
	// Service names the grant in messages (SMSORCH_LEDGER).
	Service string
	DSN     string
	// Also are more databases the role owns (Temporal's visibility).
	Also []string
}

// DatabaseOf is the database a postgres:// address names, or "".
func DatabaseOf(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.Trim(u.Path, "/")
}

// Done says what Ensure did for one grant.
type Done struct {
	Service   string   `json:"service"`
	Role      string   `json:"role"`
	Databases []string `json:"databases"`
	// Created says the role is new; else its password was set again.
	Created bool `json:"created"`
}

// Ensure connects to admin (a superuser) and, for each grant: makes its
// role, or sets its password again (so that a password changed in the
// stack's settings takes effect); makes each database it owns, or hands
// an existing one to it with every table, view and sequence in it (a
// stack whose services shared the superuser); and takes CONNECT on those
// databases from PUBLIC, so that no other role of the server but
// superusers reaches them. A role is never a superuser and may not make
// roles or databases. Run again, it changes nothing else.
func Ensure(ctx context.Context, admin string, grants []Grant) ([]Done, error) {
	type plan struct {
		Grant
		role, password string
		dbs            []string
	}
	var plans []plan
	var errs []error
	adminURL, err := url.Parse(admin)
	if err != nil || adminURL.User == nil {
		return nil, fmt.Errorf("the superuser's address %s is not postgres://USER:PASSWORD@HOST:PORT/postgres", logging.RedactDSN(admin))
	}
	owners := map[string]string{}
	for _, g := range grants {
		u, err := url.Parse(g.DSN)
		if err != nil || u.User == nil || u.User.Username() == "" || DatabaseOf(g.DSN) == "" {
			errs = append(errs, fmt.Errorf("%s %s names no user or no database: give it as postgres://USER:PASSWORD@HOST:PORT/DATABASE", g.Service, logging.RedactDSN(g.DSN)))
			continue
		}
		p := plan{Grant: g, role: u.User.Username(), dbs: append([]string{DatabaseOf(g.DSN)}, g.Also...)}
		p.password, _ = u.User.Password()
		switch {
		case p.role == adminURL.User.Username():
			errs = append(errs, fmt.Errorf("%s connects as the superuser %s: give the service a role of its own (a user name and password of its own in %s)", g.Service, p.role, g.Service))
		case p.password == "":
			errs = append(errs, fmt.Errorf("%s gives the role %s no password: set one in its address or in %s_PASSWORD (in compose, its file of secrets/)", g.Service, p.role, g.Service))
		case strings.ContainsRune(p.password, 0):
			errs = append(errs, fmt.Errorf("%s: the password of %s holds a NUL byte, which PostgreSQL does not take", g.Service, p.role))
		}
		for _, other := range plans {
			if other.role == p.role {
				errs = append(errs, fmt.Errorf("%s and %s both connect as %s: give each service a role of its own, so that one's password does not open the other's databases", other.Service, g.Service, p.role))
			}
		}
		for _, db := range p.dbs {
			if other, ok := owners[db]; ok && other != p.role {
				errs = append(errs, fmt.Errorf("the database %s is both %s's and %s's: give each service a database of its own", db, other, p.role))
			}
			owners[db] = p.role
		}
		plans = append(plans, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, admin, "")
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL as the superuser (%s): %w", logging.RedactDSN(admin), err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var done []Done
	for _, p := range plans {
		d := Done{Service: p.Service, Role: p.role, Databases: p.dbs}
		role := pgx.Identifier{p.role}.Sanitize()
		var exists, super bool
		if err := conn.QueryRow(ctx, `SELECT pg_catalog.count(*) > 0, COALESCE(pg_catalog.bool_or(r.rolsuper OR EXISTS (
			SELECT 1 FROM pg_catalog.pg_roles o
			WHERE o.oid <> r.oid AND (o.rolsuper OR o.rolname OPERATOR(pg_catalog.=) ANY (ARRAY['pg_read_all_data', 'pg_write_all_data', 'pg_execute_server_program', 'pg_read_server_files', 'pg_write_server_files', 'pg_database_owner']))
			  AND pg_catalog.pg_has_role(r.oid, o.oid, 'MEMBER'))), false)
			FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) $1`, p.role).Scan(&exists, &super); err != nil {
			return done, fmt.Errorf("look up the role %s: %w", p.role, err)
		}
		if super {
			return done, fmt.Errorf("%s connects as %s, a superuser or a member of one (or of a role that reads or writes every database): give the service a role of its own, which this makes", p.Service, p.role)
		}
		verb := "ALTER"
		if !exists {
			verb, d.Created = "CREATE", true
		}
		// The password as a literal the server quotes itself.
		var quoted string
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.quote_literal($1::text)", p.password).Scan(&quoted); err != nil {
			return done, fmt.Errorf("quote the password of %s: %w", p.role, err)
		}
		stmt := verb + " ROLE " + role + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD " + quoted
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return done, fmt.Errorf("%s the role %s for %s: %w", strings.ToLower(verb), p.role, p.Service, err)
		}
		for _, db := range p.dbs {
			if err := ownDatabase(ctx, conn, admin, db, p.role); err != nil {
				return done, fmt.Errorf("give the database %s to %s (%s): %w", db, p.role, p.Service, err)
			}
		}
		done = append(done, d)
	}
	return done, nil
}

// ownDatabase makes db owned by role, with what is in it.
func ownDatabase(ctx context.Context, conn *pgx.Conn, admin, db, role string) error {
	var exists bool
	var owner string
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.count(*) > 0, COALESCE(pg_catalog.max(pg_catalog.pg_get_userbyid(datdba)::text), '')
		FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) $1`, db).Scan(&exists, &owner); err != nil {
		return err
	}
	name, r := pgx.Identifier{db}.Sanitize(), pgx.Identifier{role}.Sanitize()
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" OWNER "+r); err != nil {
			return err
		}
	} else if owner != role {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" OWNER TO "+r); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "REVOKE ALL ON DATABASE "+name+" FROM PUBLIC"); err != nil {
		return err
	}
	if !exists || owner == role {
		// New, or the role's already: the superuser does not enter a
		// database the role controls (it could have planted functions
		// there for a superuser to call).
		return nil
	}
	// What an earlier stack made in it as the superuser (1.0.0's, where
	// every service was the superuser): tables, views, and sequences not
	// tied to a table (those follow their table).
	in, err := connect(ctx, admin, db)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close(context.Background()) }()
	rows, err := in.Query(ctx, `
SELECT pg_catalog.format('ALTER %s %I.%I OWNER TO %I',
       CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END,
       n.nspname, c.relname, $1::text)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p', 'S', 'v', 'm']::"char"[])
  AND NOT n.nspname OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog', 'information_schema']::name[])
  AND NOT n.nspname::text OPERATOR(pg_catalog.~~) 'pg\_toast%'
  AND pg_catalog.pg_get_userbyid(c.relowner)::text OPERATOR(pg_catalog.<>) $1::text
  AND NOT (c.relkind OPERATOR(pg_catalog.=) 'S' AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
           WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid OPERATOR(pg_catalog.=) c.oid
             AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype OPERATOR(pg_catalog.=) ANY (ARRAY['a', 'i']::"char"[])))`, role)
	if err != nil {
		return err
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := in.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// connect connects as the superuser of admin to db ("" for admin's own)
// with the session settings that keep a service's role out of the
// superuser's statements: only pg_catalog on the search path (a database
// setting a role made cannot put its own functions first), standard
// strings (a backslash in a password is a backslash), and no statement
// of this session in the server's log (they hold the passwords).
func connect(ctx context.Context, admin, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		return nil, err
	}
	if db != "" {
		cfg.Database = db
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["search_path"] = "pg_catalog"
	cfg.RuntimeParams["standard_conforming_strings"] = "on"
	cfg.RuntimeParams["log_statement"] = "none"
	cfg.RuntimeParams["log_min_error_statement"] = "panic"
	return pgx.ConnectConfig(ctx, cfg)
}
