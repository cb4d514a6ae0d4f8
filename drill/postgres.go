package drill

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshDatabase makes a new database for one drill on the server at dsn
// and returns its DSN. It is left behind for inspection; its name says
// which drill made it.
func freshDatabase(ctx context.Context, dsn string, seed uint64) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("drill: connect to PostgreSQL at %s: %w", redactDSN(dsn), err)
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

func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unreadable DSN)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}
