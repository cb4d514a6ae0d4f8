// Package app assembles the worker process: the Temporal client (or, in dev
// mode, the embedded dev stack), the provider clients (or the simulator),
// the ledger, the Temporal worker and the HTTP intake. worker/main.go only
// parses flags and calls Run.
package app

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/secrets"
	"github.com/acme/smsorch/provider"
)

// Environment variables that hold secrets; they are never flags, so they
// do not show in the process list.
const (
	EnvBirdAccessKey = "BIRD_ACCESS_KEY"
	EnvSendyToken    = "SENDY_TOKEN"
	EnvIntakeSecret  = "SMSORCH_INTAKE_SECRET"
	// EnvIntakePreviousSecret is the intake secret being retired: requests
	// signed with it are still accepted while senders move to the new one.
	EnvIntakePreviousSecret = "SMSORCH_INTAKE_SECRET_PREVIOUS"
	// EnvUIOIDCClientSecret is the web UI's client secret at its OpenID
	// Connect provider (--ui-oidc-issuer).
	EnvUIOIDCClientSecret = "SMSORCH_UI_OIDC_CLIENT_SECRET"
	// EnvIntakeSenders names senders, each with its own secret and event
	// kinds (intake.ParseSenders): NAME:KINDS:SECRET, comma-separated.
	EnvIntakeSenders = "SMSORCH_INTAKE_SENDERS"
	// EnvLedger is the ledger's address when --ledger is not given: a
	// postgres:// DSN may hold a password, which a flag would show in
	// the process list.
	EnvLedger = "SMSORCH_LEDGER"
	// EnvTemporalDB is the embedded server's database when --temporal-db
	// is not given, for the same reason.
	EnvTemporalDB = "SMSORCH_TEMPORAL_DB"
	// The payload keys (codec.EnvKeys, codec.EnvKeyFile) and the codec
	// server's token (codec.EnvToken) are read from the environment too.
	// Each of these may instead be in a file named by NAME_FILE
	// (internal/secrets); the password of EnvLedger's and
	// EnvTemporalDB's address may be apart from it, in NAME_PASSWORD or
	// a file named by NAME_PASSWORD_FILE.
)

// Defaults of the settings below.
const (
	DefaultSimulatorAddress = "127.0.0.1:8299"
	// DefaultCodecAddress is the codec server's in dev mode with keys.
	DefaultCodecAddress  = "127.0.0.1:8234"
	DefaultIntakeAddress = "127.0.0.1:8080"
	// DefaultStopTimeout bounds a graceful stop's wait for activities.
	DefaultStopTimeout = 25 * time.Second
	// Off disables an optional listener (UI, simulator, intake).
	Off = "off"
)

// Config is the whole process configuration. Zero values take the
// documented defaults; Validate explains what is wrong.
type Config struct {
	// Dev runs everything in this process: the dev stack (Temporal on
	// SQLite and the web UI), the provider simulator and the ledger on
	// SQLite, all under DataDir.
	Dev bool
	// ServerOnly runs the embedded Temporal server (and its web UI) and
	// nothing else: no worker, no ledger, no intake. On a PostgreSQL
	// TemporalDB, several such processes form one cluster.
	ServerOnly bool
	// UIOnly serves the Temporal web UI (and, when configured, the codec
	// server) for a Temporal that runs elsewhere: UIFrontend.
	UIOnly bool
	// UIFrontend is the frontend a ui-only UI talks to; default the first
	// address of $TEMPORAL_ADDRESS, else 127.0.0.1:7233.
	UIFrontend string
	// UICodecEndpoint is the codec server's URL as the people who use the
	// web UI reach it from their browsers (http://127.0.0.1:8234 when a
	// container publishes it there); default the codec server's own
	// address.
	UICodecEndpoint string
	// TemporalDB is the embedded server's database (dev and server-only
	// modes): a postgres:// DSN, or "" for a SQLite file in DataDir.
	// Default $SMSORCH_TEMPORAL_DB.
	TemporalDB string
	// BroadcastAddress is the IP the other servers of a PostgreSQL
	// cluster reach this one on; default the frontend's host.
	BroadcastAddress string
	// DataDir holds the dev stack's state and, by default, the ledger.
	// Default .smsorch in the working directory.
	DataDir string
	// TemporalTLSCert, TemporalTLSKey and TemporalTLSCA, in dev and
	// server-only modes, make the embedded server speak mutual TLS on
	// every port (devstack.TLS): its certificate and key, and the CA that
	// signed every server's and client's certificate. TemporalTLSServerName
	// is the name clients check; default the certificate's first DNS name.
	TemporalTLSCert, TemporalTLSKey, TemporalTLSCA, TemporalTLSServerName string
	// TemporalTLSAnyClient lets every client certificate of the CA call
	// every API; by default the roles each certificate names (OUs
	// smsorch-worker, -intake, -operator, -admin) decide what it may call.
	TemporalTLSAnyClient bool
	// UIOIDCIssuer, UIOIDCClientID and UIOIDCCallbackURL put the web UI
	// behind an OpenID Connect login (the client secret from
	// SMSORCH_UI_OIDC_CLIENT_SECRET): every person logs in, and acts at
	// Temporal with the roles of their own ID token.
	UIOIDCIssuer, UIOIDCClientID, UIOIDCCallbackURL string
	UIOIDCClientSecret                              logging.Secret
	// TemporalAPIKeysJWKS, in server modes with TLS, also takes clients
	// that present an API key (a JWT signed by a key of this JSON Web Key
	// Set, https://, http:// or file://) instead of a certificate; its
	// issuer and audience, when set, must match (stackspec.APIKeys).
	TemporalAPIKeysJWKS, TemporalAPIKeysIssuer, TemporalAPIKeysAudience string
	// FrontendWithoutTLS lets a server-only frontend listen in plain gRPC
	// on an address other than loopback: only where no one else reaches
	// it (a container network whose port is not published).
	FrontendWithoutTLS bool
	// FrontendAddress and UIAddress are the dev stack's listeners.
	// Defaults 127.0.0.1:7233 and 127.0.0.1:8233; UIAddress "off" has no UI.
	FrontendAddress, UIAddress string
	// SimulatorAddress is where dev mode serves the provider simulator;
	// default 127.0.0.1:8299. "off" uses the configured providers instead.
	SimulatorAddress string
	// Simulator configures the dev-mode simulator; SimFaults are installed
	// into it at start.
	Simulator simulator.Config
	SimFaults simulator.FaultFlag
	// LedgerPath is the ledger: a postgres:// DSN (shared by every worker
	// of a fleet) or a SQLite file (one host); default $SMSORCH_LEDGER,
	// else DataDir/ledger.db.
	LedgerPath string
	// LedgerRetention is how long the ledger keeps the recipient and the
	// text of a settled event (sealed); 0: the namespace's retention.
	LedgerRetention time.Duration
	// IntakeAddress serves the HTTP event intake; default 127.0.0.1:8080,
	// "off" for none.
	IntakeAddress string
	// IntakeSecret, when set, requires an HMAC-SHA256 signature of each
	// intake request body (from SMSORCH_INTAKE_SECRET).
	IntakeSecret logging.Secret
	// IntakePreviousSecret is accepted beside IntakeSecret while senders
	// move to a new one (SMSORCH_INTAKE_SECRET_PREVIOUS).
	IntakePreviousSecret logging.Secret
	// IntakeSenders are named senders, each signing with its own secret
	// and allowed its own event kinds (SMSORCH_INTAKE_SENDERS).
	IntakeSenders []intake.Sender
	// IntakeProxies are the reverse proxies in front of the intake
	// (--intake-behind-proxy): they terminate TLS, so the intake may speak
	// plain HTTP on a non-loopback address, and the client address they
	// add to X-Forwarded-For keys each client's rate. Requests from other
	// non-loopback addresses are refused.
	IntakeProxies []*net.IPNet
	// IntakeTLSCert and IntakeTLSKey, when set, serve the intake over
	// HTTPS with this certificate (PEM files).
	IntakeTLSCert, IntakeTLSKey string
	// IntakeInsecure lets a worker outside dev mode serve an unsigned
	// intake on a loopback address. An unsigned intake on any other
	// address is refused in every mode.
	IntakeInsecure bool
	// IntakeClientRate is each intake client's requests a minute (bursts
	// of a tenth of it), by client address; 0 is intake.DefaultRatePerMinute,
	// negative none (--intake-client-rate off). On a signed intake it counts
	// authenticated requests; the others have intake.UnsignedPerMinute
	// (or this rate if lower).
	IntakeClientRate int

	// Codec seals every payload and failure message the process puts
	// into Temporal (codec.FromEnv); nil sends them in plain text, which
	// outside dev mode needs PlaintextPayloads.
	Codec *codec.Keyring
	// PlaintextPayloads lets a worker outside dev mode run without keys.
	PlaintextPayloads bool
	// AcceptUnsealed lets a worker outside dev mode with keys act on
	// payloads that reach it unsealed: for runs started before
	// encryption was turned on, until they end. Without it such a run
	// fails before it sends, and such a decision is refused.
	AcceptUnsealed bool
	// CodecServerAddress serves the codec server for the web UI: default
	// 127.0.0.1:8234 in dev mode with keys and a token, else "off". It
	// needs CodecToken.
	CodecServerAddress string
	// CodecUIOrigins are the web UI origins (http://ui.internal:8080)
	// whose pages may call the codec server, besides the embedded UI.
	CodecUIOrigins []string
	// CodecServerInContainer lets the codec server's plain HTTP listen on
	// a container's every interface, for a port the host publishes on
	// its loopback only.
	CodecServerInContainer bool
	// HealthAddress serves /healthz and /readyz on loopback (what a
	// container's health check asks with `worker healthcheck URL`);
	// "off" (the default) for none. The intake and the codec server
	// serve them too.
	HealthAddress string
	// CodecToken is the codec server's bearer token (SMSORCH_CODEC_TOKEN).
	CodecToken logging.Secret
	codecErr   error

	// Bird and Sendy are the real providers (ignored while the dev-mode
	// simulator stands in for them). A provider without a base URL is not
	// configured.
	Bird  BirdConfig
	Sendy SendyConfig
	// RateLimits are each provider's requests a minute for the whole
	// fleet (0: none); default DefaultRateLimits. Every worker must give
	// the same: the server enforces the last one a worker sent.
	RateLimits map[provider.Name]int
	// TaskQueuePartitions is the partitions of a task queue on the
	// Temporal server, which the provider queues' rates leave room for
	// (QueueLimits); default DefaultPartitions, 1 in dev mode (the
	// embedded server runs one).
	TaskQueuePartitions int
	// StopTimeout is how long a stopping worker waits for activities in
	// flight (a send whose answer is on its way) to finish and be
	// recorded; default 25 s (compose gives a stop 30 s).
	StopTimeout time.Duration
	// StickyCacheSize, WorkflowPollers and ActivityPollers tune the
	// Temporal workers (Tuning); 0 takes the default.
	StickyCacheSize, WorkflowPollers, ActivityPollers int
	// AttemptTimeout bounds one HTTP attempt; default 15 s.
	AttemptTimeout time.Duration
	// Policies are the per-provider durations; zero fields take
	// activities.DefaultPolicy. AttemptTimeout is copied into them.
	Policies map[provider.Name]activities.Policy

	// MetricsAddress serves Prometheus metrics at /metrics; "off" (the
	// default) for none.
	MetricsAddress string
	// LogFormat is "console" (default in dev) or "json" (default otherwise).
	LogFormat string
	// LogLevel is debug, info (default), warn or error.
	LogLevel string

	envLedger, envTemporalDB string // $SMSORCH_LEDGER and $SMSORCH_TEMPORAL_DB, read by RegisterFlags
	// The passwords of those addresses given apart ($NAME_PASSWORD or
	// its file), put into the address, from the flag or the variable,
	// by WithDefaults.
	ledgerPassword, temporalDBPassword logging.Secret
	// temporalEnv is where the client's TEMPORAL_* settings are read
	// (envconfig); nil for the process's environment. Tests give their
	// own, and so run beside each other.
	temporalEnv envconfig.EnvLookup
	// passwordInFlag names each flag whose database address held a
	// password: every user of the host reads it in ps.
	passwordInFlag       []error
	envErr               error  // a secret's variable or file that could not be read
	envTemporalAddress   string // $TEMPORAL_ADDRESS, for UIFrontend
	envTemporalNamespace string // $TEMPORAL_NAMESPACE
	// $TEMPORAL_TLS_CLIENT_CERT_PATH, _KEY_PATH, _SERVER_CA_CERT_PATH and
	// _SERVER_NAME: how a ui-only UI reaches a Temporal with mutual TLS.
	envTLSCert, envTLSKey, envTLSCA, envTLSServerName string
}

// BirdConfig is Bird's connection; AccessKey comes from BIRD_ACCESS_KEY.
type BirdConfig struct {
	BaseURL, WorkspaceID, ChannelID string
	AccessKey                       logging.Secret
}

// SendyConfig is Sendy's connection; Token comes from SENDY_TOKEN.
type SendyConfig struct {
	BaseURL, Sender string
	Token           logging.Secret
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.DataDir, defaults.DataDir)
	def(&c.FrontendAddress, defaults.FrontendAddress)
	def(&c.UIAddress, defaults.UIAddress)
	def(&c.SimulatorAddress, DefaultSimulatorAddress)
	def(&c.IntakeAddress, DefaultIntakeAddress)
	if c.Dev && c.Codec != nil && c.CodecToken != "" {
		def(&c.CodecServerAddress, DefaultCodecAddress)
	}
	def(&c.CodecServerAddress, Off)
	def(&c.MetricsAddress, Off)
	def(&c.HealthAddress, Off)
	if c.UIOnly {
		first, _, _ := strings.Cut(c.envTemporalAddress, ",")
		def(&c.UIFrontend, strings.TrimSpace(first))
		def(&c.UIFrontend, defaults.FrontendAddress)
	}
	if c.Dev || c.ServerOnly {
		// Only the embedded server reads it: a worker beside one, in the
		// same environment, connects through TEMPORAL_ADDRESS.
		def(&c.TemporalDB, c.envTemporalDB)
		c.TemporalDB = c.joinPassword(c.TemporalDB, &c.temporalDBPassword, EnvTemporalDB)
	}
	def(&c.LedgerPath, c.envLedger)
	c.LedgerPath = c.joinPassword(c.LedgerPath, &c.ledgerPassword, EnvLedger)
	def(&c.LedgerPath, filepath.Join(c.DataDir, "ledger.db"))
	def(&c.Sendy.Sender, "SMS")
	if c.LogFormat == "" {
		c.LogFormat = string(logging.FormatJSON)
		if c.Dev {
			c.LogFormat = string(logging.FormatConsole)
		}
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = activities.DefaultPolicy().AttemptTimeout
	}
	limits := map[provider.Name]int{}
	for _, p := range provider.Names {
		limits[p] = DefaultRateLimits[p]
		if v, ok := c.RateLimits[p]; ok {
			limits[p] = v
		}
	}
	c.RateLimits = limits
	if c.TaskQueuePartitions == 0 {
		c.TaskQueuePartitions = DefaultPartitions
		if c.Dev {
			c.TaskQueuePartitions = 1
		}
	}
	policies := map[provider.Name]activities.Policy{}
	for _, p := range provider.Names {
		pol := c.Policies[p]
		pol.AttemptTimeout = c.AttemptTimeout
		policies[p] = pol.WithDefaults()
	}
	c.Policies = policies
	return c
}

// queueLimits are the provider queues' limits.
func (c Config) queueLimits() QueueLimits {
	return QueueLimits{PerMinute: c.RateLimits, Partitions: c.TaskQueuePartitions}
}

// Tuning is how the process's Temporal workers poll and cache.
func (c Config) Tuning() Tuning {
	return Tuning{StopTimeout: c.StopTimeout, StickyCacheSize: c.StickyCacheSize, WorkflowPollers: c.WorkflowPollers, ActivityPollers: c.ActivityPollers}
}

// Validate reports a broken configuration before anything starts: the
// mode, then what the mode runs (a server-only process checks less, a
// ui-only one its UI, a worker its payloads, ledger, providers, limits
// and intake).
func (c Config) Validate() error {
	if err := c.validateMode(); err != nil {
		return err
	}
	switch {
	case c.ServerOnly:
		// The dev stack checks its own settings.
		return errors.Join(c.envErr, c.validateCodec(), c.validateHealth(), c.validateSecrets(), c.validateTemporalTLS(), c.validateUILogin())
	case c.UIOnly:
		return errors.Join(c.validateUIOnly(), c.envErr, c.validateCodec(), c.validateHealth(), c.validateSecrets(), c.validateUILogin())
	}
	return errors.Join(c.envErr, c.validateCodec(), c.validateHealth(), c.validateSecrets(), c.validateTemporalTLS(), c.validateUILogin(),
		c.validateWorker(), c.Tuning().Validate(), c.validateProviders(), c.validateLimits(), c.validateIntake())
}

// validateMode checks that at most one mode is asked for, and that this
// build has the embedded stack the mode needs.
func (c Config) validateMode() error {
	roles := 0
	for _, on := range []bool{c.Dev, c.ServerOnly, c.UIOnly} {
		if on {
			roles++
		}
	}
	if roles > 1 {
		return errors.New("--dev, --server-only and --ui-only exclude each other: --dev runs everything in one process, --server-only only the Temporal server, --ui-only only the web UI (and the codec server)")
	}
	if roles == 1 && !embeddedBuilt() {
		return errors.New(noEmbedded)
	}
	return nil
}

// validateUIOnly checks what a ui-only process serves and reaches.
func (c Config) validateUIOnly() error {
	var errs []error
	if c.UIAddress == Off {
		errs = append(errs, errors.New("--ui-only serves the web UI: give its address with --ui, like 0.0.0.0:8233 in a container"))
	}
	if _, _, err := net.SplitHostPort(c.UIFrontend); err != nil {
		errs = append(errs, fmt.Errorf("the web UI's Temporal frontend %q is not HOST:PORT: set TEMPORAL_ADDRESS like temporal:7233", c.UIFrontend))
	}
	return errors.Join(errs...)
}

// validateWorker checks a worker's ledger, payloads and embedded server
// settings.
func (c Config) validateWorker() error {
	var errs []error
	if c.LedgerRetention < 0 {
		errs = append(errs, fmt.Errorf("--ledger-retention %s is negative: give how long the ledger keeps a settled event's recipient and text, like 720h, or 0 for the namespace's retention", c.LedgerRetention))
	}
	if !c.Dev && c.Codec == nil && c.codecErr == nil && !c.PlaintextPayloads {
		errs = append(errs, fmt.Errorf("outside dev mode recipients and texts are encrypted before they reach Temporal: set %s (make a key with `smsctl codec-key`) or %s, or pass --plaintext-payloads to keep them in plain text", codec.EnvKeys, codec.EnvKeyFile))
	}
	if c.TemporalDB != "" && !c.Dev {
		errs = append(errs, fmt.Errorf("--temporal-db (or %s) is the embedded Temporal server's database: use it with --dev or --server-only; a worker reaches an existing cluster through TEMPORAL_ADDRESS", EnvTemporalDB))
	}
	return errors.Join(errs...)
}

// validateProviders checks each provider's policy, and that a worker
// outside the simulator has a provider with its secret.
func (c Config) validateProviders() error {
	var errs []error
	for _, p := range provider.Names {
		if err := c.Policies[p].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s policy: %w", p, err))
		}
	}
	if c.simulated() {
		return errors.Join(errs...)
	}
	if c.Bird.BaseURL == "" && c.Sendy.BaseURL == "" {
		errs = append(errs, errors.New("no provider is configured: set --bird-url (with --bird-workspace, --bird-channel and BIRD_ACCESS_KEY) and/or --sendy-url (with SENDY_TOKEN), or run with --dev to use the simulator"))
	}
	if c.Bird.BaseURL != "" && c.Bird.AccessKey == "" {
		errs = append(errs, fmt.Errorf("bird is configured (--bird-url) but %s is empty: set it, or write it into the file %s%s names (secrets/bird-access-key in compose), from your Bird workspace's access keys", EnvBirdAccessKey, EnvBirdAccessKey, secrets.FileSuffix))
	}
	if c.Sendy.BaseURL != "" && c.Sendy.Token == "" {
		errs = append(errs, fmt.Errorf("sendy is configured (--sendy-url) but %s is empty: set it, or write it into the file %s%s names (secrets/sendy-token in compose), from Sendy's API tokens", EnvSendyToken, EnvSendyToken, secrets.FileSuffix))
	}
	return errors.Join(errs...)
}

// validateLimits checks the partitions and that each provider's rate
// limit leaves room on them.
func (c Config) validateLimits() error {
	if c.TaskQueuePartitions < 0 {
		return fmt.Errorf("--task-queue-partitions %d: give the partitions of a task queue on your Temporal server (matching.numTaskqueueReadPartitions, 4 unless set; 1 on the server of this project)", c.TaskQueuePartitions)
	}
	var errs []error
	for _, p := range provider.Names {
		if _, err := c.queueLimits().Rate(p); err != nil {
			errs = append(errs, fmt.Errorf("--%s-rate-limit: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// validateCodec checks the keys and the codec server's settings.
func (c Config) validateCodec() error {
	if c.codecErr != nil {
		return c.codecErr
	}
	if c.CodecServerAddress == Off || c.CodecServerAddress == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.CodecServerAddress)
	if err != nil {
		return fmt.Errorf("--codec-server %q is not HOST:PORT: write it like %s, or off", c.CodecServerAddress, DefaultCodecAddress)
	}
	if !loopback(host) && !c.CodecServerInContainer {
		// Plain HTTP: the token and the decrypted numbers would cross the network.
		return fmt.Errorf("--codec-server %s: the codec server speaks plain HTTP, so it listens on loopback only (127.0.0.1); put a TLS proxy in front of it for other hosts, or, in a container whose port the host publishes on its loopback only, pass --codec-server-in-container", c.CodecServerAddress)
	}
	if c.Codec == nil {
		return fmt.Errorf("--codec-server %s has no keys to decode with: set %s or %s", c.CodecServerAddress, codec.EnvKeys, codec.EnvKeyFile)
	}
	if c.CodecToken == "" {
		return fmt.Errorf("the codec server on %s would decode for anyone: set %s (the web UI's users give it as the codec endpoint http://%s/TOKEN), or --codec-server off", c.CodecServerAddress, codec.EnvToken, c.CodecServerAddress)
	}
	return nil
}

// validateSecrets refuses, outside dev mode, a secret that protects
// nothing: a value the project has published as an example, or one of
// ours (the intake's, the codec server's) shorter than 32 bytes.
func (c Config) validateSecrets() error {
	if c.Dev {
		return nil
	}
	const random = "make one with `openssl rand -hex 32`"
	var errs []error
	for _, s := range []struct {
		name  string
		value logging.Secret
	}{{EnvIntakeSecret, c.IntakeSecret}, {EnvIntakePreviousSecret, c.IntakePreviousSecret}, {codec.EnvToken, c.CodecToken}} {
		if s.value != "" {
			errs = append(errs, secrets.CheckChosen(s.name, s.value.Reveal(), random))
		}
	}
	for _, snd := range c.IntakeSenders {
		if snd.Secret != "" {
			errs = append(errs, secrets.CheckChosen(EnvIntakeSenders+": the sender "+snd.Name+"'s secret", snd.Secret.Reveal(), random))
		}
		if snd.Secret == c.IntakeSecret || snd.Secret == c.IntakePreviousSecret {
			errs = append(errs, fmt.Errorf("%s: the sender %s's secret is also %s or %s, with which anyone who holds it signs for every kind: give the sender a secret of its own", EnvIntakeSenders, snd.Name, EnvIntakeSecret, EnvIntakePreviousSecret))
		}
	}
	if c.UIOIDCClientSecret != "" {
		errs = append(errs, secrets.CheckExample(EnvUIOIDCClientSecret, c.UIOIDCClientSecret.Reveal(), "use the client secret your OpenID Connect provider gave the web UI"))
	}
	if c.Bird.AccessKey != "" {
		errs = append(errs, secrets.CheckExample(EnvBirdAccessKey, c.Bird.AccessKey.Reveal(), "use an access key of your Bird workspace"))
	}
	if c.Sendy.Token != "" {
		errs = append(errs, secrets.CheckExample(EnvSendyToken, c.Sendy.Token.Reveal(), "use the API token Sendy gave you"))
	}
	errs = append(errs, c.passwordInFlag...)
	for name, dsn := range map[string]string{"the ledger's address (" + EnvLedger + ")": c.LedgerPath, "the Temporal database's address (" + EnvTemporalDB + ")": c.TemporalDB} {
		if u, err := url.Parse(dsn); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				errs = append(errs, secrets.CheckExample("the password in "+name, pw, "set the database user's own password (`openssl rand -hex 24`); in compose, in its file of secrets/ (smsctl compose-secrets makes them)"))
			}
		}
	}
	if c.Codec != nil {
		if id := c.Codec.Example(); id != "" {
			errs = append(errs, fmt.Errorf("%s: key %s is a published example, which anyone can read: make your own with `smsctl codec-key` and put it first (keep this one after it only while runs it sealed remain, then remove it)", codec.EnvKeys, id))
		}
	}
	return errors.Join(errs...)
}

// validateHealth keeps the health endpoints on loopback: a container's
// health check runs inside it (`worker healthcheck URL`).
func (c Config) validateHealth() error {
	if c.HealthAddress == Off || c.HealthAddress == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.HealthAddress)
	if err != nil {
		return fmt.Errorf("--health %q is not HOST:PORT: write it like 127.0.0.1:8090, or off", c.HealthAddress)
	}
	if !loopback(host) {
		return fmt.Errorf("--health %s: the health endpoints listen on loopback only (127.0.0.1); a container's health check, or a Kubernetes exec probe, runs `worker healthcheck http://127.0.0.1:PORT/readyz` inside it", c.HealthAddress)
	}
	return nil
}

// noEmbedded explains a role this binary cannot take.
const noEmbedded = "this worker was built without the embedded Temporal server and web UI (-tags nodevstack), so it cannot run --dev, --server-only or --ui-only: " +
	"use the image's smsorch-temporal binary for those roles, or `go run ./worker --dev` from the source"

// validateIntake refuses an intake that anyone who reaches it could use
// to send SMS: unsigned on a non-loopback address in any mode, and
// unsigned outside dev mode unless asked for explicitly.
func (c Config) validateIntake() error {
	if (c.IntakeTLSCert == "") != (c.IntakeTLSKey == "") {
		return errors.New("--intake-tls-cert and --intake-tls-key go together: give both PEM files, or neither for plain HTTP")
	}
	if c.IntakeTLSCert != "" {
		if _, err := tls.LoadX509KeyPair(c.IntakeTLSCert, c.IntakeTLSKey); err != nil {
			return fmt.Errorf("the intake's TLS certificate %s and key %s do not load: %w", c.IntakeTLSCert, c.IntakeTLSKey, err)
		}
	}
	if c.IntakeAddress == Off {
		return nil
	}
	host, _, err := net.SplitHostPort(c.IntakeAddress)
	if err != nil {
		return fmt.Errorf("--intake %q is not HOST:PORT: write it like 127.0.0.1:8080, or off", c.IntakeAddress)
	}
	if c.IntakeSecret == "" && c.IntakePreviousSecret != "" {
		return fmt.Errorf("%s is set without %s: the previous secret is accepted beside a current one; set the new secret in %s", EnvIntakePreviousSecret, EnvIntakeSecret, EnvIntakeSecret)
	}
	if !c.intakeSigned() {
		if !loopback(host) {
			return fmt.Errorf("refusing to serve an unsigned HTTP intake on %s: anyone who can reach it could send SMS. Set %s (callers then sign each body, header X-Smsorch-Signature) or named senders in %s, or listen on 127.0.0.1", c.IntakeAddress, EnvIntakeSecret, EnvIntakeSenders)
		}
		if !c.Dev && !c.IntakeInsecure {
			return fmt.Errorf("outside dev mode the HTTP intake needs %s (callers sign each body): set it, or pass --intake-insecure to accept unsigned requests on %s, or --intake off", EnvIntakeSecret, c.IntakeAddress)
		}
		return nil
	}
	if !loopback(host) && c.IntakeTLSCert == "" && len(c.IntakeProxies) == 0 {
		return fmt.Errorf("refusing to serve the intake in plain HTTP on %s: the signed bodies hold recipients and texts. Give it --intake-tls-cert and --intake-tls-key, or name the TLS proxy in front of it with --intake-behind-proxy=ADDRESS, or listen on 127.0.0.1", c.IntakeAddress)
	}
	return nil
}

// intakeSigned says the intake takes signed requests only: a shared
// secret or named senders are set.
func (c Config) intakeSigned() bool { return c.IntakeSecret != "" || len(c.IntakeSenders) > 0 }

// validateUILogin checks the web UI's OpenID Connect login: all of it
// or none, a provider reached over HTTPS (or on loopback), a UI to put
// it in front of, and, where this process runs the server, a server
// that takes the provider's ID tokens (the API keys' flags).
func (c Config) validateUILogin() error {
	set := 0
	for _, v := range []string{c.UIOIDCIssuer, c.UIOIDCClientID, c.UIOIDCCallbackURL, c.UIOIDCClientSecret.Reveal()} {
		if v != "" {
			set++
		}
	}
	if set == 0 {
		return nil
	}
	if set < 4 {
		return fmt.Errorf("the web UI's login needs --ui-oidc-issuer, --ui-oidc-client-id, --ui-oidc-callback-url and %s together: the provider, the UI's client id and secret there, and the UI's URL with /auth/sso/callback", EnvUIOIDCClientSecret)
	}
	if !c.Dev && !c.ServerOnly && !c.UIOnly || c.UIAddress == Off {
		return errors.New("--ui-oidc-issuer puts the web UI behind a login: use it where the process serves the UI (--dev, --server-only or --ui-only, with --ui)")
	}
	var errs []error
	for name, raw := range map[string]string{"--ui-oidc-issuer": c.UIOIDCIssuer, "--ui-oidc-callback-url": c.UIOIDCCallbackURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) {
			errs = append(errs, fmt.Errorf("%s %q is not an https:// URL (http:// only on loopback): the login's codes and tokens would cross the network in plain", name, raw))
		}
	}
	if u, err := url.Parse(c.UIOIDCCallbackURL); err == nil && u.Path != "/auth/sso/callback" {
		errs = append(errs, fmt.Errorf("--ui-oidc-callback-url %q: the web UI takes the provider's answer at /auth/sso/callback: give its URL as people reach it with that path (and register it at the provider)", c.UIOIDCCallbackURL))
	}
	if (c.Dev || c.ServerOnly) && (c.TemporalAPIKeysJWKS == "" || strings.TrimSuffix(c.TemporalAPIKeysIssuer, "/") != strings.TrimSuffix(c.UIOIDCIssuer, "/") || c.TemporalAPIKeysAudience != c.UIOIDCClientID) {
		errs = append(errs, fmt.Errorf("the web UI's login sends each person's ID token to this Temporal, which must take it: set --temporal-api-keys-jwks to the provider's key set, --temporal-api-keys-issuer %s and --temporal-api-keys-audience %s (with the server's TLS)", c.UIOIDCIssuer, c.UIOIDCClientID))
	}
	if c.UIOnly && (c.envTLSCert == "" || c.envTLSKey == "" || c.envTLSCA == "") {
		errs = append(errs, errors.New("the web UI's login sends each person's ID token to Temporal, which takes it only over TLS and checks its roles only with mutual TLS on: set TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH and TEMPORAL_TLS_SERVER_CA_CERT_PATH"))
	}
	return errors.Join(errs...)
}

// validateTemporalTLS checks the embedded server's mutual TLS settings
// (the dev stack checks the files at start), and refuses a server-only
// frontend that anyone on the network could call.
func (c Config) validateTemporalTLS() error {
	given := 0
	for _, v := range []string{c.TemporalTLSCert, c.TemporalTLSKey, c.TemporalTLSCA} {
		if v != "" {
			given++
		}
	}
	if given > 0 && !c.Dev && !c.ServerOnly {
		return errors.New("--temporal-tls-cert, --temporal-tls-key and --temporal-tls-ca are the embedded Temporal server's (--dev, --server-only): a worker or the web UI reaches a Temporal with mutual TLS through TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH and TEMPORAL_TLS_SERVER_CA_CERT_PATH")
	}
	if given > 0 && given < 3 {
		return errors.New("--temporal-tls-cert, --temporal-tls-key and --temporal-tls-ca go together: the server's certificate and key, and the CA that signed the certificates of the servers and of their clients")
	}
	if c.TemporalTLSServerName != "" && given == 0 {
		return errors.New("--temporal-tls-server-name names the server in its TLS certificate: use it with --temporal-tls-cert, --temporal-tls-key and --temporal-tls-ca")
	}
	if (c.TemporalAPIKeysJWKS != "" || c.TemporalAPIKeysIssuer != "" || c.TemporalAPIKeysAudience != "") && (given == 0 || c.TemporalTLSAnyClient || c.TemporalAPIKeysJWKS == "" || c.TemporalAPIKeysIssuer == "" || c.TemporalAPIKeysAudience == "") {
		return errors.New("--temporal-api-keys-jwks, --temporal-api-keys-issuer and --temporal-api-keys-audience let clients present an API key instead of a certificate: give all three (the JWKS URL that holds the keys' signing keys, and the issuer and audience every key must name, so that a key made for another application does not open this Temporal), with the server's TLS (--temporal-tls-cert, --temporal-tls-key and --temporal-tls-ca, without --temporal-tls-any-client), so that a key never travels in plain")
	}
	if c.TemporalTLSAnyClient && given == 0 {
		return errors.New("--temporal-tls-any-client turns off the roles that client certificates name, and without mutual TLS (--temporal-tls-cert, --temporal-tls-key and --temporal-tls-ca) no client has a certificate: give the TLS flags, or leave it out")
	}
	if !c.ServerOnly || given > 0 || c.FrontendWithoutTLS {
		return nil
	}
	host, _, err := net.SplitHostPort(c.FrontendAddress)
	if err != nil || loopback(host) {
		return nil // the dev stack explains a malformed address
	}
	return fmt.Errorf("refusing to serve the Temporal frontend in plain gRPC on %s: whoever reaches it could list, cancel and terminate runs and read their histories. Give it mutual TLS with --temporal-tls-cert, --temporal-tls-key and --temporal-tls-ca (the workers then set TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH and TEMPORAL_TLS_SERVER_CA_CERT_PATH), or listen on 127.0.0.1, or pass --frontend-without-tls where only a private network reaches it (a container network whose port is not published)", c.FrontendAddress)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// simulated reports whether the simulator stands in for both providers.
func (c Config) simulated() bool { return c.Dev && c.SimulatorAddress != Off }

// RegisterFlags binds the configuration to flags and reads the secrets
// from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Dev, "dev", false, "run everything in this process: Temporal with the web UI, the provider simulator and the ledger, under --data-dir")
	fs.BoolVar(&c.ServerOnly, "server-only", false, "run only the embedded Temporal server (and web UI unless --ui off); on a postgres:// --temporal-db, several such processes are one cluster")
	fs.BoolVar(&c.UIOnly, "ui-only", false, "serve only the Temporal web UI (--ui) for the Temporal at $TEMPORAL_ADDRESS, and the codec server when --codec-server is given")
	fs.StringVar(&c.UICodecEndpoint, "ui-codec-endpoint", "", "the codec server's URL as the web UI's users reach it from their browsers (default the codec server's own address)")
	fs.BoolVar(&c.CodecServerInContainer, "codec-server-in-container", false, "let the codec server's plain HTTP listen on every interface of a container whose port the host publishes on its loopback only")
	fs.StringVar(&c.HealthAddress, "health", Off, `serve /healthz and /readyz on this loopback address (for `+"`worker healthcheck URL`"+`), or "off"; the intake and the codec server serve them too`)
	c.dsnFlag(fs, &c.TemporalDB, "temporal-db", EnvTemporalDB, "the embedded Temporal server's database (--dev, --server-only): postgres://user@host/db (db and db"+defaults.VisibilitySuffix+", created and migrated at start); default $"+EnvTemporalDB+", else a SQLite file in --data-dir")
	fs.StringVar(&c.BroadcastAddress, "broadcast-address", "", "with a postgres:// --temporal-db: the IP the other servers of the cluster reach this one on (default the --frontend host)")
	fs.StringVar(&c.DataDir, "data-dir", defaults.DataDir, "dev-mode state directory (Temporal's SQLite file, the ledger)")
	fs.StringVar(&c.FrontendAddress, "frontend", defaults.FrontendAddress, "dev and server-only modes: the Temporal frontend address")
	fs.StringVar(&c.TemporalTLSCert, "temporal-tls-cert", "", "dev and server-only modes: serve every port of the Temporal server with mutual TLS, with this certificate (PEM; serverAuth and clientAuth; with --temporal-tls-key and --temporal-tls-ca)")
	fs.StringVar(&c.TemporalTLSKey, "temporal-tls-key", "", "the private key of --temporal-tls-cert (PEM)")
	fs.StringVar(&c.TemporalTLSCA, "temporal-tls-ca", "", "the CA certificate (PEM) that signed the certificates of the servers and of every client: a client without one is refused")
	fs.StringVar(&c.TemporalTLSServerName, "temporal-tls-server-name", "", "the name clients check in the servers' certificate (default its first DNS name)")
	fs.StringVar(&c.UIOIDCIssuer, "ui-oidc-issuer", "", "put the web UI behind a login at this OpenID Connect provider (its issuer URL; with --ui-oidc-client-id, --ui-oidc-callback-url and "+EnvUIOIDCClientSecret+"): its API answers 401 without a session, and each person acts at Temporal with the roles of their own ID token (docs/security.md)")
	fs.StringVar(&c.UIOIDCClientID, "ui-oidc-client-id", "", "the web UI's client id at the OpenID Connect provider")
	fs.StringVar(&c.UIOIDCCallbackURL, "ui-oidc-callback-url", "", "where the provider sends the browser back: the web UI's URL as people reach it, with /auth/sso/callback")
	fs.StringVar(&c.TemporalAPIKeysJWKS, "temporal-api-keys-jwks", "", "dev and server-only modes with TLS: also take clients that present an API key (TEMPORAL_API_KEY: a JWT with sub, exp and the roles in \"smsorch_roles\") signed by a key of the JSON Web Key Set at this https://, file:// or loopback http:// URL (docs/security.md)")
	fs.StringVar(&c.TemporalAPIKeysIssuer, "temporal-api-keys-issuer", "", "with --temporal-api-keys-jwks: the issuer (iss) every API key must name")
	fs.StringVar(&c.TemporalAPIKeysAudience, "temporal-api-keys-audience", "", "with --temporal-api-keys-jwks: the audience (aud) every API key must name")
	fs.BoolVar(&c.TemporalTLSAnyClient, "temporal-tls-any-client", false, "with mutual TLS, let every client certificate of the CA call every API; by default the roles a certificate names as OUs (smsorch-worker, smsorch-intake, smsorch-operator, smsorch-admin) decide what it may call, and the servers' own certificate is the admin (docs/security.md)")
	fs.BoolVar(&c.FrontendWithoutTLS, "frontend-without-tls", false, "server-only mode: let the frontend listen in plain gRPC on an address other than loopback, where only a private network reaches it (a container network whose port is not published)")
	fs.StringVar(&c.UIAddress, "ui", defaults.UIAddress, `dev, server-only and ui-only modes: the Temporal web UI address, or "off"`)
	fs.StringVar(&c.SimulatorAddress, "simulator", DefaultSimulatorAddress, `dev mode: the provider simulator address, or "off" to use the configured providers`)
	c.dsnFlag(fs, &c.LedgerPath, "ledger", EnvLedger, "the ledger: postgres://user@host/db (shared by a fleet of workers) or a SQLite file (one host); default $"+EnvLedger+", else <data-dir>/ledger.db")
	fs.DurationVar(&c.LedgerRetention, "ledger-retention", 0, "how long the ledger keeps the recipient and text of a settled event (sealed with the payload keys); 0: as long as the namespace keeps its runs (30 days by default). Keys, message ids, times and outcomes stay for the audit")
	fs.StringVar(&c.IntakeAddress, "intake", DefaultIntakeAddress, `the HTTP event intake address, or "off"; unsigned (no `+EnvIntakeSecret+`) only on loopback, and outside dev mode only with --intake-insecure`)
	fs.BoolVar(&c.AcceptUnsealed, "accept-unsealed", false, "outside dev mode, act on runs and decisions that reach the worker unsealed (started before "+codec.EnvKeys+" was set): give it to every worker until those runs end; without it they fail before sending")
	fs.BoolVar(&c.PlaintextPayloads, "plaintext-payloads", false, "outside dev mode, run without "+codec.EnvKeys+": recipients and texts then stand in plain text in Temporal")
	fs.Func("codec-ui-origin", "a web UI origin (http://host:port) where people open the UI: the UI answers for its host, and its pages may call the codec server (repeat for more; the UI's own address is always allowed)", func(v string) error {
		if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			return fmt.Errorf("write an origin like https://temporal-ui.internal")
		}
		c.CodecUIOrigins = append(c.CodecUIOrigins, strings.TrimSuffix(v, "/"))
		return nil
	})
	fs.StringVar(&c.CodecServerAddress, "codec-server", "", `the codec server for the web UI (token from `+codec.EnvToken+`), or "off"; default `+DefaultCodecAddress+` in dev mode with keys and a token, else off`)
	fs.StringVar(&c.IntakeTLSCert, "intake-tls-cert", "", "serve the intake over HTTPS with this certificate (PEM; with --intake-tls-key)")
	fs.StringVar(&c.IntakeTLSKey, "intake-tls-key", "", "the private key of --intake-tls-cert (PEM)")
	fs.BoolVar(&c.IntakeInsecure, "intake-insecure", false, "outside dev mode, accept unsigned intake requests on a loopback address")
	fs.Func("intake-client-rate", fmt.Sprintf(`requests a minute each intake client may make, by client address (bursts of a tenth of it; past it 429 with Retry-After), or "off" for no limit (default %d); with a secret set it counts signed requests, and the others get %d a minute of their own`, intake.DefaultRatePerMinute, intake.UnsignedPerMinute), func(v string) error {
		if v == Off {
			c.IntakeClientRate = -1
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("write a number of requests a minute, like %d, or off", intake.DefaultRatePerMinute)
		}
		c.IntakeClientRate = n
		return nil
	})
	fs.Func("intake-behind-proxy", "the address (IP or CIDR, comma-separated) of the TLS proxy in front of the intake: the intake may then speak plain HTTP on a non-loopback address, keys each client by the address the proxy adds to X-Forwarded-For, and refuses requests that come around the proxy", func(v string) error {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if !strings.Contains(part, "/") {
				ip := net.ParseIP(part)
				if ip == nil {
					return fmt.Errorf("%q is not an IP address or a CIDR like 10.0.0.0/8", part)
				}
				bits := 32
				if ip.To4() == nil {
					bits = 128
				}
				part = fmt.Sprintf("%s/%d", part, bits)
			}
			_, n, err := net.ParseCIDR(part)
			if err != nil {
				return fmt.Errorf("%q is not an IP address or a CIDR like 10.0.0.0/8", part)
			}
			c.IntakeProxies = append(c.IntakeProxies, n)
		}
		return nil
	})
	fs.StringVar(&c.Bird.BaseURL, "bird-url", "", "Bird's API base URL, e.g. https://api.bird.com (access key from "+EnvBirdAccessKey+")")
	fs.StringVar(&c.Bird.WorkspaceID, "bird-workspace", "", "Bird workspace id")
	fs.StringVar(&c.Bird.ChannelID, "bird-channel", "", "Bird SMS channel id")
	fs.StringVar(&c.Sendy.BaseURL, "sendy-url", "", "Sendy's API base URL (token from "+EnvSendyToken+")")
	fs.StringVar(&c.Sendy.Sender, "sendy-sender", "SMS", "Sendy's default sender name")
	c.RateLimits = map[provider.Name]int{}
	for _, p := range provider.Names {
		fs.Func(string(p)+"-rate-limit", fmt.Sprintf("%s's requests a minute for the whole fleet of workers, sends and lookups together; 0 for none (default %d)", p, DefaultRateLimits[p]), func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return fmt.Errorf("write a whole number of requests a minute, like 60, or 0 for no limit")
			}
			c.RateLimits[p] = n
			return nil
		})
	}
	fs.IntVar(&c.TaskQueuePartitions, "task-queue-partitions", 0, fmt.Sprintf("partitions of a task queue on the Temporal server (matching.numTaskqueueReadPartitions): the providers' rate limits leave room for each one's burst (default %d; 1 in dev mode and on this project's server, as docker-compose.yml runs it)", DefaultPartitions))
	fs.DurationVar(&c.StopTimeout, "stop-timeout", DefaultStopTimeout, "on SIGTERM, how long to wait for sends in flight to finish and be recorded (a second signal exits at once)")
	fs.IntVar(&c.StickyCacheSize, "sticky-cache", DefaultStickyCacheSize, "runs kept in memory between their workflow tasks (about 85 KB each); a run that left the cache replays its history at its next task")
	fs.IntVar(&c.WorkflowPollers, "workflow-pollers", 0, "long polls per workflow task queue (0: the SDK's 2)")
	fs.IntVar(&c.ActivityPollers, "activity-pollers", 0, "long polls per activity task queue (0: the SDK's 2)")
	fs.DurationVar(&c.AttemptTimeout, "attempt-timeout", activities.DefaultPolicy().AttemptTimeout, "bound of one HTTP attempt to a provider")
	fs.StringVar(&c.MetricsAddress, "metrics", Off, `serve Prometheus metrics (the SDK's and smsorch_*) at http://ADDRESS/metrics, or "off"`)
	fs.StringVar(&c.LogFormat, "log-format", "", "console or json (default console in dev mode, json otherwise)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	c.Policies = map[provider.Name]activities.Policy{}
	// durationFlag sets one policy duration for the given providers.
	durationFlag := func(name, usage string, def time.Duration, set func(*activities.Policy, time.Duration), targets ...provider.Name) {
		fs.Func(name, fmt.Sprintf("%s (default %s)", usage, def), func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("write a duration like 3h or 90s: %w", err)
			}
			for _, p := range targets {
				pol := c.Policies[p]
				set(&pol, d)
				c.Policies[p] = pol
			}
			return nil
		})
	}
	def := activities.DefaultPolicy()
	durationFlag("bird-replay-window", "how long Bird keeps answers for replay", def.ReplayWindow,
		func(p *activities.Policy, d time.Duration) { p.ReplayWindow = d }, provider.Bird)
	durationFlag("sendy-replay-window", "how long Sendy keeps answers for replay (unpublished: a setting)", def.ReplayWindow,
		func(p *activities.Policy, d time.Duration) { p.ReplayWindow = d }, provider.Sendy)
	durationFlag("window-margin", "retries of a key stop this long before its replay window closes", def.WindowMargin,
		func(p *activities.Policy, d time.Duration) { p.WindowMargin = d }, provider.Names...)
	durationFlag("tracking-limit", "how long delivery is followed after acceptance", def.TrackingLimit,
		func(p *activities.Policy, d time.Duration) { p.TrackingLimit = d }, provider.Names...)
	durationFlag("decision-deadline", "how long a run awaits a resend or cancel decision", def.DecisionDeadline,
		func(p *activities.Policy, d time.Duration) { p.DecisionDeadline = d }, provider.Names...)
	durationFlag("late-effect-horizon", "how long an attempt without a certain answer may still take effect at the provider (lock lifetime plus attempt timeout, with margin); the run looks for a second message again after it", def.LateEffectHorizon,
		func(p *activities.Policy, d time.Duration) { p.LateEffectHorizon = d }, provider.Names...)
	durationFlag("reconcile-retry", "how often a run awaiting a decision retries a search of the provider's records that failed", def.ReconcileRetry,
		func(p *activities.Policy, d time.Duration) { p.ReconcileRetry = d }, provider.Names...)
	durationFlag("status-poll", "the first wait between delivery-status lookups (it doubles up to 10m)", def.StatusPollInitial,
		func(p *activities.Policy, d time.Duration) { p.StatusPollInitial = d }, provider.Names...)
	c.Simulator.RegisterFlags(fs, "sim-", &c.SimFaults)
	c.ReadEnv(os.Getenv)
}

// dsnFlag registers a flag that takes a database address. Outside dev
// mode an address with a password is refused (validateSecrets): a
// command line is readable by every user of the host (ps,
// /proc/PID/cmdline), so the password goes in env or in a file named by
// env_FILE.
func (c *Config) dsnFlag(fs *flag.FlagSet, dst *string, name, env, usage string) {
	fs.Func(name, usage, func(v string) error {
		*dst = v
		if u, err := url.Parse(v); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				c.passwordInFlag = append(c.passwordInFlag, fmt.Errorf("--%s holds a password, which every user of this host can read in the process list: give the address in %s, or in a file named by %s_FILE, and leave --%s out", name, env, env, name))
			}
		}
		return nil
	})
}

// joinPassword puts the password given apart (*pw) into the database
// address dsn, once; an address that cannot take it is an error of
// Validate's.
func (c *Config) joinPassword(dsn string, pw *logging.Secret, env string) string {
	if *pw == "" {
		return dsn
	}
	joined, err := secrets.WithPassword(dsn, pw.Reveal(), env)
	*pw = ""
	if err != nil {
		c.envErr = errors.Join(c.envErr, err)
		return dsn
	}
	return joined
}

// ReadEnv reads the secrets and addresses that come from the
// environment: each secret NAME from NAME or the file named by
// NAME_FILE.
func (c *Config) ReadEnv(getenv func(string) string) {
	var errs []error
	get := func(name string) string {
		v, err := secrets.Get(getenv, name)
		errs = append(errs, err)
		return v
	}
	// What a deployment may leave out: an empty file is then the secret
	// not given (a compose file mounts one for each, and a provider left
	// empty is refused below only where its URL is set).
	optional := func(name string) string {
		v, err := secrets.Optional(getenv, name)
		errs = append(errs, err)
		return v
	}
	// A database address, and its password apart (put into it by
	// WithDefaults, whether the address comes from a flag or from env).
	dsn := func(name string, pw *logging.Secret) string {
		*pw = logging.Secret(get(name + secrets.PasswordSuffix))
		return get(name)
	}
	c.Bird.AccessKey = logging.Secret(optional(EnvBirdAccessKey))
	c.Sendy.Token = logging.Secret(optional(EnvSendyToken))
	c.IntakeSecret = logging.Secret(get(EnvIntakeSecret))
	c.IntakePreviousSecret = logging.Secret(optional(EnvIntakePreviousSecret))
	c.UIOIDCClientSecret = logging.Secret(optional(EnvUIOIDCClientSecret))
	var err error
	if c.IntakeSenders, err = intake.ParseSenders(optional(EnvIntakeSenders)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvIntakeSenders, err))
	}
	c.envLedger = dsn(EnvLedger, &c.ledgerPassword)
	c.Codec, c.codecErr = codec.FromEnv(getenv)
	c.CodecToken = logging.Secret(get(codec.EnvToken))
	c.envTemporalDB = dsn(EnvTemporalDB, &c.temporalDBPassword)
	c.envErr = errors.Join(errs...)
	c.envTemporalAddress = getenv("TEMPORAL_ADDRESS")
	c.envTemporalNamespace = getenv("TEMPORAL_NAMESPACE")
	c.envTLSCert, c.envTLSKey = getenv("TEMPORAL_TLS_CLIENT_CERT_PATH"), getenv("TEMPORAL_TLS_CLIENT_KEY_PATH")
	c.envTLSCA, c.envTLSServerName = getenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH"), getenv("TEMPORAL_TLS_SERVER_NAME")
}

// temporalEnvironment is where the Temporal client's settings are read.
func (c Config) temporalEnvironment() envconfig.EnvLookup {
	if c.temporalEnv != nil {
		return c.temporalEnv
	}
	return envconfig.EnvLookupOS
}
