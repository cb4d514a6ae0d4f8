//go:build !race

package devstack

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pki"
)

// With mutual TLS each client certificate may do what its roles allow
// and nothing more: the intake's cannot terminate, signal or change
// retention, a worker's cannot start, an operator's cannot terminate, a
// certificate with no role can call nothing, and every refusal says
// which certificate, which API and which role it takes.
func TestRolesInClientCertificatesDecideEachCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, []net.IP{net.IPv4(127, 0, 0, 1)}, "admin", pki.RoleAdmin)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{
		FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: filepath.Join(dir, "state"),
		SearchAttributes: testAttributes, Logger: zap.NewNop(),
		TLS: &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA},
	})
	require.NoError(t, err, "the stack sets up its namespace and search attributes with its own certificate")
	t.Cleanup(func() { _ = s.Stop() })

	dial := func(name string, roles ...string) workflowservice.WorkflowServiceClient {
		f := files
		if name != "admin" {
			f, err = files.Issue(name, roles...)
			require.NoError(t, err)
		}
		conf, err := f.ClientTLS("temporal.internal")
		require.NoError(t, err)
		c, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()),
			ConnectionOptions: client.ConnectionOptions{TLS: conf}})
		require.NoError(t, err, "%s connects: the health check is open to every certificate", name)
		t.Cleanup(c.Close)
		return c.WorkflowService()
	}
	admin := dial("admin")
	worker := dial("worker-1", pki.RoleWorker)
	intake := dial("intake-1", pki.RoleIntake)
	operator := dial("ops-1", pki.RoleOperator)
	nobody := dial("nobody")
	both := dial("intake-worker-1", pki.RoleWorker, pki.RoleIntake)

	ns := s.Namespace()
	start := func(c workflowservice.WorkflowServiceClient, id, workflowType string) error {
		_, err := c.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
			Namespace: ns, WorkflowId: id, RequestId: id,
			WorkflowType: &commonpb.WorkflowType{Name: workflowType},
			TaskQueue:    &taskqueuepb.TaskQueue{Name: contract.TaskQueue},
		})
		return err
	}
	run := func(id string) *commonpb.WorkflowExecution { return &commonpb.WorkflowExecution{WorkflowId: id} }
	terminate := func(c workflowservice.WorkflowServiceClient, id string) error {
		_, err := c.TerminateWorkflowExecution(ctx, &workflowservice.TerminateWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: run(id), Reason: "test"})
		return err
	}
	signal := func(c workflowservice.WorkflowServiceClient, id string) error {
		_, err := c.SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: run(id), SignalName: contract.SignalCancel, RequestId: id + "-signal"})
		return err
	}
	retention := func(c workflowservice.WorkflowServiceClient) error {
		_, err := c.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: ns,
			Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(25 * time.Hour)}})
		return err
	}
	describe := func(c workflowservice.WorkflowServiceClient, namespace string) error {
		_, err := c.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		return err
	}
	refused := func(t *testing.T, err error, want string) {
		t.Helper()
		var denied *serviceerror.PermissionDenied
		require.True(t, errors.As(err, &denied), "want a refusal, got %v", err)
		require.Contains(t, denied.Reason, want)
	}

	// The intake starts SendSMS and reads it; nothing else.
	require.NoError(t, start(intake, "order-1-shipped", contract.WorkflowName))
	_, err = intake.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{Namespace: ns, Execution: run("order-1-shipped")})
	require.NoError(t, err, "the intake reads the run it started")
	refused(t, start(intake, "other-1", "Other"), `may start SendSMS runs only, not Other`)
	refused(t, terminate(intake, "order-1-shipped"), `"CN=intake-1,OU=smsorch-intake" (smsorch-intake) may not call TerminateWorkflowExecution: that takes smsorch-admin`)
	refused(t, signal(intake, "order-1-shipped"), "may not call SignalWorkflowExecution: that takes smsorch-operator or smsorch-admin")
	refused(t, retention(intake), "may not call UpdateNamespace: that takes smsorch-admin")

	// A worker takes the run's workflow task; it cannot start a run.
	poll, err := worker.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns,
		TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue}, Identity: "worker-1"})
	require.NoError(t, err)
	require.Equal(t, "order-1-shipped", poll.GetWorkflowExecution().GetWorkflowId())
	refused(t, start(worker, "order-2-shipped", contract.WorkflowName), "may not call StartWorkflowExecution: that takes smsorch-intake (SendSMS only) or smsorch-admin")
	refused(t, signal(worker, "order-1-shipped"), "may not call SignalWorkflowExecution")

	// Roles add up: the intake process is also a worker.
	require.NoError(t, start(both, "order-3-shipped", contract.WorkflowName))

	// An operator decides: it signals; it cannot terminate or start.
	require.NoError(t, signal(operator, "order-1-shipped"))
	refused(t, terminate(operator, "order-1-shipped"), "may not call TerminateWorkflowExecution: that takes smsorch-admin")
	refused(t, start(operator, "order-4-shipped", contract.WorkflowName), "may not call StartWorkflowExecution")
	_, err = operator.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns})
	require.NoError(t, err, "an operator lists runs")

	// Every role reads its namespace and the cluster, and no other namespace.
	for name, c := range map[string]workflowservice.WorkflowServiceClient{"worker": worker, "intake": intake, "operator": operator} {
		require.NoError(t, describe(c, ns), name)
		_, err := c.GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
		require.NoError(t, err, name)
		refused(t, describe(c, "temporal-system"), "in namespace default only; namespace temporal-system takes smsorch-admin")
	}

	// A certificate of the CA with no role is refused even reading.
	refused(t, describe(nobody, ns), `the client certificate "CN=nobody" names no role: give it an OU of smsorch-worker, smsorch-intake, smsorch-operator, smsorch-admin`)

	// The admin may do what nobody else may.
	require.NoError(t, terminate(admin, "order-1-shipped"))
	require.NoError(t, describe(admin, "temporal-system"))
	require.NoError(t, retention(admin))
	conf, err := files.ClientTLS("temporal.internal")
	require.NoError(t, err)
	adminClient, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{TLS: conf}})
	require.NoError(t, err)
	defer adminClient.Close()
	_, err = adminClient.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	require.NoError(t, err)

	// The stack's own certificate is the admin, as the system worker and
	// the web UI need.
	own := s.ClientTLS()
	require.NotNil(t, own)
	ownClient, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{TLS: own}})
	require.NoError(t, err)
	defer ownClient.Close()
	_, err = ownClient.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "temporal-system"})
	require.NoError(t, err)
}

// AnyClient turns the roles off: every certificate of the CA may call
// anything, as before roles existed.
func TestAnyClientLetsEveryCertificateOfTheCACallAnything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, []net.IP{net.IPv4(127, 0, 0, 1)}, "nobody")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{
		FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: filepath.Join(dir, "state"),
		SearchAttributes: testAttributes, Logger: zap.NewNop(),
		TLS: &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA, AnyClient: true},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	conf, err := files.ClientTLS("temporal.internal")
	require.NoError(t, err)
	c, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{TLS: conf}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "temporal-system"})
	require.NoError(t, err, "a certificate with no role, with the roles off")
}
