package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/pgroles"
)

// These commands are answered before any server is dialled; the
// integration tests run the rest against a real stack.
func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	env := []string{"TEMPORAL_ADDRESS=127.0.0.1:1"} // nothing listens there
	code := Run(context.Background(), args, &out, &errOut, env)
	return code, out.String(), errOut.String()
}

func TestUsageAndExitCodes(t *testing.T) {
	t.Parallel()
	code, out, _ := run("--help")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "Exit codes: 0 ok, 1 failure, 2 invalid input, 3 conflict, 4 not found.")

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, ExitInvalid, "Usage:"},
		{[]string{"frob"}, ExitInvalid, `unknown command "frob"`},
		{[]string{"status"}, ExitInvalid, "status needs exactly one event key"},
		{[]string{"status", "a-1-x", "b-1-x"}, ExitInvalid, "exactly one event key"},
		{[]string{"status", "order 1"}, ExitInvalid, "printable ASCII without spaces"},
		{[]string{"resend", "order-1-shipped", "--reason", "x"}, ExitInvalid, `a decision needs "by"`},
		{[]string{"cancel", "order-1-shipped", "--reason", "x", "--by", "y", "--force"}, ExitInvalid, "flag provided but not defined: -force"},
		{[]string{"list", "--state", "Lost"}, ExitInvalid, `"Lost" is not a state`},
		{[]string{"send", "--kind", "order", "--id", "1", "--stage", "shipped", "--to", "0612345678", "--text", "hi", "--provider", "bird"}, ExitInvalid, "has no country code"},
		{[]string{"send", "--key", "phone-0612345678", "--to", "+31612345678", "--text", "hi", "--provider", "bird"}, ExitInvalid, "names the person"},
		{[]string{"send", "--key", "order-1-shipped", "--to", "+31612345678", "--text", "", "--provider", "bird"}, ExitInvalid, "text is empty"},
		{[]string{"send", "--key", "order-1-shipped", "--to", "+31612345678", "--text", "hi", "--provider", "fax"}, ExitInvalid, `provider "fax" is not known`},
		{[]string{"send", "stray", "--key", "order-1-shipped"}, ExitInvalid, "send takes flags only"},
		{[]string{"send", "--key", "order-1-shipped~resend-1", "--to", "+31612345678", "--text", "hi", "--provider", "bird"}, ExitInvalid, "not an event key"},
		{[]string{"audit", "order-1-shipped", "--ledger", "/nonexistent/ledger.db"}, ExitInvalid, "no ledger at /nonexistent/ledger.db"},
		{[]string{"status", "order-1-shipped"}, ExitFailure, "connect to Temporal at 127.0.0.1:1"},
	} {
		code, _, errOut := run(tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}

func TestJSONErrorsForScripts(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("--json", "status", "order 1")
	require.Equal(t, ExitInvalid, code)
	var e struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exitCode"`
	}
	require.NoError(t, json.Unmarshal([]byte(errOut), &e))
	require.Equal(t, ExitInvalid, e.ExitCode)
	require.Contains(t, e.Error, "without spaces")
}

func TestEnvironmentReachesTheSDK(t *testing.T) {
	t.Parallel()
	e := envLookup{"TEMPORAL_ADDRESS=a:1", "TEMPORAL_GRPC_META_X_TENANT=acme", "TEMPORAL_ADDRESS=b:2"}
	v, ok := e.LookupEnv("TEMPORAL_ADDRESS")
	require.True(t, ok)
	require.Equal(t, "b:2", v, "the last one wins")
	_, ok = e.LookupEnv("TEMPORAL_NAMESPACE")
	require.False(t, ok)
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: e, DisableFile: true})
	require.NoError(t, err)
	require.Equal(t, "b:2", opts.HostPort)
	require.NotNil(t, opts.HeadersProvider, "TEMPORAL_GRPC_META_* headers reach the client")
	h, err := opts.HeadersProvider.GetHeaders(context.Background())
	require.NoError(t, err)
	require.Equal(t, "acme", h["x-tenant"])
}

func TestCodecKeyPrintsAKeyTheWorkersAccept(t *testing.T) {
	code, out, _ := run("codec-key", "--id", "2026-11")
	require.Equal(t, ExitOK, code)
	k, err := codec.ParseKeys(strings.TrimSpace(out))
	require.NoError(t, err)
	require.Equal(t, "2026-11", k.Current())
	code, out2, _ := run("codec-key", "--id", "2026-11")
	require.Equal(t, ExitOK, code)
	require.NotEqual(t, out, out2, "a fresh key each time")
	code, _, errOut := run("codec-key", "--id", "no spaces please")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "key id")
}

func TestCertsMakesTheStacksCertificatesOnceAndSaysWhich(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run("certs", "--dir", dir)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "made ca/ca.pem, valid until ")
	require.Contains(t, out, "made intake/cert.pem, valid until ")
	require.Contains(t, out, "made ca/admin.pem")
	code, out, _ = run("certs", "--dir", dir)
	require.Equal(t, ExitOK, code)
	require.NotContains(t, out, "made ", "a second start keeps them")
	require.Contains(t, out, "kept temporal/cert.pem")
	code, _, errOut = run("certs")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "certs needs --dir")
	code, _, errOut = run("certs", "--dir", dir, "--days", "20")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "--days above 30")
}

func TestPostgresRolesSaysWhatItNeedsAndRefusesTheSuperuserAsAService(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"postgres-roles"}, &out, &errOut, []string{"SMSORCH_LEDGER=postgres://l:pw@db/ledger"})
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut.String(), "SMSORCH_PG_ADMIN is not set")
	require.Contains(t, errOut.String(), "SMSORCH_TEMPORAL_DB is not set")
	require.NotContains(t, errOut.String(), "pw", "no password is printed")

	errOut.Reset()
	code = Run(context.Background(), []string{"postgres-roles"}, &out, &errOut, []string{
		"SMSORCH_PG_ADMIN=postgres://admin:secret-admin@127.0.0.1:1/postgres",
		"SMSORCH_TEMPORAL_DB=postgres://admin:secret-admin@127.0.0.1:1/temporal", "SMSORCH_LEDGER=postgres://l:pw@127.0.0.1:1/ledger"})
	require.NotEqual(t, ExitOK, code)
	require.Contains(t, errOut.String(), "SMSORCH_TEMPORAL_DB connects as the superuser admin: give the service a role of its own")
	require.NotContains(t, errOut.String(), "secret-admin")
	require.Equal(t, "temporal", pgroles.DatabaseOf("postgres://u:p@h:5432/temporal?sslmode=disable"))
}

func TestComposeSecretsMakesTheStacksSecretFilesOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	code, out, errOut := run("compose-secrets", dir)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "intake-secret            made  the HTTP intake's signing secret\n")
	require.Contains(t, out, "bird-access-key          made  Bird's access key (empty: Bird left out; yours to fill in)\n")
	token, err := os.ReadFile(filepath.Join(dir, "codec-token"))
	require.NoError(t, err)
	code, out, errOut = run("compose-secrets", dir, "--simulator")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "codec-token              kept  ")
	require.Contains(t, out, "bird-access-key          made  Bird's access key\n", "the simulator takes any credential")
	again, err := os.ReadFile(filepath.Join(dir, "codec-token"))
	require.NoError(t, err)
	require.Equal(t, string(token), string(again), "a second run keeps what the first made")
	code, _, errOut = run("compose-secrets", dir, "--env-file", filepath.Join(dir, "codec-token"))
	require.Equal(t, ExitInvalid, code, "a file that is not KEY=VALUE lines")
	require.Contains(t, errOut, "--env-file: ")
	require.Contains(t, errOut, "is not KEY=VALUE")
	require.NotContains(t, errOut, strings.TrimSpace(string(token)), "the line, which may be a secret, is not quoted")
	code, _, errOut = run("compose-secrets", dir, "--env-file", filepath.Join(dir, "no-such.env"))
	require.Equal(t, ExitInvalid, code, "an env file named but not there moves nothing: say so")
	require.Contains(t, errOut, "no such file")
	code, _, errOut = run("compose-secrets", dir, "extra")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "compose-secrets")
}
