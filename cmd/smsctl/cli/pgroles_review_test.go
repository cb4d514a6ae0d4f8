package cli

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/pgroles"
)

// The visibility database postgres-roles gives the Temporal servers' role
// is the one the server opens: the address's database as a URL reads it
// (percent-decoded, as pgroles and the server's parsePostgres take it),
// plus _visibility. Else the role owns a database the server never uses,
// and the server, NOCREATEDB, cannot make the one it needs.
func TestReviewTheVisibilityDatabaseIsTheOneTheServerOpens(t *testing.T) {
	dsn := "postgres://smsorch_temporal:pw@postgres:5432/temporal%2Dprod?sslmode=disable"
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	require.Equal(t, strings.TrimPrefix(u.Path, "/"), pgroles.DatabaseOf(dsn))
}
