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
package devstack

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/logging"
)

// Defaults, chosen to match the Temporal CLI's dev server so its habits and
// docs carry over.
const (
	DefaultFrontendAddress = "127.0.0.1:7233"
	DefaultUIAddress       = "127.0.0.1:8233"
	DefaultDataDir         = ".smsorch"
	DefaultNamespace       = "default"
	// DefaultRetention keeps closed runs, and with them the workflow-id
	// duplicate check, for 30 days.
	DefaultRetention = 30 * 24 * time.Hour
	// MinRetention is the shortest retention accepted: shorter would let a
	// redelivered event start a second run within a month.
	MinRetention = 30 * 24 * time.Hour
	// UIOff as Config.UIAddress starts no UI.
	UIOff = "off"
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
	if c.Database != "" {
		if !IsPostgres(c.Database) {
			return fmt.Errorf("the Temporal database %s is not a postgres:// DSN: give postgres://user@host:5432/temporal, or leave it empty for a SQLite file in the data directory", logging.RedactDSN(c.Database))
		}
		if _, err := parsePostgres(c.Database); err != nil {
			return err
		}
		if err := c.checkBroadcast(); err != nil {
			return err
		}
	}
	if c.Retention < MinRetention {
		return fmt.Errorf("namespace retention %s is shorter than %s: the workflow-id duplicate check only sees closed runs within retention; set at least %s",
			c.Retention, MinRetention, MinRetention)
	}
	return nil
}

// checkBroadcast makes sure the servers of a cluster can reach this one.
func (c Config) checkBroadcast() error {
	addr := c.BroadcastAddress
	if addr == "" {
		addr, _, _ = net.SplitHostPort(c.FrontendAddress)
	}
	ip := net.ParseIP(addr)
	if ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("the other Temporal servers on the database need an IP address to reach this one, and %q is not one: set the broadcast address (an IP of this host), or listen on a specific IP", addr)
	}
	return nil
}

// Stack is a running dev stack.
type Stack struct {
	cfg          Config
	server       temporal.Server
	ui           *uiserver.Server
	uiDone       chan error
	frontendAddr string
	uiAddr       string
	dbPath       string
	stopOnce     sync.Once
	stopErr      error
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

// Namespace is the namespace registered at start.
func (s *Stack) Namespace() string { return s.cfg.Namespace }

// DatabasePath is the SQLite file that holds the server's state ("" on
// PostgreSQL).
func (s *Stack) DatabasePath() string { return s.dbPath }

// State says where the server keeps its state: the SQLite file, or the
// PostgreSQL database with its password left out.
func (s *Stack) State() string {
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
	if cfg.Database == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("create the dev-stack data directory %s: %w", cfg.DataDir, err)
		}
		s.dbPath = filepath.Join(cfg.DataDir, "temporal.db")
	}

	frontendHost, frontendPort, err := resolvePort(cfg.FrontendAddress)
	if err != nil {
		return nil, fmt.Errorf("frontend address %s: %w", cfg.FrontendAddress, err)
	}
	s.frontendAddr = net.JoinHostPort(frontendHost, strconv.Itoa(frontendPort))

	if cfg.UIAddress != UIOff {
		uiHost, uiPort, err := resolvePort(cfg.UIAddress)
		if err != nil {
			return nil, fmt.Errorf("UI address %s: %w", cfg.UIAddress, err)
		}
		s.uiAddr = net.JoinHostPort(uiHost, strconv.Itoa(uiPort))
		s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
			Host:                uiHost,
			Port:                uiPort,
			TemporalGRPCAddress: s.frontendAddr,
			EnableUI:            true,
			DefaultNamespace:    cfg.Namespace,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			HideLogs:            true,
			DisableNewsFetch:    true, // the machines this runs on may have no internet
			Codec:               uiconfig.Codec{Endpoint: cfg.CodecEndpoint},
		}))
	}

	if err := portFree(s.frontendAddr); err != nil {
		return nil, fmt.Errorf("the Temporal frontend cannot listen on %s: %w (is another dev stack or Temporal server running? stop it or choose another address)", s.frontendAddr, err)
	}
	if s.ui != nil {
		if err := portFree(s.uiAddr); err != nil {
			return nil, fmt.Errorf("the web UI cannot listen on %s: %w (stop what uses it or choose another UI address)", s.uiAddr, err)
		}
	}

	srv, err := s.buildServer(ctx, frontendHost, frontendPort)
	if err != nil {
		return nil, err
	}
	s.server = srv
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start the Temporal server: %w", err)
	}
	if s.ui != nil {
		s.uiDone = make(chan error, 1)
		go func() { s.uiDone <- s.ui.Start() }()
	}
	if err := s.ready(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop shuts the UI and the server down. It is safe to call more than once.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
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
	})
	return s.stopErr
}

func (s *Stack) buildServer(ctx context.Context, frontendHost string, frontendPort int) (temporal.Server, error) {
	level, _ := zapcore.ParseLevel(s.cfg.ServerLogLevel) // checked in validate
	logger := serverlog.NewZapLogger(s.cfg.Logger.Named("temporal-server").WithOptions(zap.IncreaseLevel(level)))
	const clusterName = "active"
	var conf config.Config

	// Ports besides the frontend's: frontend HTTP, history, matching,
	// worker, and on PostgreSQL each service's membership port.
	n := 4
	if s.cfg.Database != "" {
		n = 8
	}
	ports := make([]int, n)
	for i := range ports {
		var err error
		if i < 4 {
			ports[i], err = freePort(frontendHost)
		} else {
			ports[i], err = freeMembershipPort(frontendHost)
		}
		if err != nil {
			return nil, err
		}
	}
	frontendHTTPPort, historyPort, matchingPort, workerPort := ports[0], ports[1], ports[2], ports[3]
	hostPort := func(p int) string { return net.JoinHostPort(frontendHost, strconv.Itoa(p)) }
	service := func(grpc, http int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpc, HTTPPort: http, BindOnIP: frontendHost}}
	}
	conf.Services = map[string]config.Service{
		"frontend": service(frontendPort, frontendHTTPPort),
		"history":  service(historyPort, 0),
		"matching": service(matchingPort, 0),
		"worker":   service(workerPort, 0),
	}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = frontendHost

	var hosts temporal.ServerOption
	if s.cfg.Database == "" {
		sqlCfg, err := s.setupSQLite()
		if err != nil {
			return nil, err
		}
		conf.Persistence.DefaultStore = "sqlite-default"
		conf.Persistence.VisibilityStore = "sqlite-default"
		conf.Persistence.NumHistoryShards = 1
		conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlCfg}}
		// One process is the whole service: no membership to discover.
		hosts = temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(s.frontendAddr),
			primitives.HistoryService:  static.SingleLocalHost(hostPort(historyPort)),
			primitives.MatchingService: static.SingleLocalHost(hostPort(matchingPort)),
			primitives.WorkerService:   static.SingleLocalHost(hostPort(workerPort)),
		})
	} else {
		stores, err := parsePostgres(s.cfg.Database) // checked in validate
		if err != nil {
			return nil, err
		}
		if err := stores.setup(ctx, logger); err != nil {
			return nil, err
		}
		conf.Persistence.DefaultStore = "postgres-default"
		conf.Persistence.VisibilityStore = "postgres-visibility"
		conf.Persistence.NumHistoryShards = PostgresHistoryShards
		conf.Persistence.DataStores = map[string]config.DataStore{
			"postgres-default":    {SQL: stores.persistence},
			"postgres-visibility": {SQL: stores.visibility},
		}
		// Membership through the database: each service announces its
		// membership port there and finds the other servers' services.
		for i, name := range []string{"frontend", "history", "matching", "worker"} {
			svc := conf.Services[name]
			svc.RPC.MembershipPort = ports[4+i]
			conf.Services[name] = svc
		}
		if s.cfg.BroadcastAddress != "" {
			conf.Global.Membership.BroadcastAddress = s.cfg.BroadcastAddress
		}
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             s.frontendAddr,
			HTTPAddress:            hostPort(frontendHTTPPort),
			ClusterID:              "8d0b7e0e-6a5f-4c1e-9a53-2f1d3c4b5a69", // fixed: kept in the database at first start
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The server's own system workflows reach the frontend of this process.
	conf.PublicClient.HostPort = s.frontendAddr

	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("build the server authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("build the server claim mapper: %w", err)
	}
	dyn := dynamicconfig.StaticClient{
		// Search attributes added at start are usable at once.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// The UI and `list` query visibility often; the default limit is for clusters.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// With the refresh above, every listed run reads the search
		// attributes from the store: a list of a thousand runs would pass
		// the frontend's default 2,000 reads a second and fail with
		// "System Persistence Max QPS Reached". A local file takes more.
		dynamicconfig.FrontendPersistenceMaxQPS.Key(): 20000,
		// One partition per task queue: a worker's activity rate limit is
		// then enforced by one limiter, with a burst of one task, not split
		// over four (the providers' request limits rely on it).
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	opts := []temporal.ServerOption{
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	}
	if hosts != nil {
		opts = append(opts, hosts)
	}
	srv, err := temporal.NewServer(opts...)
	if err != nil {
		return nil, fmt.Errorf("build the Temporal server: %w", err)
	}
	return srv, nil
}

// setupSQLite creates the schema in a new file and the namespace in it.
func (s *Stack) setupSQLite() (*config.SQL, error) {
	sqlCfg := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: s.dbPath,
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "2", // FULL: a committed workflow task survives a crash of the process
		},
	}
	if _, err := os.Stat(s.dbPath); errors.Is(err, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
			return nil, fmt.Errorf("create the Temporal schema in %s: %w", s.dbPath, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("read the dev-stack database %s: %w", s.dbPath, err)
	}
	ns, err := sqliteschema.NewNamespaceConfig("active", s.cfg.Namespace, false, s.cfg.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("prepare namespace %s: %w", s.cfg.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(s.cfg.Retention)
	// A no-op when the namespace exists; ensureNamespace then fixes it up through the API.
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("register namespace %s: %w", s.cfg.Namespace, err)
	}
	return sqlCfg, nil
}

// ready waits for the frontend and the UI to answer, then makes sure the
// namespace has the configured retention and search attributes.
func (s *Stack) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.frontendAddr, Namespace: s.cfg.Namespace, Logger: logging.SDK(zap.NewNop())})
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

func ensureNamespace(ctx context.Context, c client.Client, cfg Config) error {
	var desc *workflowservice.DescribeNamespaceResponse
	err := retry(ctx, func() error {
		var err error
		desc, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: cfg.Namespace})
		var notFound *serviceerror.NamespaceNotFound
		if errors.As(err, &notFound) {
			// A new database (PostgreSQL): register it; a server starting
			// beside this one may do the same.
			_, rerr := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace:                        cfg.Namespace,
				Description:                      "SMS notifications (registered by smsorch)",
				WorkflowExecutionRetentionPeriod: durationpb.New(cfg.Retention),
			})
			var exists *serviceerror.NamespaceAlreadyExists
			if rerr != nil && !errors.As(rerr, &exists) {
				return fmt.Errorf("register namespace %s: %w", cfg.Namespace, rerr)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("namespace %s is not available: %w", cfg.Namespace, err)
	}
	if desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() < cfg.Retention {
		_, err := c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
			Namespace: cfg.Namespace,
			Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(cfg.Retention)},
		})
		if err != nil {
			return fmt.Errorf("raise the retention of namespace %s to %s: %w", cfg.Namespace, cfg.Retention, err)
		}
	}
	// A namespace registered just now reaches the frontend's cache a few
	// seconds later; until then starts, polls and attribute changes in it fail.
	err = retry(ctx, func() error {
		_, err := c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: cfg.Namespace})
		return err
	})
	if err != nil {
		return fmt.Errorf("namespace %s does not answer: %w", cfg.Namespace, err)
	}
	return contract.EnsureSearchAttributes(ctx, c, cfg.Namespace, cfg.SearchAttributes)
}

func (s *Stack) waitUI(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-s.uiDone:
			s.uiDone <- err // Stop reads it again
			return fmt.Errorf("the web UI on %s stopped at start: %w", s.uiAddr, err)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.UIURL()+"/", nil)
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the web UI on %s does not answer: %w", s.uiAddr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
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

// resolvePort splits host:port and replaces port 0 with a free port.
func resolvePort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", portStr)
	}
	if port == 0 {
		port, err = freePort(host)
	}
	return host, port, err
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeMembershipPort finds a free port below 32768: the server keeps a
// membership port in a smallint column, which the ephemeral ports the
// kernel hands out (32768 and up) overflow.
func freeMembershipPort(host string) (int, error) { return FreeLowPort(host) }

var (
	lowPortsMu sync.Mutex
	lowPorts   = map[int]bool{} // handed out by this process
)

// FreeLowPort returns a port below 32768, free on host right now and
// never returned before by this process. Below 32768 no outgoing
// connection takes it (the kernel hands those ports out from 32768 up)
// while the process that is to listen there starts.
func FreeLowPort(host string) (int, error) {
	lowPortsMu.Lock()
	defer lowPortsMu.Unlock()
	for i := 0; i < 500; i++ {
		p := 20000 + rand.IntN(32768-20000)
		if !lowPorts[p] && portFree(net.JoinHostPort(host, strconv.Itoa(p))) == nil {
			lowPorts[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free port below 32768 on %s: 500 tries failed", host)
}

func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}
