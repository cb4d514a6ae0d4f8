// Package clientopts builds the Temporal client options of every program
// of this module (the worker, smsctl, the drill, the benchmark) in one
// place: the connection settings the temporal CLI reads, the list of
// frontends, the namespace default, the SDK's logger, the payload codec,
// the metrics handler and the tracing interceptor.
package clientopts

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/frontends"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/tracing"
)

// Settings say how a program reaches Temporal.
type Settings struct {
	// Env, when set, is read the way the temporal CLI reads the
	// environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
	// TEMPORAL_TLS_*, TEMPORAL_PROFILE (the SDK's envconfig). Use
	// envconfig.EnvLookupOS for the process's own environment. Nil reads
	// nothing: a program that runs its own server (dev mode, a drill)
	// says where it is with Address.
	Env envconfig.EnvLookup
	// Address overrides the environment's: host:port, or a
	// comma-separated list of frontends, which the client balances over.
	Address string
	// DefaultAddress is used when neither Env nor Address gives one.
	DefaultAddress string
	// Namespace overrides the environment's; the default is "default".
	Namespace string
	// Logger receives the SDK's log lines (phone numbers masked); nil
	// drops them.
	Logger *zap.Logger
	// Codec seals the payloads the client sends and opens those it
	// receives; nil leaves them as they are.
	Codec *codec.Keyring
	// RefuseUnsealed, with a Codec, refuses to decode a payload that
	// arrives unsealed (codec.ApplyRefusingUnsealed): a worker outside
	// dev mode acts only on what holders of its keys sent.
	RefuseUnsealed bool
	// Metrics receives the SDK's metrics; nil drops them.
	Metrics client.MetricsHandler
	// TLS, when set, replaces the environment's TLS settings: a program
	// that runs its own server with mutual TLS presents its certificate.
	TLS *tls.Config
}

// Build returns the client options for s.
func Build(s Settings) (client.Options, error) {
	var opts client.Options
	if s.Env != nil {
		var err error
		opts, err = envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: s.Env})
		if err != nil {
			return opts, fmt.Errorf("read the Temporal connection settings (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, or a TEMPORAL_PROFILE): %w", err)
		}
		if err := apiKeyFile(s.Env, &opts); err != nil {
			return opts, err
		}
		if err := reloadClientCert(s.Env, &opts); err != nil {
			return opts, err
		}
	}
	if s.Address != "" {
		opts.HostPort = s.Address
	}
	if opts.HostPort == "" {
		opts.HostPort = s.DefaultAddress
	}
	if s.Namespace != "" {
		opts.Namespace = s.Namespace
	}
	if s.TLS != nil {
		opts.ConnectionOptions.TLS = s.TLS
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	logger := s.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	opts.Logger = logging.SDK(logger)
	if s.Metrics != nil {
		opts.MetricsHandler = s.Metrics
	}
	// Starts, signals and updates carry the caller's trace to the
	// workflow and its activities (the SDK's OpenTelemetry interceptor,
	// which workers made from this client use too).
	tracer, err := tracing.TemporalInterceptor()
	if err != nil {
		return opts, err
	}
	opts.Interceptors = append(opts.Interceptors, tracer)
	if err := frontends.Apply(&opts); err != nil {
		return opts, err
	}
	apply := s.Codec.Apply
	if s.RefuseUnsealed {
		apply = s.Codec.ApplyRefusingUnsealed
	}
	if err := apply(&opts); err != nil {
		return opts, err
	}
	return opts, nil
}

// EnvAPIKeyFile names a file that holds the API key, as a Kubernetes
// Secret mounts it: read at every call, so a rotated key is used
// without a restart.
const EnvAPIKeyFile = "TEMPORAL_API_KEY_FILE"

// apiKeyFile applies TEMPORAL_API_KEY_FILE: the key is read now, so that
// a missing or empty file stops the program at start, and again at
// every call.
func apiKeyFile(env envconfig.EnvLookup, opts *client.Options) error {
	path, ok := env.LookupEnv(EnvAPIKeyFile)
	if !ok || path == "" {
		return nil
	}
	if v, ok := env.LookupEnv("TEMPORAL_API_KEY"); ok && v != "" {
		return fmt.Errorf("both TEMPORAL_API_KEY and %s are set: give the API key one way", EnvAPIKeyFile)
	}
	read := func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%s: read the API key: %w", EnvAPIKeyFile, err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" {
			return "", fmt.Errorf("%s names %s, which is empty: write the API key into it", EnvAPIKeyFile, path)
		}
		return key, nil
	}
	if _, err := read(); err != nil {
		return err
	}
	opts.Credentials = client.NewAPIKeyDynamicCredentials(func(context.Context) (string, error) { return read() })
	if opts.ConnectionOptions.TLS == nil && !opts.ConnectionOptions.TLSDisabled {
		// As envconfig does for TEMPORAL_API_KEY: a key goes over TLS.
		opts.ConnectionOptions.TLS = &tls.Config{}
	}
	return nil
}

// reloadClientCert presents the client certificate of
// TEMPORAL_TLS_CLIENT_CERT_PATH and _KEY_PATH as the files hold it at
// each new connection, so that a certificate renewed in place (a
// mounted Kubernetes Secret) is used without a restart.
func reloadClientCert(env envconfig.EnvLookup, opts *client.Options) error {
	cert, _ := env.LookupEnv("TEMPORAL_TLS_CLIENT_CERT_PATH")
	key, _ := env.LookupEnv("TEMPORAL_TLS_CLIENT_KEY_PATH")
	if cert == "" || key == "" || opts.ConnectionOptions.TLS == nil {
		return nil
	}
	r, err := pki.NewReloader(cert, key)
	if err != nil {
		return fmt.Errorf("TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH: %w", err)
	}
	conf := opts.ConnectionOptions.TLS.Clone()
	conf.Certificates = nil
	conf.GetClientCertificate = r.GetClientCertificate
	opts.ConnectionOptions.TLS = conf
	return nil
}
