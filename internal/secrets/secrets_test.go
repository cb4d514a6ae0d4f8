package secrets

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetReadsTheVariableOrItsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(file, []byte("from-the-file\r\n"), 0o600))
	env := map[string]string{"A": "from-the-variable", "B_FILE": file, "C": "x", "C_FILE": file, "D_FILE": filepath.Join(dir, "missing")}
	get := func(k string) string { return env[k] }

	v, err := Get(get, "A")
	require.NoError(t, err)
	require.Equal(t, "from-the-variable", v)
	v, err = Get(get, "B")
	require.NoError(t, err)
	require.Equal(t, "from-the-file", v, "the line break a file ends with is not part of the secret")
	v, err = Get(get, "NONE")
	require.NoError(t, err)
	require.Empty(t, v)
	_, err = Get(get, "C")
	require.ErrorContains(t, err, "both C and C_FILE are set")
	_, err = Get(get, "D")
	require.ErrorContains(t, err, "D_FILE: read the secret's file")
}

func TestExamplesAndShortSecretsAreRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"change-me", "Change-Me-Too ", "sim-sendy-token", "example-anything", "..."} {
		require.ErrorContains(t, CheckExample("X", v, "make one"), "make one", v)
	}
	require.NoError(t, CheckExample("X", "a-token-someone-made", "make one"))
	require.ErrorContains(t, CheckChosen("X", "short", "openssl rand -hex 32"), "X is 5 bytes, shorter than 32")
	require.NoError(t, CheckChosen("X", "0123456789abcdef0123456789abcdef", "make one"))
}

func TestAnOptionalSecretsEmptyFileIsNotGiven(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "bird-access-key")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	env := map[string]string{"K_FILE": empty}
	get := func(k string) string { return env[k] }
	v, err := Optional(get, "K")
	require.NoError(t, err)
	require.Empty(t, v)
	_, err = Get(get, "K")
	require.ErrorContains(t, err, "which is empty: write the secret into it", "a secret that must be given still says its file is empty")
	env["K_FILE"] = filepath.Join(t.TempDir(), "missing")
	_, err = Optional(get, "K")
	require.ErrorContains(t, err, "K_FILE: read the secret's file", "a file that is not there is a mistake, optional or not")
}

func TestADatabaseAddressTakesItsPasswordFromAFileOfItsOwn(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "ledger-db-password")
	require.NoError(t, os.WriteFile(pwFile, []byte("p@ss/w:rd?#\n"), 0o600))
	env := map[string]string{
		"DB":               "postgres://smsorch_ledger@postgres:5432/smsorch?sslmode=disable",
		"DB_PASSWORD_FILE": pwFile,
	}
	get := func(k string) string { return env[k] }
	dsn, err := DSN(get, "DB")
	require.NoError(t, err)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	require.Equal(t, "p@ss/w:rd?#", pw, "a password's special characters survive the address")
	require.Equal(t, "smsorch_ledger", u.User.Username())
	require.Equal(t, "postgres:5432", u.Host)
	require.Equal(t, "/smsorch", u.Path)
	require.Equal(t, "sslmode=disable", u.RawQuery)

	delete(env, "DB_PASSWORD_FILE")
	dsn, err = DSN(get, "DB")
	require.NoError(t, err)
	require.Equal(t, env["DB"], dsn, "without a password variable the address is as given")

	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:inline@h/db", "both DB_PASSWORD and the address in DB hold a password: give it one way (the address without it is postgres://u@h/db)"},
		{"postgres://u@h/db?sslmode=verify-full&password=inline", "both DB_PASSWORD and the address in DB hold a password: give it one way (the address without it is postgres://u@h/db?sslmode=verify-full)"},
		{"", "DB_PASSWORD is set without DB"},
		{"/var/lib/smsorch/ledger.db", "not a postgres://USER@HOST/DB address"},
		{"postgres://h/db", "names no user"},
	} {
		env["DB"], env["DB_PASSWORD"] = c.dsn, "pw"
		_, err := DSN(get, "DB")
		require.ErrorContains(t, err, c.want, c.dsn)
		require.NotContains(t, err.Error(), "inline", "the error does not quote the password")
	}
}
