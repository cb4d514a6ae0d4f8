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
	rep, err := Make(dir, false, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Warnings)
	res := rep.Results
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
	rep, err = Make(dir, true, nil)
	require.NoError(t, err)
	res = rep.Results
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
	_, err := Make(filepath.Join(file, "secrets"), false, nil)
	require.ErrorContains(t, err, "the secrets directory: ")
	require.ErrorContains(t, err, "not a directory")
}

// A stack of 1.0.0 kept its secrets in .env: their values move into
// the files, the codec keys one a line, and a file that says otherwise
// stops it, since either may be the one in use.
func TestMakeMovesTheSecretsOfAnOldEnvFile(t *testing.T) {
	t.Parallel()
	key1, err := codec.NewKey("2026-10")
	require.NoError(t, err)
	key2, err := codec.NewKey("2026-11")
	require.NoError(t, err)
	envPath := filepath.Join(t.TempDir(), ".env")
	require.NoError(t, os.WriteFile(envPath, []byte(`# an old .env
COMPOSE_PROJECT_NAME=smsorch
POSTGRES_PASSWORD="the-superusers-password-of-2025"
SMSORCH_CODEC_KEYS=`+key2+`,`+key1+`
SMSORCH_INTAKE_SENDERS=shop:order:0123456789abcdef0123456789abcdef
SMSORCH_INTAKE_SECRET_PREVIOUS=
BIRD_ACCESS_KEY=
`), 0o600))
	env, err := ReadEnvFile(envPath)
	require.NoError(t, err)
	require.Equal(t, "the-superusers-password-of-2025", env["POSTGRES_PASSWORD"], "quotes are taken off")

	dir := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	// A file of the user's, 0600 and holding only a line break.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "codec-token"), []byte("\n"), 0o600))
	rep, err := Make(dir, false, env)
	require.NoError(t, err)
	from := map[string]string{}
	for _, r := range rep.Results {
		from[r.Name] = r.From
		st, err := os.Stat(filepath.Join(dir, r.Name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(FileMode), st.Mode().Perm(), "%s is readable to the containers", r.Name)
	}
	require.Equal(t, map[string]string{"postgres-password": "POSTGRES_PASSWORD", "codec-keys": "SMSORCH_CODEC_KEYS", "intake-senders": "SMSORCH_INTAKE_SENDERS"},
		func() map[string]string {
			m := map[string]string{}
			for k, v := range from {
				if v != "" {
					m[k] = v
				}
			}
			return m
		}())
	pw, err := os.ReadFile(filepath.Join(dir, "postgres-password"))
	require.NoError(t, err)
	require.Equal(t, "the-superusers-password-of-2025\n", string(pw), "the password PostgreSQL was first started with")
	keys, err := codec.ParseKeyFile(filepath.Join(dir, "codec-keys"))
	require.NoError(t, err)
	require.Equal(t, []string{"2026-11", "2026-10"}, keys.IDs(), "every key moves, the sealing one first")
	token, err := os.ReadFile(filepath.Join(dir, "codec-token"))
	require.NoError(t, err)
	require.Len(t, strings.TrimSpace(string(token)), 64, "a file holding only a line break is empty, and gets a value")

	// Again: all kept; then a file that holds another value than .env's stops it.
	_, err = Make(dir, false, env)
	require.NoError(t, err)
	env["SMSORCH_INTAKE_SENDERS"] = "shop:order:fedcba9876543210fedcba9876543210"
	_, err = Make(dir, false, env)
	require.ErrorContains(t, err, filepath.Join(dir, "intake-senders")+" and SMSORCH_INTAKE_SENDERS in .env hold different values")
	require.NotContains(t, err.Error(), "fedcba", "the error quotes no secret")
}

func TestMakeWarnsOfADirectoryOthersCanOpen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	rep, err := Make(dir, false, nil)
	require.NoError(t, err)
	require.Equal(t, []string{dir + " is open to other users of this host (mode 0755): chmod 700 " + dir}, rep.Warnings)
}
