//go:build !race

package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/acme/smsorch/internal/freeport"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/rpc/encryption"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/types/known/durationpb"
)

func (s *Stack) buildServer(ctx context.Context, frontendHost string, frontendPort int) (temporal.Server, error) {
	level, _ := zapcore.ParseLevel(s.cfg.ServerLogLevel) // checked in validate
	logger := serverlog.NewZapLogger(s.cfg.Logger.Named("temporal-server").WithOptions(zap.IncreaseLevel(level),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return refusalsAtInfo{quietWhileStopping{c, &s.stopping}} })))
	const clusterName = "active"
	var conf config.Config

	// Ports besides the frontend's: history, matching, worker, and on
	// PostgreSQL each service's membership port. The frontend's HTTP API
	// is off (its port 0): nothing of ours uses it, and it would answer
	// without the frontend's authorization.
	n := 3
	if s.cfg.Database != "" {
		n = 7
	}
	// All below 32768 (freeport.Low): the server keeps a membership port
	// in a smallint column, and a port of the range the kernel hands to
	// outgoing connections (32768 and up) could be taken by one of them
	// between the pick and the server's listen, failing its start.
	ports := make([]int, n)
	for i := range ports {
		var err error
		if ports[i], err = freeport.Low(frontendHost); err != nil {
			return nil, err
		}
	}
	historyPort, matchingPort, workerPort := ports[0], ports[1], ports[2]
	hostPort := func(p int) string { return net.JoinHostPort(frontendHost, strconv.Itoa(p)) }
	s.internode = []string{hostPort(historyPort), hostPort(matchingPort), hostPort(workerPort)}
	service := func(grpc, http int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpc, HTTPPort: http, BindOnIP: frontendHost}}
	}
	conf.Services = map[string]config.Service{
		"frontend": service(frontendPort, 0),
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
		release, err := stores.setup(ctx, logger)
		if err != nil {
			return nil, err
		}
		// Held until temporal.NewServer below has saved the cluster
		// metadata: replicas starting together do it one at a time.
		defer release()
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
			svc.RPC.MembershipPort = ports[3+i]
			conf.Services[name] = svc
		}
		broadcast, err := s.cfg.broadcast() // checked in validate
		if err != nil {
			return nil, err
		}
		conf.Global.Membership.BroadcastAddress = broadcast
	}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             s.frontendAddr,
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
	if s.cfg.TLS != nil {
		conf.Global.TLS = serverConfig(s.cfg.TLS, s.tlsName)
	}

	var authorizer authorization.Authorizer
	var claimMapper authorization.ClaimMapper
	var tlsProvider encryption.TLSConfigProvider
	if s.cfg.TLS != nil && !s.cfg.TLS.AnyClient {
		// The roles in client certificates and API keys decide each call
		// (access.go).
		a := &access{namespace: s.cfg.Namespace, self: s.selfCert}
		if k := s.cfg.APIKeys; k != nil {
			a.keys, a.issuer, a.audience = s.keys, k.Issuer, k.Audience
		}
		var err error
		if tlsProvider, err = rolesTLS(conf.Global.TLS, s.selfCert, s.cfg.APIKeys != nil, logger); err != nil {
			return nil, err
		}
		authorizer, claimMapper = a, a
	} else {
		var err error
		if authorizer, err = authorization.GetAuthorizerFromConfig(&conf.Global.Authorization); err != nil {
			return nil, fmt.Errorf("build the server authorizer: %w", err)
		}
		if claimMapper, err = authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger); err != nil {
			return nil, fmt.Errorf("build the server claim mapper: %w", err)
		}
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
		// A refusal of the roles (access.go) reaches the caller with its
		// reason as the message, not a bare "Request unauthorized.".
		dynamicconfig.ExposeAuthorizerErrors.Key(): true,
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
	if tlsProvider != nil {
		opts = append(opts, temporal.WithTLSConfigFactory(tlsProvider))
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

// quietWhileStopping passes the server's log lines through until the
// stack stops, then only what would end the process (DPanic and above):
// its services stop one after another, and its own system workers warn
// about every frontend that went away ("network dial error", "Failed to
// poll for task"); a request cut short in the middle logs an error
// ("unable to add metrics baggage to gRPC trailer"). None of it tells the
// person who pressed Ctrl+C anything, and a stop that fails is reported
// by Stop's own error.
type quietWhileStopping struct {
	zapcore.Core
	stopping *atomic.Bool
}

func (c quietWhileStopping) quiet(l zapcore.Level) bool {
	return c.stopping.Load() && l < zapcore.DPanicLevel
}

func (c quietWhileStopping) Enabled(l zapcore.Level) bool { return !c.quiet(l) && c.Core.Enabled(l) }

func (c quietWhileStopping) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.quiet(e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c quietWhileStopping) With(f []zapcore.Field) zapcore.Core {
	return quietWhileStopping{c.Core.With(f), c.stopping}
}

// refusalsAtInfo logs the roles' refusals (access.go), which the server
// logs as errors ("Authorization error"), at info: a refusal is the
// caller's to read (its message says why) and no fault of the server,
// and anyone who reaches the frontend could otherwise fill its error log.
type refusalsAtInfo struct{ zapcore.Core }

// authorizationError is the server's message for an authorizer's error.
const authorizationError = "Authorization error"

func (c refusalsAtInfo) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == authorizationError && e.Level > zapcore.InfoLevel {
		e.Level = zapcore.InfoLevel
	}
	return c.Core.Check(e, ce)
}

func (c refusalsAtInfo) With(f []zapcore.Field) zapcore.Core { return refusalsAtInfo{c.Core.With(f)} }
