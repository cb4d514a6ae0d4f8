package clientopts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/frontends"
	"github.com/acme/smsorch/internal/pki"
)

type env map[string]string

func (e env) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }
func (e env) Environ() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func TestEnvironmentThenOverridesThenDefaults(t *testing.T) {
	t.Parallel()
	opts, err := Build(Settings{Env: env{"TEMPORAL_ADDRESS": "temporal.internal:7233", "TEMPORAL_NAMESPACE": "sms"}, DefaultAddress: "127.0.0.1:7233"})
	require.NoError(t, err)
	require.Equal(t, "temporal.internal:7233", opts.HostPort)
	require.Equal(t, "sms", opts.Namespace)
	require.NotNil(t, opts.Logger)

	opts, err = Build(Settings{Env: env{"TEMPORAL_ADDRESS": "temporal.internal:7233"}, Address: "10.0.0.9:7233", Namespace: "other"})
	require.NoError(t, err)
	require.Equal(t, "10.0.0.9:7233", opts.HostPort, "an explicit address wins over the environment")
	require.Equal(t, "other", opts.Namespace)

	opts, err = Build(Settings{Env: env{}, DefaultAddress: "127.0.0.1:7233"})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7233", opts.HostPort)
	require.Equal(t, "default", opts.Namespace)
}

func TestFrontendListAndCodec(t *testing.T) {
	t.Parallel()
	opts, err := Build(Settings{Address: "127.0.0.1:7233,127.0.0.1:7234"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(opts.HostPort, frontends.Scheme+":"), opts.HostPort)

	_, err = Build(Settings{Address: "127.0.0.1:7233,nowhere"})
	require.ErrorContains(t, err, "is not host:port")

	spec, err := codec.NewKey("k1")
	require.NoError(t, err)
	kr, err := codec.ParseKeys(spec)
	require.NoError(t, err)
	opts, err = Build(Settings{Address: "127.0.0.1:7233", Codec: kr})
	require.NoError(t, err)
	require.NotEmpty(t, opts.ConnectionOptions.DialOptions, "the codec's interceptors are installed")
}

func TestAnAPIKeyFromAFileGoesOverTLSAndAFileThatCannotServeStopsTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "api-key")
	require.NoError(t, os.WriteFile(key, []byte("eyJhbGciOi.key.sig\n"), 0o600))
	opts, err := Build(Settings{Env: env{"TEMPORAL_ADDRESS": "eu-west-1.aws.api.temporal.io:7233", EnvAPIKeyFile: key}})
	require.NoError(t, err)
	require.NotNil(t, opts.Credentials, "the key in the file is the client's credential")
	require.NotNil(t, opts.ConnectionOptions.TLS, "an API key goes over TLS")

	_, err = Build(Settings{Env: env{EnvAPIKeyFile: key, "TEMPORAL_API_KEY": "other"}})
	require.ErrorContains(t, err, "both TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE are set")
	_, err = Build(Settings{Env: env{EnvAPIKeyFile: filepath.Join(dir, "missing")}})
	require.ErrorContains(t, err, "TEMPORAL_API_KEY_FILE: read the API key")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = Build(Settings{Env: env{EnvAPIKeyFile: empty}})
	require.ErrorContains(t, err, "which is empty: write the API key into it")
}

func TestAClientCertificateFromFilesIsReadAgainWhenRenewed(t *testing.T) {
	t.Parallel()
	files, err := pki.Generate(t.TempDir(), []string{"temporal"}, nil, "worker", pki.RoleWorker)
	require.NoError(t, err)
	opts, err := Build(Settings{Env: env{"TEMPORAL_ADDRESS": "temporal:7233",
		"TEMPORAL_TLS_CLIENT_CERT_PATH": files.ClientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": files.ClientKey, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": files.CA}})
	require.NoError(t, err)
	conf := opts.ConnectionOptions.TLS
	require.NotNil(t, conf)
	require.Empty(t, conf.Certificates, "not the pair loaded once at start")
	require.NotNil(t, conf.GetClientCertificate)
	c, err := conf.GetClientCertificate(nil)
	require.NoError(t, err)
	require.NotEmpty(t, c.Certificate)
	require.NotNil(t, conf.RootCAs, "the server's CA from the environment stays")

	_, err = Build(Settings{Env: env{"TEMPORAL_TLS_CLIENT_CERT_PATH": files.ClientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH": files.ClientKey + ".gone"}})
	require.Error(t, err, "a key that cannot be read stops the start")
}
