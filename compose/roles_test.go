package compose

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
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

// temporalClient connects to the stack's Temporal as a service of
// docker-compose.yml does: the client certificate and the stack's CA, the
// name "temporal" checked in the servers' certificate.
func temporalClient(t *testing.T, ctx context.Context, frontend, cert, key, ca string) client.Client {
	t.Helper()
	c, err := dialTLS(ctx, frontend, pki.Files{CA: ca, ClientCert: cert, ClientKey: key})
	require.NoError(t, err, "connect to %s with %s", frontend, cert)
	return c
}

func dialTLS(ctx context.Context, frontend string, f pki.Files) (client.Client, error) {
	conf, err := f.ClientTLS("temporal")
	if err != nil {
		return nil, err
	}
	return dial(ctx, frontend, conf)
}

func dial(ctx context.Context, frontend string, conf *tls.Config) (client.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.DialContext(cctx, client.Options{HostPort: frontend, Logger: logging.SDK(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{TLS: conf}})
}

// refusesWhatRolesDoNotAllow tries the stack's Temporal as someone on
// its network would: without a certificate, with another CA's, and with
// each service's certificate (from its volume under dir) doing what its
// role may not.
func refusesWhatRolesDoNotAllow(t *testing.T, ctx context.Context, dir, frontend string) {
	t.Helper()
	vol := func(name string) pki.Files {
		d := filepath.Join(dir, "volumes", name)
		return pki.Files{CA: filepath.Join(d, pki.CAFile), ClientCert: filepath.Join(d, pki.CertFile), ClientKey: filepath.Join(d, pki.KeyFile)}
	}
	describe := func(c client.Client) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.WorkflowService().DescribeNamespace(cctx, &workflowservice.DescribeNamespaceRequest{Namespace: client.DefaultNamespace})
		return err
	}

	// No certificate, plain or in TLS, and a certificate of another CA.
	if c, err := dial(ctx, frontend, nil); err == nil {
		require.Error(t, describe(c), "plain gRPC is refused")
		c.Close()
	}
	worker := vol("tls-worker")
	noCert, err := worker.ClientTLS("temporal")
	require.NoError(t, err)
	noCert.Certificates = nil
	if c, err := dial(ctx, frontend, noCert); err == nil {
		require.Error(t, describe(c), "TLS without a client certificate is refused")
		c.Close()
	}
	stranger, err := pki.Generate(t.TempDir(), []string{"temporal"}, nil, "mallory", pki.RoleAdmin)
	require.NoError(t, err)
	stranger.CA = worker.CA // it trusts the stack's servers, and they do not trust it
	if c, err := dialTLS(ctx, frontend, stranger); err == nil {
		require.Error(t, describe(c), "an admin's certificate of another CA is refused")
		c.Close()
	}

	refused := func(what string, err error) {
		t.Helper()
		var denied *serviceerror.PermissionDenied
		require.True(t, errors.As(err, &denied), "%s: want a refusal, got %v", what, err)
		t.Logf("refused, as it should be: %s: %s", what, denied.Reason)
	}
	as := func(name string) workflowservice.WorkflowServiceClient {
		c, err := dialTLS(ctx, frontend, vol(name))
		require.NoError(t, err, name)
		t.Cleanup(c.Close)
		require.NoError(t, describe(c), "%s's certificate reads the namespace", name)
		return c.WorkflowService()
	}
	run := &commonpb.WorkflowExecution{WorkflowId: "order-58213-shipped"}
	ns := client.DefaultNamespace
	terminate := func(c workflowservice.WorkflowServiceClient) error {
		_, err := c.TerminateWorkflowExecution(ctx, &workflowservice.TerminateWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: run, Reason: "rehearsal"})
		return err
	}

	intakeC := as("tls-intake")
	refused("the intake terminates a run", terminate(intakeC))
	_, err = intakeC.SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: run, SignalName: contract.SignalCancel})
	refused("the intake signals a run", err)
	_, err = intakeC.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: ns,
		Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(25 * time.Hour)}})
	refused("the intake cuts the retention", err)

	workerC := as("tls-worker")
	_, err = workerC.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{Namespace: ns, WorkflowId: "rehearsal-worker-start", RequestId: "rehearsal-worker-start",
		WorkflowType: &commonpb.WorkflowType{Name: contract.WorkflowName}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue}})
	refused("a worker starts a run", err)
	refused("a worker terminates a run", terminate(workerC))

	uiC := as("tls-ui")
	refused("the web UI's operator terminates a run", terminate(uiC))
	_, err = uiC.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: run, WorkflowTaskFinishEventId: 3, RequestId: "rehearsal-reset"})
	refused("the web UI's operator resets a run", err)
}
