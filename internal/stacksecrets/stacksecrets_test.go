package stacksecrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/secrets"
)

func TestMakeWritesEachMissingSecretAndKeepsWhatIsThere(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "secrets")
	res, err := Make(dir, false)
	require.NoError(t, err)
	require.Len(t, res, len(All))
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "the host's other users cannot open the directory")
	values := map[string]string{}
	for _, r := range res {
		require.True(t, r.Wrote, r.Name)
		st, err := os.Stat(filepath.Join(dir, r.Name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(FileMode), st.Mode().Perm(), r.Name)
		getenv := func(k string) string {
			if k == "X_FILE" {
				return filepath.Join(dir, r.Name)
			}
			return ""
		}
		v, err := secrets.Optional(getenv, "X")
		require.NoError(t, err)
		require.Equal(t, !r.Made(), r.Empty, r.Name)
		if r.Made() {
			require.NotEmpty(t, v, r.Name)
			require.NoError(t, secrets.CheckExample(r.Name, v, "make one"), r.Name)
		} else {
			require.Empty(t, v, "%s is the user's to give", r.Name)
		}
		values[r.Name] = v
	}
	for _, name := range []string{"codec-token", "intake-secret"} {
		require.NoError(t, secrets.CheckChosen(name, values[name], "make one"), "%s is long enough for the services to take it", name)
	}
	keys, err := codec.ParseKeyFile(filepath.Join(dir, "codec-keys"))
	require.NoError(t, err, "the codec keys file is what SMSORCH_CODEC_KEYS_FILE reads")
	require.Len(t, keys.IDs(), 1)
	require.Empty(t, keys.Example())

	// Again: nothing is replaced; with the simulator, the providers'
	// credentials are filled, and only they.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sendy-token"), []byte("the-users-own-token\n"), 0o600))
	res, err = Make(dir, true)
	require.NoError(t, err)
	for _, r := range res {
		b, err := os.ReadFile(filepath.Join(dir, r.Name))
		require.NoError(t, err)
		got := strings.TrimSpace(string(b))
		switch r.Name {
		case "bird-access-key":
			require.True(t, r.Wrote)
			require.Len(t, got, 32, "a fresh credential for the simulator")
		case "sendy-token":
			require.False(t, r.Wrote, "a credential the user gave is kept")
			require.Equal(t, "the-users-own-token", got)
		default:
			require.False(t, r.Wrote, r.Name)
			require.Equal(t, values[r.Name], got, "%s is kept as it was", r.Name)
		}
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, ".*"))
	require.NoError(t, err)
	require.Empty(t, leftovers, "no temporary file is left behind")
}

func TestMakeSaysWhereItCannotWrite(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := Make(filepath.Join(file, "secrets"), false)
	require.ErrorContains(t, err, "make the secrets directory")
	require.ErrorContains(t, err, "not a directory")
}
