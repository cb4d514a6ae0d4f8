package secrets

import (
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
