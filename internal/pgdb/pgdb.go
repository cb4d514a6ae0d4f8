// Package pgdb makes and drops the PostgreSQL databases a drill or a
// benchmark runs on, each its own.
package pgdb

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/smsorch/internal/logging"
)

// Fresh makes a new database named prefix_<unix time> on the server at
// dsn and returns its DSN; its name says what made it. The caller drops
// it (Drop) or, after a failure, may leave it for inspection.
func Fresh(ctx context.Context, dsn, prefix string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL at %s: %w", logging.RedactDSN(dsn), err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().Unix())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Drop drops the database named in the DSN db on the server at dsn.
func Drop(ctx context.Context, dsn, db string) error {
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

// Name returns the DSN of a database named prefix_<unix time>_use, not
// yet created, on the server at dsn (the Temporal server creates its own).
func Name(dsn, prefix, use string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL: %w", logging.RedactDSN(dsn), err)
	}
	u.Path = fmt.Sprintf("/%s_%d_%s", prefix, time.Now().Unix(), use)
	return u.String(), nil
}

// WithSuffix names the database beside db: db plus suffix.
func WithSuffix(db, suffix string) string {
	u, err := url.Parse(db)
	if err != nil {
		return db
	}
	u.Path += suffix
	return u.String()
}
