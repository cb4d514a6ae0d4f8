//go:build !race

package devstack

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/stretchr/testify/require"
	commandpb "go.temporal.io/api/command/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/apikeytest"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/stackspec"
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
	core, logs := observer.New(zapcore.WarnLevel)
	s, err := Start(ctx, Config{
		FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: filepath.Join(dir, "state"),
		SearchAttributes: testAttributes, Logger: zap.New(core),
		TLS: &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA},
	})
	require.NoError(t, err, "the stack sets up its namespace and search attributes with its own certificate")
	defer func() {
		// A refusal is the caller's to read: the server's error log
		// (warn and up) holds none of the many above.
		require.Zero(t, logs.FilterMessage(authorizationError).Len(), "refusals logged as errors")
	}()
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
			// As the starter starts a run.
			WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
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
		require.Contains(t, err.Error(), want, "the error a user sees says why")
	}

	// The intake starts SendSMS and reads it; nothing else.
	require.NoError(t, start(intake, "order-1-shipped", contract.WorkflowName))
	_, err = intake.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{Namespace: ns, Execution: run("order-1-shipped")})
	require.NoError(t, err, "the intake reads the run it started")
	refused(t, start(intake, "other-1", "Other"), `may start SendSMS runs only, not Other`)
	refused(t, terminate(intake, "order-1-shipped"), `"CN=intake-1,OU=smsorch-intake" (smsorch-intake) may not call TerminateWorkflowExecution: that takes smsorch-admin`)
	refused(t, signal(intake, "order-1-shipped"), "may not call SignalWorkflowExecution: that takes smsorch-operator or smsorch-admin")
	refused(t, retention(intake), "may not call UpdateNamespace: that takes smsorch-admin")

	// The intake starts as the starter does, and in no way that could end
	// or repeat a run: a start that would terminate the running one is
	// refused, and the run goes on.
	for what, change := range map[string]func(*workflowservice.StartWorkflowExecutionRequest){
		"an id conflict policy other than USE_EXISTING": func(r *workflowservice.StartWorkflowExecutionRequest) {
			r.WorkflowIdConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
		},
		"an id reuse policy other than REJECT_DUPLICATE": func(r *workflowservice.StartWorkflowExecutionRequest) {
			r.WorkflowIdReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		},
		"cron_schedule": func(r *workflowservice.StartWorkflowExecutionRequest) { r.CronSchedule = "* * * * *" },
		"timeouts": func(r *workflowservice.StartWorkflowExecutionRequest) {
			r.WorkflowRunTimeout = durationpb.New(time.Second)
		},
		"a task queue other than sms": func(r *workflowservice.StartWorkflowExecutionRequest) {
			r.TaskQueue = &taskqueuepb.TaskQueue{Name: "elsewhere"}
		},
	} {
		req := &workflowservice.StartWorkflowExecutionRequest{
			Namespace: ns, WorkflowId: "order-1-shipped", RequestId: "again-" + what,
			WorkflowType: &commonpb.WorkflowType{Name: contract.WorkflowName}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue},
			WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}
		change(req)
		_, err := intake.StartWorkflowExecution(ctx, req)
		refused(t, err, "may start SendSMS runs as the starter does, without "+what+": that takes smsorch-admin")
	}
	d, err := intake.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{Namespace: ns, Execution: run("order-1-shipped")})
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "the run goes on")

	// A worker takes the run's workflow task; it cannot start a run, nor
	// start a child of its task (as an intake would) or signal another
	// run from it (as an operator would).
	poll, err := worker.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns,
		TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue}, Identity: "worker-1"})
	require.NoError(t, err)
	require.Equal(t, "order-1-shipped", poll.GetWorkflowExecution().GetWorkflowId())
	_, err = worker.RespondWorkflowTaskCompleted(ctx, &workflowservice.RespondWorkflowTaskCompletedRequest{Namespace: ns, TaskToken: poll.GetTaskToken(),
		Commands: []*commandpb.Command{{CommandType: enumspb.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
			Attributes: &commandpb.Command_StartChildWorkflowExecutionCommandAttributes{StartChildWorkflowExecutionCommandAttributes: &commandpb.StartChildWorkflowExecutionCommandAttributes{
				WorkflowId: "child-1", WorkflowType: &commonpb.WorkflowType{Name: "Other"}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue}}}}}})
	refused(t, err, "may not complete a workflow task with StartChildWorkflowExecution: a workflow of this stack acts on its own run only")
	_, err = worker.RespondWorkflowTaskCompleted(ctx, &workflowservice.RespondWorkflowTaskCompletedRequest{Namespace: ns, TaskToken: poll.GetTaskToken(),
		Commands: []*commandpb.Command{{CommandType: enumspb.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION,
			Attributes: &commandpb.Command_SignalExternalWorkflowExecutionCommandAttributes{SignalExternalWorkflowExecutionCommandAttributes: &commandpb.SignalExternalWorkflowExecutionCommandAttributes{
				Execution: run("order-3-shipped"), SignalName: contract.SignalCancel}}}}})
	refused(t, err, "may not complete a workflow task with SignalExternalWorkflowExecution")
	_, err = worker.RespondWorkflowTaskCompleted(ctx, &workflowservice.RespondWorkflowTaskCompletedRequest{Namespace: ns, TaskToken: poll.GetTaskToken(),
		Commands: []*commandpb.Command{{CommandType: enumspb.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
			Attributes: &commandpb.Command_ContinueAsNewWorkflowExecutionCommandAttributes{ContinueAsNewWorkflowExecutionCommandAttributes: &commandpb.ContinueAsNewWorkflowExecutionCommandAttributes{
				WorkflowType: &commonpb.WorkflowType{Name: "Other"}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue}}}}}})
	refused(t, err, "may not complete a workflow task with ContinueAsNewWorkflowExecution")
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
		refused(t, describe(c, "temporal-system"), `in namespace default only; namespace "temporal-system" takes smsorch-admin`)
	}

	// The namespace is named: a list in another is refused; a namespace
	// described by id says what the cluster's list of namespaces says.
	_, err = operator.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "temporal-system"})
	refused(t, err, `may call ListWorkflowExecutions in namespace default only; namespace "temporal-system" takes smsorch-admin`)

	// The services between the servers take the servers' own certificate
	// only: the roles are checked at the frontend, and a worker's
	// certificate must not reach history around it.
	require.Len(t, s.internode, 3)
	workerTLS, err := files.Issue("worker-9", pki.RoleWorker)
	require.NoError(t, err)
	workerConf, err := workerTLS.ClientTLS("temporal.internal")
	require.NoError(t, err)
	for _, addr := range s.internode {
		require.ErrorContains(t, handshake(addr, workerConf), "bad certificate", "a worker's certificate at %s", addr)
		require.NoError(t, handshake(addr, s.ClientTLS()), "the servers' own at %s", addr)
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

// One authorizer, two ways to say who calls: with API keys on, a client
// without a certificate presents a key (a JWT signed by a key of the
// JWKS, as TEMPORAL_API_KEY sends it) and gets its roles; a certificate
// still works; a key that is expired, signed by another key, without an
// expiry or without roles is refused, saying which.
func TestAPIKeysAndCertificatesShareOneAuthorizer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, []net.IP{net.IPv4(127, 0, 0, 1)}, "worker-1", pki.RoleWorker)
	require.NoError(t, err)
	idp := apikeytest.New(t, "k1")
	signer, other := idp.Key, idp.Stranger

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{
		FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: filepath.Join(dir, "state"),
		SearchAttributes: testAttributes, Logger: zap.NewNop(),
		TLS:     &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA},
		APIKeys: &stackspec.APIKeys{JWKS: idp.URL, Issuer: "https://idp.example", Audience: "temporal"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })

	key := func(k *ecdsa.PrivateKey, claims jwt.MapClaims) string { return idp.Sign(t, k, claims) }
	exp := time.Now().Add(time.Hour).Unix()
	claims := func(sub string, roles ...string) jwt.MapClaims {
		return jwt.MapClaims{"sub": sub, "iss": "https://idp.example", "aud": "temporal", "exp": exp, RolesClaim: roles}
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(files.CA)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	serverOnly := &tls.Config{RootCAs: pool, ServerName: "temporal.internal", MinVersion: tls.VersionTLS12}
	dial := func(conf *tls.Config, apiKey string) workflowservice.WorkflowServiceClient {
		opts := client.Options{HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()), ConnectionOptions: client.ConnectionOptions{TLS: conf}}
		if apiKey != "" {
			opts.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
		}
		c, err := client.DialContext(ctx, opts)
		require.NoError(t, err, "the health check is open to every client")
		t.Cleanup(c.Close)
		return c.WorkflowService()
	}
	ns := s.Namespace()
	describe := func(c workflowservice.WorkflowServiceClient) error {
		_, err := c.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		return err
	}
	refused := func(t *testing.T, err error, want string) {
		t.Helper()
		var denied *serviceerror.PermissionDenied
		require.True(t, errors.As(err, &denied), "want a refusal, got %v", err)
		require.Contains(t, denied.Reason, want)
	}

	app := dial(serverOnly, key(signer, claims("orders-app", pki.RoleIntake)))
	_, err = app.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace: ns, WorkflowId: "order-7-shipped", RequestId: "order-7-shipped",
		WorkflowType: &commonpb.WorkflowType{Name: contract.WorkflowName}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue},
		WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	})
	require.NoError(t, err, "an API key with the intake's role starts SendSMS")
	// As the SDK starts a run (zero timeouts are none); with a priority,
	// not as the starter does.
	_, err = app.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace: ns, WorkflowId: "order-8-shipped", RequestId: "order-8-shipped",
		WorkflowType: &commonpb.WorkflowType{Name: contract.WorkflowName}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue},
		WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowExecutionTimeout: durationpb.New(0), WorkflowRunTimeout: durationpb.New(0), WorkflowTaskTimeout: durationpb.New(0),
	})
	require.NoError(t, err, "zero timeouts are none")
	_, err = app.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace: ns, WorkflowId: "order-9-shipped", RequestId: "order-9-shipped",
		WorkflowType: &commonpb.WorkflowType{Name: contract.WorkflowName}, TaskQueue: &taskqueuepb.TaskQueue{Name: contract.TaskQueue},
		WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Priority:                 &commonpb.Priority{PriorityKey: 1},
		CompletionCallbacks:      []*commonpb.Callback{{}},
	})
	refused(t, err, "may start SendSMS runs as the starter does, without completion_callbacks, priority: that takes smsorch-admin")
	_, err = app.TerminateWorkflowExecution(ctx, &workflowservice.TerminateWorkflowExecutionRequest{Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "order-7-shipped"}})
	refused(t, err, `the API key of "orders-app" (smsorch-intake) may not call TerminateWorkflowExecution: that takes smsorch-admin`)

	conf, err := files.ClientTLS("temporal.internal")
	require.NoError(t, err)
	require.NoError(t, describe(dial(conf, "")), "a worker's certificate still works")

	expired := claims("orders-app", pki.RoleIntake)
	expired["exp"] = time.Now().Add(-10 * time.Minute).Unix()
	refused(t, describe(dial(serverOnly, key(signer, expired))), "the API key expired at ")
	refused(t, describe(dial(serverOnly, key(other, claims("mallory", pki.RoleAdmin)))), "the API key is not one this Temporal takes (crypto/ecdsa: verification error): it takes JWTs signed by a key of its JWKS (--temporal-api-keys-jwks)")
	unknownKid := jwt.NewWithClaims(jwt.SigningMethodES256, claims("mallory", pki.RoleAdmin))
	unknownKid.Header["kid"] = "k2"
	signed, err := unknownKid.SignedString(signer)
	require.NoError(t, err)
	refused(t, describe(dial(serverOnly, signed)), "its signing key (kid) is not in the JWKS")
	hmac, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("mallory", pki.RoleAdmin)).SignedString([]byte("a secret the server does not know"))
	require.NoError(t, err)
	refused(t, describe(dial(serverOnly, hmac)), "it is signed with HS256 (ES256 and RS256 are taken)")
	otherAudience := claims("orders-app", pki.RoleIntake)
	otherAudience["aud"] = "billing"
	refused(t, describe(dial(serverOnly, key(signer, otherAudience))), `the API key of "orders-app" is not for the audience temporal`)
	// Issued to another client that also lists this audience (OpenID
	// Connect Core 3.1.3.7): refused; issued to this one, taken.
	for _, c := range []struct {
		aud any
		azp string
	}{{[]any{"temporal", "billing"}, ""}, {"temporal", "billing"}, {[]any{"temporal", "billing"}, "billing"}} {
		cross := claims("orders-app", pki.RoleIntake)
		cross["aud"] = c.aud
		if c.azp != "" {
			cross["azp"] = c.azp
		}
		refused(t, describe(dial(serverOnly, key(signer, cross))), "was issued to another client (azp) than temporal")
	}
	ours := claims("orders-app", pki.RoleIntake)
	ours["aud"], ours["azp"] = []any{"temporal", "billing"}, "temporal"
	require.NoError(t, describe(dial(serverOnly, key(signer, ours))), "issued to this audience, and for another too")
	// Clocks a little apart take a key; a key from the future, or long
	// expired, not.
	skewed := claims("orders-app", pki.RoleIntake)
	skewed["iat"], skewed["nbf"] = time.Now().Add(30*time.Second).Unix(), time.Now().Add(30*time.Second).Unix()
	skewed["exp"] = time.Now().Add(-30 * time.Second).Unix()
	require.NoError(t, describe(dial(serverOnly, key(signer, skewed))), "issued by a clock 30 s ahead, or just expired: within the leeway")
	future := claims("orders-app", pki.RoleIntake)
	future["iat"] = time.Now().Add(10 * time.Minute).Unix()
	refused(t, describe(dial(serverOnly, key(signer, future))), "in this server's future: check the clocks of its issuer and of this server")
	notYet := claims("orders-app", pki.RoleIntake)
	notYet["nbf"] = time.Now().Add(10 * time.Minute).Unix()
	refused(t, describe(dial(serverOnly, key(signer, notYet))), "the API key is not valid before ")
	stringExp := claims("orders-app", pki.RoleIntake)
	stringExp["exp"] = "tomorrow"
	refused(t, describe(dial(serverOnly, key(signer, stringExp))), `the API key's expiry ("exp") is not a number of seconds since 1970`)
	noExp := claims("orders-app", pki.RoleIntake)
	delete(noExp, "exp")
	refused(t, describe(dial(serverOnly, key(signer, noExp))), `the API key of "orders-app" has no expiry ("exp", in seconds since 1970): give it one`)
	otherIssuer := claims("orders-app", pki.RoleIntake)
	otherIssuer["iss"] = "https://elsewhere.example"
	refused(t, describe(dial(serverOnly, key(signer, otherIssuer))), "is not issued by https://idp.example")
	refused(t, describe(dial(serverOnly, key(signer, claims("orders-app")))), `the API key of "orders-app" names no role: give it a "smsorch_roles" claim`)
	stranger := dial(serverOnly, "")
	refused(t, describe(stranger), "DescribeNamespace needs a client certificate of this cluster's CA or an API key")
	_, err = stranger.GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{})
	require.NoError(t, err, "the health check and GetSystemInfo answer a client with neither (docs/security.md)")
	// A key, when given, is who calls, even beside a certificate.
	refused(t, describe(dial(conf, "not-a-jwt")), "the API key is not one this Temporal takes")
	// A key sent in plain gRPC reaches nothing: the frontend speaks TLS only.
	plain, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()),
		Credentials:       client.NewAPIKeyStaticCredentials(key(signer, claims("orders-app", pki.RoleIntake))),
		ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}})
	if err == nil {
		err = describe(plain.WorkflowService())
		plain.Close()
	}
	require.Error(t, err)
	var denied *serviceerror.PermissionDenied
	require.False(t, errors.As(err, &denied), "refused before any call: %v", err)
}

// API keys are refused at start where they could not be trusted: a key
// set fetched in plain off loopback, none at all, or keys without an
// issuer and an audience to check.
func TestAPIKeysNeedAKeySetTheServerCanTrust(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, nil, "admin", pki.RoleAdmin)
	require.NoError(t, err)
	tlsFiles := &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		keys stackspec.APIKeys
		tls  *TLS
		want string
	}{
		{stackspec.APIKeys{JWKS: "http://idp.example/jwks.json", Issuer: "i", Audience: "a"}, tlsFiles, "plain HTTP off loopback"},
		{stackspec.APIKeys{JWKS: "file://host/jwks.json", Issuer: "i", Audience: "a"}, tlsFiles, "is not file:///ABSOLUTE/PATH"},
		{stackspec.APIKeys{JWKS: "https://idp.example/jwks.json"}, tlsFiles, "API keys need the issuer and the audience"},
		{stackspec.APIKeys{JWKS: "https://idp.example/jwks.json", Issuer: "i", Audience: "a"}, nil, "API keys need TLS"},
		{stackspec.APIKeys{JWKS: closed.URL, Issuer: "i", Audience: "a"}, tlsFiles, "read the API keys' signing keys"},
		{stackspec.APIKeys{JWKS: "file://" + files.CA, Issuer: "i", Audience: "a"}, tlsFiles, "is not a JSON Web Key Set"},
	} {
		_, err := Start(context.Background(), Config{FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: filepath.Join(dir, "state"), TLS: tc.tls, APIKeys: &tc.keys})
		require.ErrorContains(t, err, tc.want, tc.keys.JWKS)
	}
}

// handshake makes a TLS connection to addr and reads from it briefly: a
// server that refuses the client's certificate says so in an alert; one
// that takes it waits for the client to speak (no error).
func handshake(addr string, conf *tls.Config) error {
	conf = conf.Clone()
	conf.NextProtos = []string{"h2"} // gRPC's
	conn, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		return nil
	}
	return err
}
