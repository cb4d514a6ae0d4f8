package app

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smsctl/cli"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/stackproc"
	"github.com/acme/smsorch/internal/stackspec"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

func TestFlagsAndEnvironment(t *testing.T) {
	t.Setenv(EnvBirdAccessKey, "bird-secret")
	t.Setenv(EnvSendyToken, "sendy-secret")
	t.Setenv(EnvIntakeSecret, intakeSecret) // outside dev mode the intake is signed
	key, err := codec.NewKey("k1")
	require.NoError(t, err)
	t.Setenv(codec.EnvKeys, key) // and payloads are sealed
	var cfg Config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{
		"--bird-url", "https://api.bird.com", "--bird-workspace", "ws", "--bird-channel", "ch",
		"--bird-replay-window", "2h", "--window-margin", "5m", "--decision-deadline", "24h",
		"--sim-fault", "error_5xx=0.1@bird", "--late-effect-horizon", "90s", "--reconcile-retry", "20s", "--status-poll", "2s",
	}))
	cfg = cfg.WithDefaults()
	require.NoError(t, cfg.Validate())
	require.Equal(t, 2*time.Hour, cfg.Policies[provider.Bird].ReplayWindow)
	require.Equal(t, 3*time.Hour, cfg.Policies[provider.Sendy].ReplayWindow, "a Bird setting leaves Sendy alone")
	require.Equal(t, 5*time.Minute, cfg.Policies[provider.Sendy].WindowMargin)
	require.Equal(t, 24*time.Hour, cfg.Policies[provider.Bird].DecisionDeadline)
	require.Equal(t, 90*time.Second, cfg.Policies[provider.Sendy].LateEffectHorizon)
	require.Equal(t, 20*time.Second, cfg.Policies[provider.Bird].ReconcileRetry)
	require.Equal(t, 2*time.Second, cfg.Policies[provider.Bird].StatusPollInitial)
	require.Len(t, cfg.SimFaults, 1)
	require.Equal(t, "bird-secret", cfg.Bird.AccessKey.Reveal())
	require.NotContains(t, strings.Join([]string{cfg.Bird.AccessKey.String(), cfg.Sendy.Token.String(), cfg.IntakeSecret.String()}, " "), "secret")
	require.ErrorContains(t, fs.Parse([]string{"--window-margin", "soon"}), "write a duration like 3h or 90s")
	require.Zero(t, cfg.IntakeClientRate, "the intake's default")
	require.NoError(t, fs.Parse([]string{"--intake-client-rate", "1200"}))
	require.Equal(t, 1200, cfg.IntakeClientRate)
	require.NoError(t, fs.Parse([]string{"--intake-client-rate", "off"}))
	require.Equal(t, -1, cfg.IntakeClientRate)
	for _, bad := range []string{"0", "-5", "fast"} {
		require.ErrorContains(t, fs.Parse([]string{"--intake-client-rate", bad}), "write a number of requests a minute, like 600, or off", bad)
	}
}

func TestValidateSaysWhatToFix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no provider is configured"},
		{Config{Bird: BirdConfig{BaseURL: "https://api.bird.com"}}, "BIRD_ACCESS_KEY is empty"},
		{Config{Sendy: SendyConfig{BaseURL: "https://sendy"}}, "SENDY_TOKEN is empty"},
		{Config{Dev: true, SimulatorAddress: Off}, "no provider is configured"},
		{Config{Dev: true, AttemptTimeout: 4 * time.Hour}, "leaves no room for one 4h0m0s attempt"},
		{Config{Dev: true, ServerOnly: true}, "--dev, --server-only and --ui-only exclude each other"},
		{Config{Dev: true, IntakeTLSCert: "cert.pem"}, "go together"},
		{Config{Dev: true, IntakeTLSCert: "no-such.pem", IntakeTLSKey: "no-such.key"}, "do not load"},
		{Config{Dev: true, CodecServerAddress: "127.0.0.1:8234"}, "has no keys to decode with"},
		{Config{Dev: true, CodecServerAddress: "0.0.0.0:8234"}, "listens on loopback only"},
		{Config{TemporalDB: "postgres://postgres@127.0.0.1/temporal", Sendy: SendyConfig{BaseURL: "https://sendy", Token: "t"}, IntakeAddress: Off}, "use it with --dev or --server-only"},
		{Config{Dev: true, UIOnly: true}, "--dev, --server-only and --ui-only exclude each other"},
		{Config{UIOnly: true, UIAddress: Off}, "--ui-only serves the web UI"},
		{Config{UIOnly: true, UIFrontend: "temporal"}, "is not HOST:PORT: set TEMPORAL_ADDRESS"},
		{Config{Dev: true, HealthAddress: "0.0.0.0:8090"}, "the health endpoints listen on loopback only"},
		{Config{Dev: true, CodecServerAddress: "0.0.0.0:8234"}, "pass --codec-server-in-container"},
		{Config{Dev: true, LedgerRetention: -time.Hour}, "--ledger-retention -1h0m0s is negative"},
		{Config{ServerOnly: true, FrontendAddress: "0.0.0.0:7233"}, "refusing to serve the Temporal frontend in plain gRPC on 0.0.0.0:7233"},
		{Config{ServerOnly: true, FrontendAddress: "10.0.0.7:7233", TemporalTLSCert: "server.pem"}, "go together"},
		{Config{Dev: true, TemporalTLSServerName: "temporal"}, "use it with --temporal-tls-cert"},
		{Config{ServerOnly: true, FrontendAddress: "127.0.0.1:7233", TemporalTLSAnyClient: true}, "--temporal-tls-any-client turns off the roles"},
		{Config{ServerOnly: true, FrontendAddress: "127.0.0.1:7233", TemporalAPIKeysJWKS: "https://idp/jwks.json"}, "give all three"},
		{Config{ServerOnly: true, FrontendAddress: "127.0.0.1:7233", TemporalTLSCert: "c", TemporalTLSKey: "k", TemporalTLSCA: "ca", TemporalAPIKeysJWKS: "https://idp/jwks.json", TemporalAPIKeysIssuer: "https://idp"}, "the issuer and audience every key must name"},
		{Config{Sendy: SendyConfig{BaseURL: "https://sendy", Token: "t"}, TemporalTLSCert: "c", TemporalTLSKey: "k", TemporalTLSCA: "ca"}, "a worker or the web UI reaches a Temporal with mutual TLS through TEMPORAL_TLS_CLIENT_CERT_PATH"},
	} {
		require.ErrorContains(t, tc.cfg.WithDefaults().Validate(), tc.want)
	}
	require.NoError(t, Config{Dev: true}.WithDefaults().Validate(), "dev mode needs nothing else")
	require.NoError(t, Config{ServerOnly: true, TemporalDB: "postgres://postgres@127.0.0.1/temporal"}.WithDefaults().Validate(), "a server needs no provider")
	require.NoError(t, Config{ServerOnly: true, FrontendAddress: "0.0.0.0:7233", FrontendWithoutTLS: true}.WithDefaults().Validate(), "a frontend on a private network, said so")
	require.NoError(t, Config{ServerOnly: true, FrontendAddress: "0.0.0.0:7233", TemporalTLSCert: "c", TemporalTLSKey: "k", TemporalTLSCA: "ca"}.WithDefaults().Validate(), "a frontend with mutual TLS (the files are checked at start)")
	ring, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	require.NoError(t, Config{UIOnly: true, UIAddress: "0.0.0.0:8233", UIFrontend: "temporal:7233", CodecServerAddress: "0.0.0.0:8234", CodecServerInContainer: true,
		Codec: ring, CodecToken: intakeSecret, HealthAddress: "127.0.0.1:8090"}.WithDefaults().Validate(), "the compose UI: a codec server on a container's interfaces, asked for")
}

func mustKey(t *testing.T) string {
	t.Helper()
	return mustKeyNamed(t, "test-1")
}

// /readyz names what is not ready and keeps the reasons for the log;
// a stopping process is not ready; /healthz answers while it serves.
func TestReadinessNamesWhatFailsAndDrains(t *testing.T) {
	t.Parallel()
	h := &health{log: zap.NewNop()}
	var ledgerUp atomic.Bool
	h.add("temporal", func(context.Context) error { return nil })
	h.add("ledger", func(context.Context) error {
		if ledgerUp.Load() {
			return nil
		}
		return errors.New("dial tcp 10.0.0.9:5432: connection refused")
	})
	srv := httptest.NewServer(h.with(http.NotFoundHandler()))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "alive\n", body)
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: ledger")
	require.NotContains(t, body, "10.0.0.9", "the reason goes to the log, not to whoever asks")
	ledgerUp.Store(true)
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "an answer is kept for a second: %s", body)
	require.Eventually(t, func() bool { code, body = get("/readyz"); return code == http.StatusOK }, 5*time.Second, 100*time.Millisecond)
	require.Equal(t, "ready\n", body)
	h.draining.Store(true)
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "stopping")
	code, _ = get("/healthz")
	require.Equal(t, http.StatusOK, code, "alive while it stops")
	code, _ = get("/other")
	require.Equal(t, http.StatusNotFound, code, "the rest goes to the handler it wraps")
	require.NoError(t, HealthCheck(context.Background(), srv.URL+"/healthz"))
	require.ErrorContains(t, HealthCheck(context.Background(), srv.URL+"/readyz"), "503 Service Unavailable: not ready: stopping")
}

// --ui-only serves the web UI and the codec server for a Temporal that
// runs elsewhere; it is ready while that Temporal answers, and says so
// when it does not.
// uiCodecToken is a codec token a process outside dev mode accepts (32
// bytes or more).
const uiCodecToken = "codec-t0ken-of-the-ui-only-test-0123456789"

func TestAUIOnlyProcessServesTheUIOfAnotherTemporal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, err := stackproc.Start(ctx, stackspec.Request{FrontendAddress: "127.0.0.1:0", UIAddress: Off, DataDir: t.TempDir(), WithoutSearchAttributes: true}, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = cluster.Stop() }()
	ring, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	a, err := Start(ctx, Config{
		UIOnly: true, UIFrontend: cluster.FrontendAddress(), UIAddress: "127.0.0.1:0", HealthAddress: "127.0.0.1:0",
		Codec: ring, CodecToken: uiCodecToken, CodecServerAddress: "127.0.0.1:0", UICodecEndpoint: "http://127.0.0.1:8234",
	}, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	require.Contains(t, a.Banner(), "smsorch web UI is up (no worker in this process)")
	require.Contains(t, a.Banner(), "Temporal frontend:  "+cluster.FrontendAddress())
	require.NoError(t, HealthCheck(ctx, a.HealthURL+"/readyz"))
	require.NoError(t, HealthCheck(ctx, a.CodecURL+"/readyz"), "the codec server answers it too")
	require.NoError(t, HealthCheck(ctx, a.Stack.UIURL()+"/"))
	settings, err := http.Get(a.Stack.UIURL() + "/api/v1/settings")
	require.NoError(t, err)
	b, _ := io.ReadAll(settings.Body)
	_ = settings.Body.Close()
	require.Contains(t, string(b), "http://127.0.0.1:8234", "the UI tells browsers the codec endpoint as they reach it")
	require.NotContains(t, string(b), uiCodecToken)

	require.NoError(t, cluster.Stop())
	require.Eventually(t, func() bool {
		err := HealthCheck(ctx, a.HealthURL+"/readyz")
		return err != nil && strings.Contains(err.Error(), "not ready: temporal")
	}, 20*time.Second, 200*time.Millisecond, "not ready once its Temporal is gone")
	require.NoError(t, HealthCheck(ctx, a.HealthURL+"/healthz"), "but alive")
}

// An intake that anyone who reaches it could use to send SMS is refused.
// intakeSecret is long enough for a worker outside dev mode.
const intakeSecret = "0123456789abcdef0123456789abcdef"

var tenSlashEight = func() []*net.IPNet { _, n, _ := net.ParseCIDR("10.0.0.0/8"); return []*net.IPNet{n} }()

// Outside dev mode the intake speaks plain HTTP on loopback only, or
// behind a TLS proxy it names: the bodies it takes hold recipients and
// texts.
func TestAnIntakeOnTheNetworkNeedsTLSOrItsProxy(t *testing.T) {
	t.Parallel()
	sendy := SendyConfig{BaseURL: "https://sendy", Token: "t"}
	cert, key := selfSigned(t)
	cfg := Config{Sendy: sendy, PlaintextPayloads: true, IntakeAddress: "0.0.0.0:8080", IntakeSecret: intakeSecret}
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "refusing to serve the intake in plain HTTP on 0.0.0.0:8080")
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "--intake-behind-proxy")
	withTLS := cfg
	withTLS.IntakeTLSCert, withTLS.IntakeTLSKey = cert, key
	require.NoError(t, withTLS.WithDefaults().Validate(), "HTTPS")
	behind := cfg
	behind.IntakeProxies = tenSlashEight
	require.NoError(t, behind.WithDefaults().Validate(), "behind its TLS proxy")
	prev := behind
	prev.IntakeSecret, prev.IntakePreviousSecret = "", intakeSecret
	require.ErrorContains(t, prev.WithDefaults().Validate(), "SMSORCH_INTAKE_SECRET_PREVIOUS is set without SMSORCH_INTAKE_SECRET")

	var flags Config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--intake-behind-proxy", "10.0.0.0/8, 192.0.2.7"}))
	require.Len(t, flags.IntakeProxies, 2)
	require.True(t, flags.IntakeProxies[1].Contains(net.ParseIP("192.0.2.7")))
	require.False(t, flags.IntakeProxies[1].Contains(net.ParseIP("192.0.2.8")), "an address is that one address")
	require.ErrorContains(t, fs.Parse([]string{"--intake-behind-proxy", "proxy.internal"}), "not an IP address or a CIDR")
}

// Outside dev mode a secret that protects nothing is refused at start,
// saying how to make a real one: the values this project once shipped
// in .env.example (and the simulator's defaults), the published codec
// key, and an intake secret or codec token shorter than 32 bytes. Dev
// mode takes anything.
func TestExampleAndShortSecretsAreRefusedOutsideDevMode(t *testing.T) {
	t.Parallel()
	published, err := codec.ParseKeys("example-change-me:pOq2h7o2y0uB04coFoIxkS2ZUjTKFd4cPp8aMs2bMf0=")
	require.NoError(t, err)
	renamed, err := codec.ParseKeys("2026-12:pOq2h7o2y0uB04coFoIxkS2ZUjTKFd4cPp8aMs2bMf0=")
	require.NoError(t, err)
	own, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	base := Config{Bird: BirdConfig{BaseURL: "https://api.bird.com", AccessKey: "a-real-looking-bird-key"}, Codec: own, IntakeSecret: intakeSecret}
	require.NoError(t, base.WithDefaults().Validate())
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"the example intake secret", func(c *Config) { c.IntakeSecret = "change-me-too" }, "SMSORCH_INTAKE_SECRET is a published example value"},
		{"a short intake secret", func(c *Config) { c.IntakeSecret = "0123456789abcdef" }, "SMSORCH_INTAKE_SECRET is 16 bytes, shorter than 32"},
		{"a short previous secret", func(c *Config) { c.IntakePreviousSecret = "old" }, "SMSORCH_INTAKE_SECRET_PREVIOUS is 3 bytes"},
		{"the simulator's Bird key", func(c *Config) { c.Bird.AccessKey = simulator.DefaultBirdAccessKey }, "BIRD_ACCESS_KEY is a published example value"},
		{"the simulator's Sendy token", func(c *Config) {
			c.Sendy = SendyConfig{BaseURL: "https://sendy", Token: simulator.DefaultSendyToken}
		}, "SENDY_TOKEN is a published example value"},
		{"the published codec key", func(c *Config) { c.Codec = published }, "key example-change-me is a published example"},
		{"the published codec key renamed", func(c *Config) { c.Codec = renamed }, "key 2026-12 is a published example"},
		{"a short codec token", func(c *Config) { c.CodecToken = "t0ken" }, "SMSORCH_CODEC_TOKEN is 5 bytes"},
	} {
		cfg := base
		tc.edit(&cfg)
		err := cfg.WithDefaults().Validate()
		require.ErrorContains(t, err, tc.want, tc.name)
		require.Regexp(t, "openssl rand -hex 32|smsctl codec-key|your Bird workspace|token Sendy gave you", err.Error(), "%s: says how to make a real one", tc.name)
		cfg.Dev, cfg.Bird, cfg.Sendy = true, BirdConfig{}, SendyConfig{}
		if tc.name == "a short codec token" {
			continue // a dev-mode codec server: checked by its own rules
		}
		require.NoError(t, cfg.WithDefaults().Validate(), "%s: dev mode takes it", tc.name)
	}
}

// Each secret can come from a file named by NAME_FILE (Docker secrets),
// never from a flag; both ways at once, or an empty file, is an error.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(v), 0o600))
		return p
	}
	key := mustKey(t)
	env := map[string]string{
		EnvBirdAccessKey + "_FILE": write("bird", "bird-key-from-a-file\n"),
		EnvSendyToken + "_FILE":    write("sendy", "sendy-token-from-a-file"),
		EnvIntakeSecret + "_FILE":  write("intake", intakeSecret+"\n"),
		EnvLedger + "_FILE":        write("ledger", "postgres://smsorch:pw@db/smsorch\n"),
		codec.EnvKeysFile:          write("keys", key+"\n"),
		codec.EnvToken + "_FILE":   write("token", intakeSecret),
	}
	var cfg Config
	cfg.ReadEnv(func(k string) string { return env[k] })
	require.NoError(t, cfg.envErr)
	require.Equal(t, "bird-key-from-a-file", cfg.Bird.AccessKey.Reveal())
	require.Equal(t, "sendy-token-from-a-file", cfg.Sendy.Token.Reveal())
	require.Equal(t, intakeSecret, cfg.IntakeSecret.Reveal())
	require.Equal(t, intakeSecret, cfg.CodecToken.Reveal())
	require.Equal(t, "postgres://smsorch:pw@db/smsorch", cfg.envLedger)
	require.NotNil(t, cfg.Codec)
	require.NoError(t, cfg.codecErr)

	// Named senders, from their file: each secret checked like the
	// shared one, a broken entry named.
	env[EnvIntakeSenders+"_FILE"] = write("senders", "shop:order+refund:"+intakeSecret+"\nauth:otp:short\n")
	cfg = Config{Sendy: SendyConfig{BaseURL: "https://sendy"}, IntakeAddress: Off}
	cfg.ReadEnv(func(k string) string { return env[k] })
	require.NoError(t, cfg.envErr)
	require.Equal(t, []intake.Sender{{Name: "shop", Secret: intakeSecret, Kinds: []string{"order", "refund"}}, {Name: "auth", Secret: "short", Kinds: []string{"otp"}}}, cfg.IntakeSenders)
	err := cfg.WithDefaults().Validate()
	require.ErrorContains(t, err, "SMSORCH_INTAKE_SENDERS: the sender auth's secret is 5 bytes, shorter than 32")
	require.NotContains(t, err.Error(), intakeSecret)
	cfg.IntakeSecret = intakeSecret
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "the sender shop's secret is also SMSORCH_INTAKE_SECRET")
	env[EnvIntakeSenders+"_FILE"] = write("senders-broken", "shop=order="+intakeSecret)
	cfg.ReadEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, cfg.envErr, "SMSORCH_INTAKE_SENDERS: intake sender 1 is not NAME:KINDS:SECRET")
	delete(env, EnvIntakeSenders+"_FILE")

	env[EnvSendyToken] = "also-given"
	env[EnvIntakeSecret+"_FILE"] = write("empty", "")
	cfg = Config{Sendy: SendyConfig{BaseURL: "https://sendy"}}
	cfg.ReadEnv(func(k string) string { return env[k] })
	err = cfg.WithDefaults().Validate()
	require.ErrorContains(t, err, "both SENDY_TOKEN and SENDY_TOKEN_FILE are set")
	require.ErrorContains(t, err, "SMSORCH_INTAKE_SECRET_FILE names "+filepath.Join(dir, "empty")+", which is empty")
	require.NotContains(t, err.Error(), "bird-key-from-a-file")
}

// Compose mounts a file for every secret, empty where a deployment
// leaves one out, and keeps the database passwords apart from the
// addresses in the file.
func TestAnEmptyOptionalSecretFileIsNotGivenAndAPasswordFileJoinsItsAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(v), 0o600))
		return p
	}
	empty := write("empty", "")
	env := map[string]string{
		EnvBirdAccessKey + "_FILE":        empty,
		EnvSendyToken + "_FILE":           write("sendy-token", "sendy-token-from-a-file\n"),
		EnvIntakePreviousSecret + "_FILE": empty,
		EnvIntakeSenders + "_FILE":        empty,
		EnvUIOIDCClientSecret + "_FILE":   empty,
		EnvLedger:                         "postgres://smsorch_ledger@postgres:5432/smsorch?sslmode=disable",
		EnvLedger + "_PASSWORD_FILE":      write("ledger-db-password", "0123456789abcdef\n"),
	}
	var cfg Config
	cfg.ReadEnv(func(k string) string { return env[k] })
	require.NoError(t, cfg.envErr)
	require.Empty(t, cfg.Bird.AccessKey.Reveal())
	require.Empty(t, cfg.IntakePreviousSecret.Reveal())
	require.Empty(t, cfg.IntakeSenders)
	require.Equal(t, "sendy-token-from-a-file", cfg.Sendy.Token.Reveal())
	require.Equal(t, "postgres://smsorch_ledger:0123456789abcdef@postgres:5432/smsorch?sslmode=disable", cfg.WithDefaults().LedgerPath)
	// The address from the flag takes the password from the file too.
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var flagged Config
	flagged.RegisterFlags(fs)
	flagged.ReadEnv(func(k string) string { return env[k] })
	require.NoError(t, fs.Parse([]string{"--ledger", "postgres://smsorch_ledger@db.internal/smsorch"}))
	require.Equal(t, "postgres://smsorch_ledger:0123456789abcdef@db.internal/smsorch", flagged.WithDefaults().LedgerPath)
	require.NoError(t, flagged.envErr)

	// Bird's URL set with its key file empty: the worker says what to set.
	cfg.Bird.BaseURL, cfg.Bird.WorkspaceID, cfg.Bird.ChannelID = "https://api.bird.com", "w", "c"
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "bird is configured (--bird-url) but BIRD_ACCESS_KEY is empty: set it, or write it into the file BIRD_ACCESS_KEY_FILE names (secrets/bird-access-key in compose)")
	// A required secret's empty file still says so.
	env[EnvIntakeSecret+"_FILE"] = empty
	cfg.ReadEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, cfg.envErr, "SMSORCH_INTAKE_SECRET_FILE names "+empty+", which is empty")
	// A password given twice is refused, without quoting it.
	delete(env, EnvIntakeSecret+"_FILE")
	env[EnvLedger] = "postgres://smsorch_ledger:inline-password@postgres:5432/smsorch"
	cfg = Config{}
	cfg.ReadEnv(func(k string) string { return env[k] })
	err := cfg.WithDefaults().Validate()
	require.ErrorContains(t, err, "both SMSORCH_LEDGER_PASSWORD and the address in SMSORCH_LEDGER hold a password")
	require.NotContains(t, err.Error(), "inline-password")
}

func TestAnUnsignedIntakeIsRefusedWhereItIsNotSafe(t *testing.T) {
	t.Parallel()
	sendy := SendyConfig{BaseURL: "https://sendy", Token: "t"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"all interfaces in dev mode", Config{Dev: true, IntakeAddress: "0.0.0.0:8080"}, "refusing to serve an unsigned HTTP intake on 0.0.0.0:8080"},
		{"empty host", Config{Dev: true, IntakeAddress: ":8080"}, "refusing to serve an unsigned HTTP intake"},
		{"a LAN address, even with --intake-insecure", Config{Sendy: sendy, PlaintextPayloads: true, IntakeAddress: "10.1.2.3:8080", IntakeInsecure: true}, "listen on 127.0.0.1"},
		{"loopback outside dev mode", Config{Sendy: sendy, PlaintextPayloads: true}, "pass --intake-insecure"},
		{"not an address", Config{Sendy: sendy, PlaintextPayloads: true, IntakeAddress: "8080"}, "is not HOST:PORT"},
	} {
		require.ErrorContains(t, tc.cfg.WithDefaults().Validate(), tc.want, tc.name)
	}
	for name, cfg := range map[string]Config{
		"dev mode on loopback":          {Dev: true},
		"localhost in dev mode":         {Dev: true, IntakeAddress: "localhost:8080"},
		"insecure on loopback":          {Sendy: sendy, PlaintextPayloads: true, IntakeInsecure: true},
		"signed behind a proxy":         {Sendy: sendy, PlaintextPayloads: true, IntakeAddress: "0.0.0.0:8080", IntakeSecret: intakeSecret, IntakeProxies: tenSlashEight},
		"no intake outside dev mode":    {Sendy: sendy, PlaintextPayloads: true, IntakeAddress: Off},
		"signed on loopback in prod":    {Sendy: sendy, PlaintextPayloads: true, IntakeSecret: intakeSecret},
		"IPv6 loopback with --insecure": {Sendy: sendy, PlaintextPayloads: true, IntakeAddress: "[::1]:8080", IntakeInsecure: true},
		"named senders behind a proxy": {Sendy: sendy, PlaintextPayloads: true, IntakeAddress: "0.0.0.0:8080", IntakeProxies: tenSlashEight,
			IntakeSenders: []intake.Sender{{Name: "shop", Secret: intakeSecret, Kinds: []string{"order"}}}},
	} {
		require.NoError(t, cfg.WithDefaults().Validate(), name)
	}
}

// Production mode: the worker connects through TEMPORAL_ADDRESS and
// TEMPORAL_NAMESPACE to a cluster that lacks the search attributes, adds
// them, and serves sends to a configured provider. Its payloads are
// sealed: the run's history, read raw from the server, holds neither the
// recipient nor the text.
func TestStartAgainstAnExistingCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cluster, sim, srv, creds := aClusterAndASimulator(ctx, t, dir)

	// The worker's environment, its own: the test runs beside others.
	key, err := codec.NewKey("test-1")
	require.NoError(t, err)
	env := envMap{
		"TEMPORAL_ADDRESS": cluster.FrontendAddress(), "TEMPORAL_NAMESPACE": "default",
		"TEMPORAL_CONFIG_FILE": filepath.Join(dir, "no-such-profile.toml"),
		EnvSendyToken:          creds.SendyToken, codec.EnvKeys: key,
	}
	var cfg Config
	cfg.RegisterFlags(flag.NewFlagSet("worker", flag.ContinueOnError))
	cfg.ReadEnv(func(k string) string { return env[k] })
	cfg.temporalEnv = env
	cfg.Sendy.BaseURL = srv.URL
	cfg.RateLimits = map[provider.Name]int{provider.Sendy: 0} // a handful of requests
	cfg.LedgerPath = filepath.Join(dir, "ledger.db")
	cfg.IntakeAddress = Off
	// A short window, so that an event whose provider is down awaits a
	// decision within seconds.
	cfg.AttemptTimeout = 3 * time.Second
	cfg.Policies[provider.Sendy] = shortWindowPolicy
	require.NoError(t, sim.AddFault(simulator.Fault{Kind: simulator.Unavailable, Provider: "sendy", Key: "order-4-shipped", Rate: 1}))
	a, err := Start(ctx, cfg, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	require.Nil(t, a.Stack)
	require.Contains(t, a.Banner(), "smsorch worker is up (namespace default)")

	sa, err := a.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	for name := range contract.SearchAttributes() {
		require.Contains(t, sa.GetCustomAttributes(), name, "added at start")
	}

	run, err := a.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "order-1-shipped", TaskQueue: contract.TaskQueue},
		contract.WorkflowName, contract.Input{Key: "order-1-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 1 has shipped."})
	require.NoError(t, err)
	var res contract.Result
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, contract.Delivered, res.State)
	require.Len(t, sim.Messages(simulator.Filter{Key: "order-1-shipped"}), 1)

	// A second event through the starter, which builds its start request
	// itself (the intake's and smsctl's path): sealed as well.
	_, err = starter.New(a.Client).Send(ctx, starter.Event{Key: "order-2-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 1 has shipped."})
	require.NoError(t, err)
	res, err = starter.New(a.Client).Wait(ctx, "order-2-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	// Its second start joins it (the starter's memo is sealed, below).
	again, err := starter.New(a.Client).Send(ctx, starter.Event{Key: "order-2-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 1 has shipped."})
	require.NoError(t, err)
	require.False(t, again.Started)
	require.Equal(t, contract.Delivered, again.State)

	// The raw histories, through a client without the keys.
	raw, err := client.Dial(client.Options{HostPort: cluster.FrontendAddress(), Logger: logging.SDK(zap.NewNop())})
	require.NoError(t, err)
	defer raw.Close()
	for _, key := range []string{"order-1-shipped", "order-2-shipped"} {
		it := raw.GetWorkflowHistory(ctx, key, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var events, sealed int
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			events++
			// Every payload of the event (inputs, results, failures'
			// attributes, user metadata) but the search attributes.
			require.NoError(t, proxy.VisitPayloads(ctx, ev, proxy.VisitPayloadsOptions{
				SkipSearchAttributes: true,
				Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
					for _, p := range ps {
						require.Equal(t, codec.Encoding, string(p.GetMetadata()["encoding"]), "%s: a payload of event %d (%s) is not sealed", key, ev.GetEventId(), ev.GetEventType())
						sealed++
					}
					return ps, nil
				},
			}))
			if key == "order-2-shipped" && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
				require.Contains(t, ev.GetWorkflowExecutionStartedEventAttributes().GetMemo().GetFields(), starter.FingerprintMemo, "the starter's memo, among the payloads checked sealed")
			}
			b, err := protojson.Marshal(ev)
			require.NoError(t, err)
			for _, plain := range []string{"972502345678", "Order 1 has shipped"} {
				require.NotContains(t, string(b), plain, "%s: event %d (%s) in plain text", key, ev.GetEventId(), ev.GetEventType())
			}
		}
		require.Greater(t, events, 10, key)
		require.Greater(t, sealed, 5, "%s: sealed payloads in the history", key)
	}
	// The ledger keeps the recipient and the text sealed: neither is in
	// its file in plain, byte for byte.
	for _, f := range []string{cfg.LedgerPath, cfg.LedgerPath + "-wal"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(f, "-wal") {
			continue
		}
		require.NoError(t, err)
		for _, plain := range []string{"972502345678", "Order 1 has shipped"} {
			require.NotContains(t, string(b), plain, "%s holds %q in plain", f, plain)
		}
	}
	e, err := a.Ledger.Event(ctx, "order-1-shipped")
	require.NoError(t, err)
	require.Equal(t, "+972502345678", e.Recipient, "the worker opens it with the keys")
	ns, err := a.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	require.Equal(t, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), a.ledgerRetention(ctx), "the ledger keeps personal fields as long as the namespace keeps runs")

	// Without the keys the result cannot be read; with them it can.
	var plainRes contract.Result
	require.Error(t, raw.GetWorkflow(ctx, "order-1-shipped", "").Get(ctx, &plainRes))

	// Whoever reaches Temporal without the keys cannot send: a SendSMS
	// started in plain text (a bare `temporal workflow start`) fails
	// before it does anything, saying why, and nothing reaches the
	// provider or the ledger.
	plain, err := raw.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "order-3-shipped", TaskQueue: contract.TaskQueue},
		contract.WorkflowName, contract.Input{Key: "order-3-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 3 has shipped."})
	require.NoError(t, err)
	err = a.Client.GetWorkflow(ctx, "order-3-shipped", plain.GetRunID()).Get(ctx, &res)
	require.Error(t, err)
	require.ErrorContains(t, err, "refused a payload that reached Temporal unsealed")
	require.ErrorContains(t, err, "--accept-unsealed")
	require.Empty(t, sim.Messages(simulator.Filter{Key: "order-3-shipped"}), "nothing was sent")
	_, err = a.Ledger.Event(ctx, "order-3-shipped")
	require.ErrorIs(t, err, ledger.ErrNotFound, "nothing was claimed")
	again3, err := starter.New(a.Client).Send(ctx, starter.Event{Key: "order-3-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 3 has shipped."})
	require.NoError(t, err)
	require.False(t, again3.Started)
	require.Equal(t, contract.Failed, again3.State, "a run that failed before it set a state is reported so, not as its start left it")

	// Nor decide: a plain cancel signal to a run awaiting a decision is
	// refused in its timeline, and the run keeps waiting; the same
	// decision sealed (smsctl, the starter) is applied.
	st := starter.New(a.Client)
	_, err = st.Send(ctx, starter.Event{Key: "order-4-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 4 has shipped."})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := st.Status(ctx, "order-4-shipped")
		return err == nil && s.State == contract.AwaitingDecision
	}, 90*time.Second, 250*time.Millisecond, "the run awaits a decision once its window closed")
	require.NoError(t, raw.SignalWorkflow(ctx, "order-4-shipped", "", contract.ActionCancel, map[string]string{"reason": "not ours", "by": "mallory"}))
	require.Eventually(t, func() bool {
		s, err := st.Status(ctx, "order-4-shipped")
		if err != nil {
			return false
		}
		for _, e := range s.Timeline {
			if strings.Contains(e.Text, "refused a cancel signal from someone") && strings.Contains(e.Text, "unsealed") {
				return s.State == contract.AwaitingDecision
			}
		}
		return false
	}, 30*time.Second, 250*time.Millisecond, "the plain signal is refused where a person sees it")
	_, err = st.Decide(ctx, "order-4-shipped", contract.Decision{Action: contract.ActionCancel, Reason: "test", By: "tester"})
	require.NoError(t, err)
	r4, err := st.Wait(ctx, "order-4-shipped")
	if err != nil {
		r4, _ = contract.ResultFromError(err) // a cancelled run ends as a failure carrying its result
	}
	require.Equal(t, contract.Cancelled, r4.State, "the sealed decision is applied: %v", err)
}

// The dev stack with everything on: the banner names each part, the
// intake answers over HTTPS, and the codec server decodes only with its
// token, for the embedded UI's origin.
func TestDevBannerNamesTheUI(t *testing.T) {
	t.Parallel()
	cert, key := selfSigned(t)
	keys, err := codec.NewKey("dev-1")
	require.NoError(t, err)
	ring, err := codec.ParseKeys(keys)
	require.NoError(t, err)
	a, err := Start(context.Background(), Config{
		Dev: true, DataDir: t.TempDir(), FrontendAddress: "127.0.0.1:0", UIAddress: "127.0.0.1:0",
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: "127.0.0.1:0", IntakeTLSCert: cert, IntakeTLSKey: key,
		Codec: ring, CodecToken: "codec-t0ken", CodecServerAddress: "127.0.0.1:0",
	}, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	b := a.Banner()
	require.Contains(t, b, a.Stack.UIURL()+"/namespaces/default/workflows")
	require.Contains(t, b, a.Sim.URL+"/_sim/messages")
	require.Contains(t, b, "Press Ctrl+C to stop.")
	require.Contains(t, b, "Codec server:       "+a.CodecURL)
	require.NotContains(t, b, "codec-t0ken")
	require.True(t, strings.HasPrefix(a.IntakeURL, "https://"), a.IntakeURL)

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the test's own certificate
	resp, err := hc.Get(a.IntakeURL + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	decode := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, a.CodecURL+path, strings.NewReader(`{"payloads":[]}`))
		req.Header.Set("Origin", a.Stack.UIURL())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusUnauthorized, decode("/decode").StatusCode)
	ok := decode("/codec-t0ken/decode")
	require.Equal(t, http.StatusOK, ok.StatusCode)
	require.Equal(t, a.Stack.UIURL(), ok.Header.Get("Access-Control-Allow-Origin"), "the embedded UI may call it")
	require.NoError(t, a.Stop())
	require.NoError(t, a.Stop(), "a second Stop is harmless")
}

// The rates the provider queues get never let the server's limiter put
// more than the limit into any 60 s: per partition, at most one second's
// worth of burst plus 60 s of rate (Temporal 1.32's matcher), summed over
// on servers of one partition and of four.
func TestQueueRatesStayWithinTheLimit(t *testing.T) {
	t.Parallel()
	for _, partitions := range []int{1, 4} {
		for _, perMinute := range []int{8, 16, 60, 100, 600} {
			r, err := QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: perMinute}, Partitions: partitions}.Rate(provider.Sendy)
			require.NoError(t, err)
			worst := partitions * (1 + int(math.Floor(61*r/float64(partitions))))
			require.LessOrEqual(t, worst, perMinute, "worst case in 60 s at %d a minute, %d partitions", perMinute, partitions)
		}
	}
	sendy := map[provider.Name]int{provider.Sendy: 60}
	r, err := QueueLimits{PerMinute: sendy, Partitions: 1}.Rate(provider.Sendy)
	require.NoError(t, err)
	require.InDelta(t, 57.1, r*60, 0.1, "Sendy on one partition: requests a minute")
	r, err = QueueLimits{PerMinute: sendy}.Rate(provider.Sendy)
	require.NoError(t, err)
	require.InDelta(t, 54.2, r*60, 0.1, "Sendy on the default four partitions: requests a minute")
	_, err = QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: 7}}.Rate(provider.Sendy)
	require.ErrorContains(t, err, "leaves no room")
	r, err = QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: 0}}.Rate(provider.Sendy)
	require.NoError(t, err)
	require.Zero(t, r, "0 is no limit")
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(priv)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// SIGTERM during a slow send: the process stops taking work, waits for
// the send in flight, and the ledger holds the attempt with the
// provider's real answer, not an attempt cut off with its outcome
// unknown. Sent to this test process itself, through StopOnSignal as
// worker/main.go uses it.
func TestSIGTERMDuringASlowSendRecordsItsRealOutcome(t *testing.T) {
	dir := t.TempDir()
	ctx, stop := StopOnSignal(io.Discard, func(int) { t.Error("one signal must not exit at once") })
	defer stop()
	cfg := Config{
		Dev: true, DataDir: dir, FrontendAddress: "127.0.0.1:0", UIAddress: Off,
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: Off, AttemptTimeout: 10 * time.Second, StopTimeout: 20 * time.Second,
		SimFaults: simulator.FaultFlag{{Kind: simulator.Hang, Provider: "bird", Key: "order-77-shipped", Count: 1, Delay: simulator.Duration(3 * time.Second)}},
	}
	a, err := Start(context.Background(), cfg, zap.NewNop())
	require.NoError(t, err)
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done() // what Run waits for
		stopped <- a.Stop()
	}()
	_, err = a.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "order-77-shipped", TaskQueue: contract.TaskQueue},
		contract.WorkflowName, contract.Input{Key: "order-77-shipped", Provider: "bird", To: "+31612345678", Text: "Order 77 has shipped."})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(a.Sim.Requests(simulator.Filter{Key: "order-77-shipped"})) > 0 }, 30*time.Second, 20*time.Millisecond, "the send reached the provider")
	sentAt := time.Now()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30 s")
	}
	require.Greater(t, time.Since(sentAt), 2*time.Second, "the stop waited for the hung send")

	led, err := ledger.OpenSQLite(context.Background(), filepath.Join(dir, "ledger.db"))
	require.NoError(t, err)
	defer func() { _ = led.Close() }()
	attempts, err := led.Attempts(context.Background(), "order-77-shipped")
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.False(t, attempts[0].Open(), "the attempt's end is recorded")
	require.Equal(t, 202, attempts[0].HTTPStatus)
	require.NotEmpty(t, attempts[0].MessageID, "with the provider's message id")
	require.False(t, attempts[0].Uncertain(), "outcome %q is certain", attempts[0].Outcome)
}

// After a few runs the metrics endpoint shows the SDK's metrics and
// ours with the right values: one event delivered; one whose provider
// stays down past the window, reconciled, awaiting a decision, then
// cancelled.
func TestMetricsCountSendsReconciliationsDecisionsAndTheAwaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Attempts get 3 s: under a loaded CI machine a 1 s attempt at the
	// third event timed out, its outcome became unknown, and the failover
	// rightly went on a search ("searched_none") instead of on the
	// answers alone. The window leaves room for a few attempts of 3 s
	// plus the activity's slack.
	pol := activities.Policy{
		ReplayWindow: 16 * time.Second, WindowMargin: 3 * time.Second, AttemptTimeout: 3 * time.Second,
		InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second,
		// The shortest horizon a policy may have: Bird's lock plus the attempt.
		LateEffectHorizon: activities.ProviderLockLifetime + 3*time.Second,
		StatusPollInitial: 100 * time.Millisecond, StatusPollMax: 300 * time.Millisecond,
	}
	a, err := Start(ctx, Config{
		Dev: true, DataDir: t.TempDir(), FrontendAddress: "127.0.0.1:0", UIAddress: Off,
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: Off, MetricsAddress: "127.0.0.1:0",
		Simulator: simulator.Config{DeliveryDelay: 100 * time.Millisecond},
		SimFaults: simulator.FaultFlag{
			{Kind: simulator.Error5xx, Provider: "bird", Key: "order-2-shipped", Rate: 1},
			{Kind: simulator.Unavailable, Provider: "bird", Key: "order-3-shipped", Rate: 1},
		},
		AttemptTimeout: pol.AttemptTimeout,
		Policies:       map[provider.Name]activities.Policy{provider.Bird: pol, provider.Sendy: pol},
	}, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	require.Contains(t, a.Banner(), a.MetricsURL)
	st := starter.New(a.Client)
	_, err = st.Send(ctx, starter.Event{Key: "order-1-shipped", Provider: "bird", To: "+31612345678", Text: "Order 1 has shipped."})
	require.NoError(t, err)
	_, err = st.Send(ctx, starter.Event{Key: "order-2-shipped", Provider: "bird", To: "+31612345678", Text: "Order 2 has shipped."})
	require.NoError(t, err)
	// A third event fails over: Bird answers 503 E01033 (not executed).
	_, err = st.Send(ctx, starter.Event{Key: "order-3-shipped", Provider: "bird", Fallback: "sendy", To: "+31612345678", Text: "Order 3 has shipped."})
	require.NoError(t, err)
	res, err := st.Wait(ctx, "order-1-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	res, err = st.Wait(ctx, "order-3-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)

	scrape := func() string {
		resp, err := http.Get(a.MetricsURL)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	// The second run awaits a decision once its window closed (visibility lags a little).
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(), "smsorch_runs_awaiting_decision 1\n")
	}, 60*time.Second, 200*time.Millisecond, "one run awaiting a decision")
	_, err = st.Decide(ctx, "order-2-shipped", contract.Decision{Action: contract.ActionCancel, Reason: "metrics test", By: "tester"})
	require.NoError(t, err)
	_, err = st.Wait(ctx, "order-2-shipped")
	_, isResult := contract.ResultFromError(err)
	require.True(t, err == nil || isResult, "the cancelled run ended: %v", err)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(), "smsorch_runs_awaiting_decision 0\n")
	}, 30*time.Second, 200*time.Millisecond)

	m := scrape()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"smsorch_sends_total", map[string]string{"provider": "bird", "outcome": "accepted"}, 1},
		{"smsorch_decisions_total", map[string]string{"action": "cancel", "forced": "false"}, 1},
		{"smsorch_runs_settled_total", map[string]string{"provider": "bird", "state": "Delivered"}, 1},
		{"smsorch_runs_settled_total", map[string]string{"provider": "bird", "state": "Cancelled"}, 1},
		{"smsorch_failovers_total", map[string]string{"from": "bird", "to": "sendy", "reason": "not_executed"}, 1},
		{"smsorch_runs_settled_total", map[string]string{"provider": "sendy", "state": "Delivered"}, 1},
	} {
		got, ok := metricValue(m, c.name, c.labels)
		if !ok && c.name == "smsorch_failovers_total" {
			// Say which of the third event's attempts was not a plain "not executed".
			atts, err := a.Ledger.Attempts(ctx, "order-3-shipped")
			require.NoError(t, err)
			for _, at := range atts {
				t.Logf("order-3-shipped attempt %d under %s: %s..%s outcome %q status %d code %q reason %q",
					at.Number, at.SendKey, at.StartedAt.Format("15:04:05.000"), at.EndedAt.Format("15:04:05.000"), at.Outcome, at.HTTPStatus, at.Code, at.Reason)
			}
		}
		require.True(t, ok, "%s%v is exported:\n%s", c.name, c.labels, smsorchLines(m))
		require.Equal(t, c.want, got, "%s%v", c.name, c.labels)
	}
	// Every attempt of the second event ended unknown (500 with nothing
	// stored), and the search after its window found nothing.
	unknown, _ := metricValue(m, "smsorch_sends_total", map[string]string{"provider": "bird", "outcome": "unknown"})
	require.GreaterOrEqual(t, unknown, 2.0)
	none, _ := metricValue(m, "smsorch_reconciliations_total", map[string]string{"provider": "bird", "result": "none"})
	require.GreaterOrEqual(t, none, 1.0)
	_, sdk := metricValue(m, "temporal_workflow_completed_total", nil)
	require.True(t, sdk, "the SDK's own metrics are exported too")
	dup, ok := metricValue(m, "smsorch_duplicates_reported_total", map[string]string{"provider": "bird", "kind": "proven"})
	require.True(t, ok, "exported at 0 before any duplicate, as the series a first count adds to, so increase() and the alert see it")
	require.Zero(t, dup, "no run reported a duplicate")
	// Our metrics keep their own labels, not the SDK's (a series with
	// them would be born at its first count, which increase() misses).
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "smsorch_") {
			require.NotContains(t, line, "workflow_type=", line)
			require.NotContains(t, line, "task_queue=", line)
		}
	}

	// The first acceptance of each event, timed from its start: Bird's
	// for the first event, Sendy's for the one that failed over.
	for _, p := range []string{"bird", "sendy"} {
		n, ok := metricValue(m, "smsorch_event_accept_latency_seconds_count", map[string]string{"provider": p})
		require.True(t, ok, "the acceptance latency at %s is exported", p)
		require.Equal(t, 1.0, n, p)
	}
	limit, ok := metricValue(m, "smsorch_provider_request_limit_per_minute", map[string]string{"provider": "sendy"})
	require.True(t, ok)
	require.Equal(t, float64(DefaultRateLimits[provider.Sendy]), limit)

	// Every metric the alert rules and the dashboard query is one this
	// worker exports (deploy/): a renamed metric fails here, not as an
	// alert that can never fire or an empty panel.
	for _, file := range []string{"prometheus/alerts.yml", "grafana/smsorch.json"} {
		text, err := os.ReadFile(filepath.Join("..", "deploy", file))
		require.NoError(t, err)
		queried := regexp.MustCompile(`\b(?:smsorch|temporal)_[a-z_]+\b`).FindAllString(string(text), -1)
		require.NotEmpty(t, queried, file)
		for _, n := range queried {
			_, ok := metricValue(m, n, nil)
			require.True(t, ok, "%s, which deploy/%s queries, is not exported:\n%s", n, file, m)
		}
	}
	_, ok = metricValue(m, "temporal_num_pollers", map[string]string{"task_queue": contract.TaskQueue, "poller_type": "workflow_task"})
	require.True(t, ok, "the pollers of the task queue, with the labels SmsNoWorkerPolling selects")
}

// metricValue sums the samples of a metric whose labels include labels.
func metricValue(text, name string, labels map[string]string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && strings.Contains(line, k+`="`+v+`"`)
		}
		if !match {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// smsorchLines lists the smsorch_ lines, for a failure message.
func smsorchLines(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "smsorch_") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// A send with a known provider token, intake secret, payload key and
// recipient: none of them appears unmasked in the process's log (debug
// level), the query answer, the intake's answers or smsctl's output.
func TestNoSecretOrRecipientLeaks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		token     = "sendy-T0KEN-4f1c9e"
		accessKey = "bird-K3Y-77a0b1"
		secret    = "intake-S3CRET-0d9a"
		recipient = "+972501234567"
	)
	keySpec, err := codec.NewKey("leak-1")
	require.NoError(t, err)
	ring, err := codec.ParseKeys(keySpec)
	require.NoError(t, err)
	_, rawKey, _ := strings.Cut(keySpec, ":")
	logs := &syncBuffer{b: &bytes.Buffer{}}
	log, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: "debug", Sink: logs})
	require.NoError(t, err)
	a, err := Start(ctx, Config{
		Dev: true, DataDir: t.TempDir(), FrontendAddress: "127.0.0.1:0", UIAddress: Off,
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: "127.0.0.1:0", IntakeSecret: secret,
		Simulator: simulator.Config{SendyToken: token, BirdAccessKey: accessKey, DeliveryDelay: 100 * time.Millisecond},
		Codec:     ring,
		Policies:  map[provider.Name]activities.Policy{provider.Sendy: {StatusPollInitial: 100 * time.Millisecond, StatusPollMax: 200 * time.Millisecond}},
	}, log)
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()

	body := `{"kind":"order","id":"4242","stage":"shipped","provider":"sendy","to":"` + recipient + `","text":"Your code is 482913"}`
	signed := intake.Sign(secret, time.Now(), []byte(body))
	postSigned := func() (int, starter.Result, string) {
		req, _ := http.NewRequest(http.MethodPost, a.IntakeURL+"/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range signed {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var r starter.Result
		require.NoError(t, json.Unmarshal(answer, &r), string(answer))
		return resp.StatusCode, r, string(answer)
	}
	code, first, answer := postSigned()
	require.Equal(t, http.StatusAccepted, code, answer)
	// The sender's retry of the very same signed request (its answer was
	// lost): Temporal knows the start request, so the answer is the
	// first one's, never 401.
	code, again, _ := postSigned()
	require.Equal(t, http.StatusAccepted, code, "the same signed POST again")
	require.Equal(t, first, again)
	res, err := starter.New(a.Client).Wait(ctx, "order-4242-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)

	st, err := starter.New(a.Client).Status(ctx, "order-4242-shipped")
	require.NoError(t, err)
	query, _ := json.Marshal(st)
	get, _ := http.NewRequest(http.MethodGet, a.IntakeURL+"/v1/events/order-4242-shipped", nil)
	for k, v := range intake.Sign(secret, time.Now(), []byte("GET /v1/events/order-4242-shipped")) {
		get.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(get)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(got))

	var cliOut, cliErr bytes.Buffer
	env := []string{"TEMPORAL_ADDRESS=" + a.Stack.FrontendAddress(), codec.EnvKeys + "=" + keySpec}
	require.Equal(t, 0, cli.Run(ctx, []string{"status", "order-4242-shipped"}, &cliOut, &cliErr, env), cliErr.String())
	require.Contains(t, cliOut.String(), "+972…67", "smsctl shows the masked recipient")
	require.Equal(t, 0, cli.Run(ctx, []string{"--json", "status", "order-4242-shipped"}, &cliOut, &cliErr, env), cliErr.String())
	require.NoError(t, a.Stop())

	for what, text := range map[string]string{
		"log": logs.String(), "query answer": string(query), "intake POST answer": string(answer),
		"intake GET answer": string(got), "smsctl output": cliOut.String() + cliErr.String(),
	} {
		require.NotEmpty(t, text, what)
		// One masking rule: the country code and the last two digits; no
		// more of the number (the old rule kept "+97250").
		for _, leak := range []string{token, accessKey, secret, rawKey, recipient, "972501234567", "0501234567", "97250", "1234567"} {
			require.NotContains(t, text, leak, "%s holds %q", what, leak)
		}
	}
	require.Contains(t, logs.String(), "+972…67", "the log names the recipient masked")
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Sync() error { return nil }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// --intake-client-rate reaches the intake: with 10 requests a minute
// (bursts of 1) a client's second request is answered 429.
func TestTheIntakeClientRateIsApplied(t *testing.T) {
	t.Parallel()
	a, err := Start(context.Background(), Config{
		Dev: true, DataDir: t.TempDir(), FrontendAddress: "127.0.0.1:0", UIAddress: Off,
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: "127.0.0.1:0", IntakeClientRate: 10,
	}, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	get := func() *http.Response {
		resp, err := http.Get(a.IntakeURL + "/v1/events/order-1-shipped")
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusNotFound, get().StatusCode, "no such event, within the budget")
	resp := get()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "past a budget of 10 a minute, bursts of 1")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}

// TestLookupsArePacedWhereAProviderHasALimit: the policy a run receives
// says whether its provider's lookups are rate limited, so the run spends
// no dispatch of that queue on its first wait; the policy's own settings
// stay.
func TestLookupsArePacedWhereAProviderHasALimit(t *testing.T) {
	t.Parallel()
	own := activities.Policy{StatusPollInitial: 3 * time.Second}
	got := pacedLookups(map[provider.Name]activities.Policy{provider.Bird: own}, DefaultRateLimits)
	require.True(t, got[provider.Sendy].LookupsPaced, "Sendy's default limit paces its lookups")
	require.False(t, got[provider.Bird].LookupsPaced, "Bird publishes no limit")
	require.Equal(t, 3*time.Second, got[provider.Bird].StatusPollInitial)
	require.Equal(t, activities.DefaultPolicy().StatusPollInitial, got[provider.Sendy].WithDefaults().StatusPollInitial)

	got = pacedLookups(map[provider.Name]activities.Policy{provider.Sendy: own}, map[provider.Name]int{provider.Sendy: 0, provider.Bird: 600})
	require.False(t, got[provider.Sendy].LookupsPaced, "no limit, no pacing")
	require.True(t, got[provider.Bird].LookupsPaced)
	require.Equal(t, 3*time.Second, got[provider.Sendy].StatusPollInitial)
}

// A database password on the command line is readable by every user of
// the host (ps): outside dev mode --ledger and --temporal-db refuse one,
// naming the variable to use instead and never the password; the same
// address in the environment, or one without a password, is taken.
func TestADatabasePasswordInAFlagIsRefusedOutsideDevMode(t *testing.T) {
	t.Parallel()
	own, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	parse := func(args ...string) Config {
		var cfg Config
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		cfg.ReadEnv(func(string) string { return "" })
		require.NoError(t, fs.Parse(args))
		cfg.Bird = BirdConfig{BaseURL: "https://api.bird.com", AccessKey: "a-real-looking-bird-key"}
		cfg.Codec, cfg.IntakeSecret = own, intakeSecret
		return cfg
	}
	cfg := parse("--ledger", "postgres://smsorch:s3cret-pw@db:5432/smsorch", "--temporal-db", "postgres://temporal:0ther-pw@db/temporal")
	err = cfg.WithDefaults().Validate()
	require.ErrorContains(t, err, "--ledger holds a password, which every user of this host can read in the process list: give the address in SMSORCH_LEDGER, or in a file named by SMSORCH_LEDGER_FILE")
	require.ErrorContains(t, err, "--temporal-db holds a password")
	require.NotContains(t, err.Error(), "s3cret-pw")
	require.NotContains(t, err.Error(), "0ther-pw")

	require.NoError(t, parse("--ledger", "postgres://smsorch@db:5432/smsorch").WithDefaults().Validate(), "no password in the flag")
	dev := parse("--ledger", "postgres://smsorch:s3cret-pw@db:5432/smsorch", "--dev")
	require.NoError(t, dev.WithDefaults().Validate(), "dev mode takes it")
	fromEnv := parse()
	fromEnv.ReadEnv(func(name string) string {
		if name == EnvLedger {
			return "postgres://smsorch:s3cret-pw@db:5432/smsorch"
		}
		return ""
	})
	fromEnv.Bird = BirdConfig{BaseURL: "https://api.bird.com", AccessKey: "a-real-looking-bird-key"}
	fromEnv.Codec, fromEnv.IntakeSecret = own, intakeSecret
	require.NoError(t, fromEnv.WithDefaults().Validate(), "the environment is where it goes")
}

// The web UI's login: all of it or none, a provider over HTTPS (or on
// loopback), the callback at the UI's own path, a UI to protect, and a
// server that takes the provider's tokens.
func TestTheWebUILoginIsCheckedBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	cert, key := selfSigned(t)
	login := func(edit func(*Config)) error {
		c := Config{ServerOnly: true, FrontendAddress: "127.0.0.1:7233", UIAddress: "127.0.0.1:8233",
			TemporalTLSCert: cert, TemporalTLSKey: key, TemporalTLSCA: cert,
			TemporalAPIKeysJWKS: "https://idp.example/jwks", TemporalAPIKeysIssuer: "https://idp.example", TemporalAPIKeysAudience: "smsorch-ui",
			UIOIDCIssuer: "https://idp.example", UIOIDCClientID: "smsorch-ui", UIOIDCClientSecret: "a-secret-from-the-provider",
			UIOIDCCallbackURL: "https://temporal.example/auth/sso/callback"}
		edit(&c)
		return c.WithDefaults().Validate()
	}
	require.NoError(t, login(func(*Config) {}))
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no client secret", func(c *Config) { c.UIOIDCClientSecret = "" }, "needs --ui-oidc-issuer, --ui-oidc-client-id, --ui-oidc-callback-url and SMSORCH_UI_OIDC_CLIENT_SECRET together"},
		{"a provider in plain HTTP", func(c *Config) { c.UIOIDCIssuer = "http://idp.example" }, `--ui-oidc-issuer "http://idp.example" is not an https:// URL`},
		{"a callback elsewhere", func(c *Config) { c.UIOIDCCallbackURL = "https://temporal.example/callback" }, "takes the provider's answer at /auth/sso/callback"},
		{"a server that does not take the tokens", func(c *Config) {
			c.TemporalAPIKeysJWKS, c.TemporalAPIKeysIssuer, c.TemporalAPIKeysAudience = "", "", ""
		}, "set --temporal-api-keys-jwks to the provider's key set, --temporal-api-keys-issuer https://idp.example and --temporal-api-keys-audience smsorch-ui"},
		{"no UI", func(c *Config) { c.UIAddress = Off }, "use it where the process serves the UI"},
		{"a server that takes another issuer's tokens", func(c *Config) { c.TemporalAPIKeysIssuer = "https://other.example" }, "--temporal-api-keys-issuer https://idp.example"},
		{"a server that takes tokens for another audience", func(c *Config) { c.TemporalAPIKeysAudience = "temporal-api" }, "--temporal-api-keys-audience smsorch-ui"},
		{"a UI-only process without TLS to Temporal", func(c *Config) {
			c.ServerOnly, c.UIOnly, c.TemporalTLSCert, c.TemporalTLSKey, c.TemporalTLSCA = false, true, "", "", ""
			c.TemporalAPIKeysJWKS, c.TemporalAPIKeysIssuer, c.TemporalAPIKeysAudience = "", "", ""
		}, "set TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH and TEMPORAL_TLS_SERVER_CA_CERT_PATH"},
		{"an example secret", func(c *Config) { c.UIOIDCClientSecret = "change-me" }, "SMSORCH_UI_OIDC_CLIENT_SECRET is a published example value"},
	} {
		require.ErrorContains(t, login(tc.edit), tc.want, tc.name)
	}
	require.NoError(t, login(func(c *Config) {
		c.UIOIDCIssuer, c.UIOIDCCallbackURL = "http://127.0.0.1:5556/dex", "http://127.0.0.1:8233/auth/sso/callback"
		c.TemporalAPIKeysIssuer = c.UIOIDCIssuer
	}), "plain HTTP on loopback")
}
