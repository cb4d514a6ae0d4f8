//go:build !race

package devstack

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pgtest"
)

var testAttributes = map[string]enumspb.IndexedValueType{
	"SmsState":    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"SmsProvider": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// startStack starts a stack on a SQLite file in dir, or on the
// PostgreSQL database db when it is set.
func startStack(t *testing.T, dir, db string) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{
		FrontendAddress:  "127.0.0.1:0",
		UIAddress:        "127.0.0.1:0",
		DataDir:          dir,
		Database:         db,
		SearchAttributes: testAttributes,
		// Not zaptest: the server's goroutines may still log a redial after
		// Stop returns, and zaptest fails a test that logs after it ended.
		Logger: zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func dial(t *testing.T, s *Stack) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Namespace: s.Namespace(), Logger: logging.SDK(zaptest.NewLogger(t))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func echo(_ workflow.Context, s string) (string, error) { return "echo " + s, nil }

func TestStackServesNamespaceUIAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	checkStackServesAndSurvivesRestart(t, t.TempDir(), "")
}

// On PostgreSQL the stack creates the visibility database and both
// schemas, registers the namespace through the API, and a second start
// on the same database finds its runs (the schema upgrade is a no-op).
func TestStackOnPostgresServesNamespaceUIAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t)
	t.Cleanup(func() { dropVisibility(t, db) }) // after the stacks' own cleanups
	checkStackServesAndSurvivesRestart(t, t.TempDir(), db)
}

func dropVisibility(t *testing.T, db string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Logf("drop the visibility database: %v", err)
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	name := conn.Config().Database + VisibilitySuffix
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("drop the visibility database %s: %v", name, err)
	}
}

func checkStackServesAndSurvivesRestart(t *testing.T, dir, db string) {
	ctx := context.Background()
	s := startStack(t, dir, db)
	if db != "" {
		require.Empty(t, s.DatabasePath())
		require.Contains(t, s.State(), VisibilitySuffix)
		_, err := os.Stat(filepath.Join(dir, "temporal.db"))
		require.ErrorIs(t, err, os.ErrNotExist, "no SQLite file beside a PostgreSQL stack")
	}
	c := dial(t, s)

	// The frontend answers, with the namespace's retention and search attributes.
	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), 30*24*time.Hour)
	sa, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	for name, typ := range testAttributes {
		require.Equal(t, typ, sa.GetCustomAttributes()[name], name)
	}
	require.NoError(t, contract.EnsureSearchAttributes(ctx, c, "default", testAttributes), "present ones are left alone")
	err = contract.EnsureSearchAttributes(ctx, c, "default", map[string]enumspb.IndexedValueType{"SmsState": enumspb.INDEXED_VALUE_TYPE_INT})
	require.ErrorContains(t, err, "search attribute SmsState exists in namespace default as Keyword, but this program needs Int")

	// The web UI answers at /.
	resp, err := http.Get(s.UIURL() + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, strings.ToLower(string(body)), "<html")

	// A workflow completes...
	w := worker.New(c, "devstack-test", worker.Options{})
	w.RegisterWorkflow(echo)
	require.NoError(t, w.Start())
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "order-58213-shipped", TaskQueue: "devstack-test"}, echo, "hi")
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "echo hi", out)
	w.Stop()
	c.Close()
	require.NoError(t, s.Stop())

	// ...and is still there, with its result, after a stop and a start on the same directory.
	s2 := startStack(t, dir, db)
	c2 := dial(t, s2)
	// On PostgreSQL the restarted server owns the history shards once the
	// stopped one's membership has expired: a call can time out until then.
	var desc *workflowservice.DescribeWorkflowExecutionResponse
	var lastErr error
	deadline := time.Now().Add(2 * time.Minute)
	for {
		desc, lastErr = c2.DescribeWorkflowExecution(ctx, "order-58213-shipped", "")
		if lastErr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	require.NoError(t, lastErr, "the run after the restart")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	require.NoError(t, c2.GetWorkflow(ctx, "order-58213-shipped", "").Get(ctx, &out))
	require.Equal(t, "echo hi", out)
	ns, err = c2.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), 30*24*time.Hour)
}

func TestStartRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{FrontendAddress: "7233"}, "is not host:port"},
		{Config{UIAddress: "localhost"}, `or "off"`},
		{Config{Retention: 24 * time.Hour}, "set at least 720h0m0s"},
		{Config{ServerLogLevel: "chatty"}, "use debug, info, warn or error"},
		{Config{Database: "mysql://root@127.0.0.1/temporal"}, "is not a postgres:// DSN"},
		{Config{Database: "postgres://postgres:hunter2@127.0.0.1:5432"}, "names no database"},
		{Config{Database: "postgres://127.0.0.1:5432/temporal"}, "names no user"},
		{Config{Database: "postgres://postgres@127.0.0.1/temporal", FrontendAddress: "0.0.0.0:7233", BroadcastAddress: "0.0.0.0"}, "set the broadcast address"},
	} {
		tc.cfg.DataDir = t.TempDir()
		_, err := Start(ctx, tc.cfg)
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "hunter2", "a password in an error")
	}
}

func TestStartExplainsBusyPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	_, err = Start(context.Background(), Config{FrontendAddress: l.Addr().String(), UIAddress: UIOff, DataDir: t.TempDir()})
	require.ErrorContains(t, err, "is another dev stack or Temporal server running?")
}

// A server that listens on every interface, as in a container, tells the
// other servers the address its host name resolves to; when that is
// only loopback, or nothing, it says to set the broadcast address.
func TestBroadcastAddressOfAServerOnEveryInterface(t *testing.T) {
	saved := hostAddrs
	defer func() { hostAddrs = saved }()
	cfg := Config{Database: "postgres://postgres@127.0.0.1/temporal", FrontendAddress: "0.0.0.0:7233"}
	for _, tc := range []struct {
		ips        []net.IP
		err        error
		want, fail string
	}{
		{ips: []net.IP{net.ParseIP("127.0.1.1"), net.ParseIP("fd00::5"), net.ParseIP("172.18.0.4")}, want: "172.18.0.4"},
		{ips: []net.IP{net.ParseIP("fd00::5")}, want: "fd00::5"},
		{ips: []net.IP{net.ParseIP("127.0.0.1")}, fail: "resolves only to loopback: set the broadcast address"},
		{err: errors.New("no such host"), fail: "does not resolve (no such host): set the broadcast address"},
	} {
		hostAddrs = func() (string, []net.IP, error) { return "a1b2c3", tc.ips, tc.err }
		got, err := cfg.broadcast()
		if tc.fail != "" {
			require.ErrorContains(t, err, tc.fail)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	// A given address or a specific frontend host wins over the host name.
	hostAddrs = func() (string, []net.IP, error) { panic("not asked") }
	got, err := Config{FrontendAddress: "0.0.0.0:7233", BroadcastAddress: "10.0.0.7"}.broadcast()
	require.NoError(t, err)
	require.Equal(t, "10.0.0.7", got)
	got, err = Config{FrontendAddress: "10.0.0.8:7233"}.broadcast()
	require.NoError(t, err)
	require.Equal(t, "10.0.0.8", got)
}

// TestServersStartingTogetherOnANewDatabaseAllStart: compose starts its
// two Temporal replicas at once on a new database. Each sets up the
// schema and then saves the cluster metadata; the second save used to
// lose the race and the server exited ("SaveClusterMetadata encountered
// version mismatch").
func TestServersStartingTogetherOnANewDatabaseAllStart(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t)
	t.Cleanup(func() { dropVisibility(t, db) })
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		dir := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			s, err := Start(ctx, Config{FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: dir, Database: db,
				SearchAttributes: testAttributes, Logger: zap.NewNop()})
			errs[i] = err
			if err == nil {
				t.Cleanup(func() { _ = s.Stop() })
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// TestStoppingPrintsNoWarningBurst: Ctrl+C on the dev stack printed a
// burst of the server's own warnings ("network dial error", "Failed to
// poll for task") as its services stopped one after another.
func TestStoppingPrintsNoWarningBurst(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: t.TempDir(),
		SearchAttributes: testAttributes, Logger: zap.New(core), ServerLogLevel: "info"})
	require.NoError(t, err)
	time.Sleep(2 * time.Second) // the server's system workers poll
	before := logs.Len()
	require.Positive(t, before, "the server logs while it runs")
	require.NoError(t, s.Stop())
	time.Sleep(time.Second)
	for _, e := range logs.All()[before:] {
		require.Less(t, e.Level, zapcore.WarnLevel, "after Stop: %s %q %v", e.Level, e.Message, e.ContextMap())
	}
}

// TestQuietWhileStoppingDropsShutdownErrors: CI saw the server log an
// error as a request was cut short by the stop ("unable to add metrics
// baggage to gRPC trailer"); it is as much noise as the warnings.
func TestQuietWhileStoppingDropsShutdownErrors(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	var stopping atomic.Bool
	l := zap.New(quietWhileStopping{core, &stopping}).With(zap.String("service", "frontend"))
	l.Warn("running")
	l.Error("running")
	stopping.Store(true)
	l.Info("stopping")
	l.Warn("network dial error")
	l.Error("unable to add metrics baggage to gRPC trailer")
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	require.Equal(t, []string{"warn running", "error running"}, got)
	require.True(t, zap.New(quietWhileStopping{core, &stopping}).Core().Enabled(zapcore.DPanicLevel),
		"what would end the process still passes")
}
