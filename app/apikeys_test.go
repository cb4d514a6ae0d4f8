package app

import (
	"context"
	"crypto/ecdsa"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/apikeytest"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/stackproc"
	"github.com/acme/smsorch/internal/stackspec"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

// The path a Temporal Cloud user takes, against a server that requires
// an API key: the worker reads TEMPORAL_API_KEY (with the server's CA,
// as the temporal CLI does) and is served; a worker with a key signed by
// another key, or an expired one, stops at start and says why.
func TestAWorkerWithAnAPIKeyIsServedAndAWrongKeyIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, []net.IP{net.IPv4(127, 0, 0, 1)}, "admin", pki.RoleAdmin)
	require.NoError(t, err)
	idp := apikeytest.New(t, "2026-12")
	signer, stranger := idp.Key, idp.Stranger

	server := func(name string, withoutAttributes bool) stackspec.Embedded {
		s, err := stackproc.Start(ctx, stackspec.Request{
			FrontendAddress: "127.0.0.1:0", UIAddress: Off, DataDir: filepath.Join(dir, name),
			TLS:                     &stackspec.TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA},
			APIKeys:                 &stackspec.APIKeys{JWKS: idp.URL, Issuer: "https://idp.example", Audience: "temporal"},
			WithoutSearchAttributes: withoutAttributes,
		}, zap.NewNop())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Stop() })
		return s
	}
	cluster := server("cluster", false)
	creds := simulator.NewCredentials()
	sim, err := simulator.New(simulator.Config{DeliveryDelay: 100 * time.Millisecond, SendyToken: creds.SendyToken})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	key := func(k *ecdsa.PrivateKey, exp time.Time) string {
		return idp.Sign(t, k, jwt.MapClaims{
			"sub": "orders-worker", "iss": "https://idp.example", "aud": "temporal", "exp": exp.Unix(),
			"smsorch_roles": []string{pki.RoleWorker, pki.RoleIntake}})
	}
	worker := func(cluster stackspec.Embedded, apiKey string) (*App, error) {
		cfg := Config{
			Sendy:      SendyConfig{BaseURL: srv.URL, Token: logging.Secret(creds.SendyToken), Sender: "SMS"},
			RateLimits: map[provider.Name]int{provider.Sendy: 0}, LedgerPath: filepath.Join(dir, "ledger.db"),
			IntakeAddress: Off, HealthAddress: Off, MetricsAddress: Off, CodecServerAddress: Off,
			AttemptTimeout: 3 * time.Second, StopTimeout: 5 * time.Second, PlaintextPayloads: true,
			Policies: map[provider.Name]activities.Policy{provider.Sendy: shortWindowPolicy},
		}
		// What a Cloud user sets, with the server's CA in place of the
		// public roots Cloud's certificates chain to.
		cfg.temporalEnv = envMap{
			"TEMPORAL_ADDRESS": cluster.FrontendAddress(), "TEMPORAL_NAMESPACE": "default",
			"TEMPORAL_API_KEY":                 apiKey,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH": files.CA, "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
			"TEMPORAL_CONFIG_FILE": filepath.Join(dir, "no-such-profile.toml"),
		}
		return Start(ctx, cfg.WithDefaults(), zaptest.NewLogger(t))
	}

	_, err = worker(cluster, key(stranger, time.Now().Add(time.Hour)))
	require.ErrorContains(t, err, "the API key is not one this Temporal takes (crypto/ecdsa: verification error): it takes JWTs signed by a key of its JWKS (--temporal-api-keys-jwks)")
	t.Logf("a key signed by another key: %v", err)
	_, err = worker(cluster, key(signer, time.Now().Add(-10*time.Minute)))
	require.ErrorContains(t, err, "the API key expired at ")
	require.ErrorContains(t, err, "make a new one")
	t.Logf("an expired key: %v", err)

	// A namespace without the search attributes, as a Cloud namespace
	// starts: the worker's key may not add them, and it says the
	// commands that do.
	bare := server("bare", true)
	_, err = worker(bare, key(signer, time.Now().Add(time.Hour)))
	require.ErrorContains(t, err, "namespace default lacks search attributes and they could not be added")
	require.ErrorContains(t, err, "may not call AddSearchAttributes: that takes smsorch-admin")
	for name := range contract.SearchAttributes() {
		require.ErrorContains(t, err, "temporal operator search-attribute create --namespace default --name "+name+" --type Keyword")
	}
	t.Logf("a namespace without the search attributes: %v", err)

	// The namespace has them: the worker starts and serves.
	a, err := worker(cluster, key(signer, time.Now().Add(time.Hour)))
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	st := starter.New(a.Client)
	_, err = st.Send(ctx, starter.Event{Key: "order-81-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 81 has shipped."})
	require.NoError(t, err, "the worker's key holds the intake's role")
	res, err := st.Wait(ctx, "order-81-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Len(t, sim.Messages(simulator.Filter{Key: "order-81-shipped"}), 1)
}
