// Package pgtest gives each test its own PostgreSQL database, on the
// server at SMSORCH_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/postgres,
// the one every machine of this project runs; .ci/run starts it).
package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/acme/smsorch/internal/logging"
)

// EnvDSN names the server the tests use.
const EnvDSN = "SMSORCH_TEST_POSTGRES"

// DefaultDSN is the project's local server (trust auth).
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/postgres"

// Database creates a fresh database for the test, drops it when the test
// ends, and returns its DSN. A server that cannot be reached fails the
// test with the command that starts it.
func Database(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvDSN)
	if admin == "" {
		admin = DefaultDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("PostgreSQL at %s cannot be reached (%v): start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, or set %s to another server", logging.RedactDSN(admin), err, EnvDSN)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	name := "smsorch_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create the test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop the test database %s: %v", name, err)
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop the test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", EnvDSN, err)
	}
	u.Path = "/" + name
	return u.String()
}
