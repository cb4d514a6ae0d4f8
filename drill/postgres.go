package drill

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/smsorch/logging"
)

// freshDatabase makes a new database for one drill on the server at dsn
// and returns its DSN. A drill that failed leaves it behind for
// inspection; its name says which drill made it.
func freshDatabase(ctx context.Context, dsn string, seed uint64) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("drill: connect to PostgreSQL at %s: %w", logging.RedactDSN(dsn), err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	name := fmt.Sprintf("smsdrill_%d_%d", seed, time.Now().Unix())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("drill: create database %s: %w", name, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops the database a drill made (the one named in db) on
// the server at dsn.
func dropDatabase(ctx context.Context, dsn, db string) error {
	u, err := url.Parse(db)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" WITH (FORCE)")
	return err
}

// freshDatabaseName returns the DSN of a database, not yet created, for
// one drill's use on the server at dsn (the Temporal server creates its
// own).
func freshDatabaseName(dsn string, seed uint64, use string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("drill: %s is not a URL: %w", logging.RedactDSN(dsn), err)
	}
	u.Path = fmt.Sprintf("/smsdrill_%d_%d_%s", seed, time.Now().Unix(), use)
	return u.String(), nil
}

// withDatabaseSuffix names the database beside db: db plus suffix.
func withDatabaseSuffix(db, suffix string) string {
	u, err := url.Parse(db)
	if err != nil {
		return db
	}
	u.Path += suffix
	return u.String()
}
