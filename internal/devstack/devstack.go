//go:build !race

// Package devstack runs a complete Temporal service inside the current
// process: the server and the Temporal web UI, the way the Temporal CLI's
// dev server does. It is the embedded default that lets one command bring
// up everything on a machine with nothing else installed.
//
// By default state lives in a SQLite file in Config.DataDir; starting
// again on the same directory keeps every workflow and its history. With
// Config.Database set to a PostgreSQL DSN the server keeps its state
// there instead, creates or upgrades the schema on start, and finds the
// other servers on the same database through it: several processes, on
// one host or many, are then one Temporal cluster that survives the loss
// of any of them.
//
// Its files build without the race detector only: the server is
// third-party code (the first `go test -race ./...` on a fresh clone
// measured 977 s while the tests compiled it with -race, 731 s after). A worker built with -race runs the same stack
// in a child process built without it (package stackproc), and this
// package's tests run without -race from race_test.go.
package devstack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/freeport"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/stackspec"
)

// Defaults, chosen to match the Temporal CLI's dev server so its habits and
// docs carry over.
const (
	DefaultFrontendAddress = defaults.FrontendAddress
	DefaultUIAddress       = defaults.UIAddress
	DefaultDataDir         = defaults.DataDir
	DefaultNamespace       = defaults.Namespace
	// DefaultRetention keeps closed runs, and with them the workflow-id
	// duplicate check, for 30 days.
	DefaultRetention = 30 * 24 * time.Hour
	// MinRetention is the shortest retention accepted: shorter would let a
	// redelivered event start a second run within a month.
	MinRetention = 30 * 24 * time.Hour
	// UIOff as Config.UIAddress starts no UI.
	UIOff = defaults.Off
)

// Config configures Start. Zero fields take the documented defaults.
type Config struct {
	// FrontendAddress is the host:port the Temporal frontend (gRPC) listens
	// on. Default 127.0.0.1:7233. Port 0 picks a free port.
	FrontendAddress string
	// UIAddress is the host:port of the Temporal web UI. Default
	// 127.0.0.1:8233. Port 0 picks a free port; "off" starts no UI.
	UIAddress string
	// DataDir holds temporal.db, the server's SQLite file. Default .smsorch
	// in the working directory. It is created if missing. Unused when
	// Database is set.
	DataDir string
	// Database, when set, is a PostgreSQL DSN (postgres://user@host/db):
	// persistence in db, visibility in db_visibility, both created and
	// brought to the server's schema at start. Every server started on the
	// same database joins the same cluster.
	Database string
	// BroadcastAddress is the IP other servers of the cluster reach this
	// one on (Postgres only). Default the frontend's host, which must then
	// be an IP other than 0.0.0.0.
	BroadcastAddress string
	// Namespace is registered at start. Default "default".
	Namespace string
	// Retention of closed runs in Namespace. Default and minimum 30 days.
	// An existing namespace with a shorter retention is raised to it.
	Retention time.Duration
	// SearchAttributes are the custom search attributes registered in
	// Namespace at start (missing ones are added on every start).
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's lines at ServerLogLevel and above. Default: no logging.
	Logger *zap.Logger
	// CodecEndpoint, when set, is the codec server the web UI asks to
	// decode payloads (the browser calls it; see package codec).
	CodecEndpoint string
	// ServerLogLevel filters the server's own, chatty log: debug, info,
	// warn (default) or error.
	ServerLogLevel string
	// TLS, when set, makes every port of the server speak mutual TLS.
	TLS *TLS
	// APIKeys, when set (with TLS), also takes clients that present an
	// API key instead of a certificate (stackspec.APIKeys).
	APIKeys *stackspec.APIKeys
	// UILogin puts the web UI behind an OpenID Connect login.
	UILogin *stackspec.UILogin
	// UIHosts are the host:port the web UI answers for besides its own
	// address and loopback names (a request for another Host gets 421).
	UIHosts []string
}

func (c Config) withDefaults() Config {
	if c.FrontendAddress == "" {
		c.FrontendAddress = DefaultFrontendAddress
	}
	if c.UIAddress == "" {
		c.UIAddress = DefaultUIAddress
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.ServerLogLevel == "" {
		c.ServerLogLevel = "warn"
	}
	return c
}

func (c Config) validate() error {
	if _, _, err := net.SplitHostPort(c.FrontendAddress); err != nil {
		return fmt.Errorf("frontend address %q is not host:port (for example %s): %w", c.FrontendAddress, DefaultFrontendAddress, err)
	}
	if c.UIAddress != UIOff {
		if _, _, err := net.SplitHostPort(c.UIAddress); err != nil {
			return fmt.Errorf("UI address %q is not host:port (for example %s) or %q: %w", c.UIAddress, DefaultUIAddress, UIOff, err)
		}
	}
	if _, err := zapcore.ParseLevel(c.ServerLogLevel); err != nil {
		return fmt.Errorf("server log level %q is not known: use debug, info, warn or error", c.ServerLogLevel)
	}
	if k := c.APIKeys; k != nil {
		if c.TLS == nil || c.TLS.AnyClient {
			return errors.New("API keys need TLS with the roles on (an API key in plain gRPC could be read on the way): give the server's certificate, key and CA, without --temporal-tls-any-client")
		}
		if err := checkJWKSURI(k.JWKS); err != nil {
			return err
		}
		if k.Issuer == "" || k.Audience == "" {
			return errors.New("API keys need the issuer and the audience they must name (--temporal-api-keys-issuer, --temporal-api-keys-audience): a key your identity provider made for another application must not open this Temporal")
		}
	}
	if c.Database != "" {
		if !IsPostgres(c.Database) {
			return fmt.Errorf("the Temporal database %s is not a postgres:// DSN: give postgres://user@host:5432/temporal, or leave it empty for a SQLite file in the data directory", logging.RedactDSN(c.Database))
		}
		if _, err := parsePostgres(c.Database); err != nil {
			return err
		}
		if _, err := c.broadcast(); err != nil {
			return err
		}
	}
	if c.Retention < MinRetention {
		return fmt.Errorf("namespace retention %s is shorter than %s: the workflow-id duplicate check only sees closed runs within retention; set at least %s",
			c.Retention, MinRetention, MinRetention)
	}
	return nil
}

// broadcast is the IP the other servers of the cluster reach this one
// on: BroadcastAddress; else the frontend's host; else, when the frontend
// listens on every interface (0.0.0.0, as in a container), the address
// this host's name resolves to, which is the container's own in Docker.
func (c Config) broadcast() (string, error) {
	addr := c.BroadcastAddress
	if addr == "" {
		addr, _, _ = net.SplitHostPort(c.FrontendAddress)
		if ip := net.ParseIP(addr); addr == "" || ip != nil && ip.IsUnspecified() {
			return hostIP()
		}
	}
	ip := net.ParseIP(addr)
	if ip == nil || ip.IsUnspecified() {
		return "", fmt.Errorf("the other Temporal servers on the database need an IP address to reach this one, and %q is not one: set the broadcast address (an IP of this host), or listen on a specific IP", addr)
	}
	return addr, nil
}

// hostAddrs is this host's name and the addresses it resolves to.
var hostAddrs = func() (string, []net.IP, error) {
	name, err := os.Hostname()
	if err != nil {
		return "", nil, err
	}
	ips, err := net.LookupIP(name)
	return name, ips, err
}

// hostIP is the first address other than loopback that this host's name
// resolves to.
func hostIP() (string, error) {
	name, ips, err := hostAddrs()
	if err != nil {
		return "", fmt.Errorf("the frontend listens on every interface, so the other Temporal servers reach this one on the address of its host name %q, which does not resolve (%w): set the broadcast address (an IP of this host)", name, err)
	}
	var v6 string
	for _, ip := range ips {
		switch {
		case ip.IsLoopback() || ip.IsUnspecified():
		case ip.To4() != nil:
			return ip.String(), nil
		case v6 == "":
			v6 = ip.String()
		}
	}
	if v6 != "" {
		return v6, nil
	}
	return "", fmt.Errorf("the frontend listens on every interface, so the other Temporal servers reach this one on the address of its host name %q, which resolves only to loopback: set the broadcast address (an IP of this host)", name)
}

// Stack is a running dev stack.
type Stack struct {
	cfg          Config
	server       temporal.Server
	ui           *uiserver.Server
	uiDone       chan error
	uiFront      *uiFront
	frontendAddr string
	uiAddr       string
	uiInner      string // the UI server's own loopback address, behind uiFront
	dbPath       string
	uiOnly       bool // StartUI: no server in this process
	// With mutual TLS: what the process's own clients present, and the
	// name they check in the server's certificate.
	clientTLS *tls.Config
	tlsName   string
	// selfCert is the servers' own certificate (DER): with roles on, the
	// admin (access.go).
	selfCert []byte
	// internode are the history, matching and worker services' gRPC
	// addresses (tests).
	internode []string
	// keys are the API keys' signing keys (Config.APIKeys).
	keys     *jwks
	stopOnce sync.Once
	stopping atomic.Bool // the server's warnings are dropped from here on
	stopErr  error
}

// FrontendAddress is the host:port SDK clients dial.
func (s *Stack) FrontendAddress() string { return s.frontendAddr }

// UIURL is the web UI's address, or "" when the UI is off.
func (s *Stack) UIURL() string {
	if s.uiAddr == "" {
		return ""
	}
	return "http://" + s.uiAddr
}

// ClientTLS is what a client in this process presents to the server
// (a copy), or nil when the server speaks plain gRPC.
func (s *Stack) ClientTLS() *tls.Config {
	if s.clientTLS == nil {
		return nil
	}
	return s.clientTLS.Clone()
}

// Namespace is the namespace registered at start.
func (s *Stack) Namespace() string { return s.cfg.Namespace }

// DatabasePath is the SQLite file that holds the server's state ("" on
// PostgreSQL).
func (s *Stack) DatabasePath() string { return s.dbPath }

// State says where the server keeps its state: the SQLite file, or the
// PostgreSQL database with its password left out.
func (s *Stack) State() string {
	if s.uiOnly {
		return "kept by the Temporal server at " + s.frontendAddr
	}
	if s.cfg.Database != "" {
		return logging.RedactDSN(s.cfg.Database) + " (and its " + VisibilitySuffix + " database)"
	}
	return s.dbPath
}

// Start brings up the server and the UI and returns once the namespace
// answers with its retention and search attributes in place. On error
// nothing is left running.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg}
	// The TLS files are read once, before anything is created or listens.
	if cfg.TLS != nil {
		cert, pool, name, err := cfg.TLS.Load()
		if err != nil {
			return nil, err
		}
		s.clientTLS, s.tlsName, s.selfCert = stackspec.ClientConfig(cert, pool, name), name, cert.Certificate[0]
	}
	if cfg.Database == "" {
		// The server's database holds every run's history: the
		// directory is the user's alone.
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create the dev-stack data directory %s: %w", cfg.DataDir, err)
		}
		s.dbPath = filepath.Join(cfg.DataDir, "temporal.db")
	}

	frontendHost, frontendPort, err := freeport.Resolve(cfg.FrontendAddress)
	if err != nil {
		return nil, fmt.Errorf("frontend address %s: %w", cfg.FrontendAddress, err)
	}
	s.frontendAddr = net.JoinHostPort(frontendHost, strconv.Itoa(frontendPort))

	if cfg.UIAddress != UIOff {
		jwks := ""
		if cfg.APIKeys != nil {
			jwks = cfg.APIKeys.JWKS
		}
		if err := checkProvider(ctx, cfg.UILogin, jwks); err != nil {
			return nil, err
		}
		if err := s.buildUI(); err != nil {
			return nil, err
		}
	}

	if err := freeport.Check(s.frontendAddr); err != nil {
		return nil, fmt.Errorf("the Temporal frontend cannot listen on %s: %w (is another dev stack or Temporal server running? stop it or choose another address)", s.frontendAddr, err)
	}
	if s.ui != nil {
		if err := freeport.Check(s.uiAddr); err != nil {
			return nil, fmt.Errorf("the web UI cannot listen on %s: %w (stop what uses it or choose another UI address)", s.uiAddr, err)
		}
	}

	if cfg.APIKeys != nil {
		if s.keys, err = openJWKS(ctx, cfg.APIKeys.JWKS, time.Minute, cfg.Logger); err != nil {
			return nil, err
		}
	}
	srv, err := s.buildServer(ctx, frontendHost, frontendPort)
	if err != nil {
		s.closeKeys()
		return nil, err
	}
	s.server = srv
	if err := srv.Start(); err != nil {
		s.closeKeys()
		return nil, fmt.Errorf("start the Temporal server: %w", err)
	}
	if s.ui != nil {
		if err := s.startUI(); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	if err := s.ready(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Stack) closeKeys() {
	if s.keys != nil {
		s.keys.Close()
	}
}

// Stop shuts the UI and the server down. It is safe to call more than once.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		if s.uiFront != nil {
			if err := s.uiFront.stop(); err != nil {
				s.cfg.Logger.Warn("web UI's front stopped with an error", zap.Error(err))
			}
		}
		if s.ui != nil {
			s.ui.Stop()
			if s.uiDone != nil {
				if err := <-s.uiDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
					s.cfg.Logger.Warn("web UI stopped with an error", zap.Error(err))
				}
			}
		}
		if s.server != nil {
			s.stopErr = s.server.Stop()
		}
		s.closeKeys()
	})
	return s.stopErr
}

// ready waits for the frontend and the UI to answer, then makes sure the
// namespace has the configured retention and search attributes.
func (s *Stack) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort: s.frontendAddr, Namespace: s.cfg.Namespace, Logger: logging.SDK(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{TLS: s.ClientTLS()},
	})
	if err != nil {
		return fmt.Errorf("the Temporal frontend on %s does not answer: %w", s.frontendAddr, err)
	}
	defer c.Close()
	if err := ensureNamespace(ctx, c, s.cfg); err != nil {
		return err
	}
	if s.ui != nil {
		if err := s.waitUI(ctx); err != nil {
			return err
		}
	}
	return nil
}

// retry calls f until it succeeds or ctx ends; the frontend may need a moment
// after Start before the namespace registry has loaded.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
