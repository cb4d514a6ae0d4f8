//go:build !race

package devstack

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/pki"
)

// With mutual TLS the server knows who calls: the client certificate its
// CA signed. The roles that certificate names (pki.Role*, as OUs of its
// subject) decide what the caller may do, each the least it needs:
//
//   - worker: poll the namespace's task queues, complete, fail and
//     heartbeat tasks, and read;
//   - intake: start SendSMS runs, and read;
//   - operator: read, and signal and update runs (the decisions);
//   - admin: anything, in any namespace (terminate, reset, retention,
//     search attributes).
//
// Reading is what the server's own API metadata calls read-only
// (describe, list, count, get, query), in the stack's namespace and of
// the cluster. The servers' own certificate (the system worker, the
// stack's setup and its web UI) is admin. A certificate with no role is
// refused every call. Refusals name the role and the API, so that the
// person reading them knows which certificate to use.

// access maps client certificates to their roles (claimMapper) and
// decides each call (authorizer).
type access struct {
	namespace string
	// self is the servers' own certificate (DER): the cluster itself.
	self []byte
}

// roles is what a caller's certificate grants, the claims' Extensions.
type roles struct {
	subject string
	set     []string
}

func (r roles) has(role string) bool { return slices.Contains(r.set, role) }

// GetClaims reads the roles of the verified client certificate.
func (a *access) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	cert := authorization.PeerCert(info.TLSConnection)
	if cert == nil {
		return &authorization.Claims{}, nil
	}
	return &authorization.Claims{Subject: cert.Subject.String(), Extensions: rolesOf(cert, a.self), AuthType: "mtls"}, nil
}

func rolesOf(cert *x509.Certificate, self []byte) roles {
	r := roles{subject: cert.Subject.String()}
	if bytes.Equal(cert.Raw, self) {
		r.set = []string{pki.RoleAdmin}
		return r
	}
	for _, ou := range cert.Subject.OrganizationalUnit {
		if slices.Contains(pki.Roles, ou) && !slices.Contains(r.set, ou) {
			r.set = append(r.set, ou)
		}
	}
	return r
}

// workerAPIs are what a worker calls besides reading.
var workerAPIs = []string{
	"PollWorkflowTaskQueue", "RespondWorkflowTaskCompleted", "RespondWorkflowTaskFailed",
	"PollActivityTaskQueue", "RecordActivityTaskHeartbeat", "RecordActivityTaskHeartbeatById",
	"RespondActivityTaskCompleted", "RespondActivityTaskCompletedById",
	"RespondActivityTaskFailed", "RespondActivityTaskFailedById",
	"RespondActivityTaskCanceled", "RespondActivityTaskCanceledById",
	"RespondQueryTaskCompleted", "ResetStickyTaskQueue", "ShutdownWorker", "RecordWorkerHeartbeat",
}

// operatorAPIs are the decisions an operator sends besides reading.
var operatorAPIs = []string{"SignalWorkflowExecution", "UpdateWorkflowExecution", "PollWorkflowExecutionUpdate"}

// Authorize decides one call.
func (a *access) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	if authorization.IsHealthCheckAPI(target.APIName) {
		return allow, nil
	}
	var r roles
	if claims != nil {
		r, _ = claims.Extensions.(roles)
	}
	if reason := a.refusal(r, target); reason != "" {
		return authorization.Result{Decision: authorization.DecisionDeny, Reason: reason}, nil
	}
	return allow, nil
}

var allow = authorization.Result{Decision: authorization.DecisionAllow}

// refusal is why r may not make the call, "" when it may.
func (a *access) refusal(r roles, target *authorization.CallTarget) string {
	method := api.MethodName(target.APIName)
	if r.subject == "" {
		return fmt.Sprintf("%s needs a client certificate of this cluster's CA", method)
	}
	if len(r.set) == 0 {
		return fmt.Sprintf("the client certificate %q names no role: give it an OU of %s (docs/security.md)", r.subject, strings.Join(pki.Roles, ", "))
	}
	if r.has(pki.RoleAdmin) {
		return ""
	}
	meta := api.GetMethodMetadata(target.APIName)
	if target.Namespace != "" && target.Namespace != a.namespace {
		return fmt.Sprintf("the client certificate %q (%s) may call %s in namespace %s only; namespace %s takes %s", r.subject, strings.Join(r.set, ", "), method, a.namespace, target.Namespace, pki.RoleAdmin)
	}
	if meta.Access == api.AccessReadOnly && meta.Scope != api.ScopeUnknown {
		return ""
	}
	if r.has(pki.RoleWorker) && slices.Contains(workerAPIs, method) && strings.HasPrefix(target.APIName, api.WorkflowServicePrefix) {
		return ""
	}
	if r.has(pki.RoleOperator) && slices.Contains(operatorAPIs, method) && strings.HasPrefix(target.APIName, api.WorkflowServicePrefix) {
		return ""
	}
	if r.has(pki.RoleIntake) {
		if start, ok := target.Request.(*workflowservice.StartWorkflowExecutionRequest); ok {
			if start.GetWorkflowType().GetName() == contract.WorkflowName {
				return ""
			}
			return fmt.Sprintf("the client certificate %q (%s) may start %s runs only, not %s", r.subject, strings.Join(r.set, ", "), contract.WorkflowName, start.GetWorkflowType().GetName())
		}
	}
	return fmt.Sprintf("the client certificate %q (%s) may not call %s: that takes %s", r.subject, strings.Join(r.set, ", "), method, rolesFor(method))
}

// rolesFor names the roles that may call method, for a refusal.
func rolesFor(method string) string {
	switch {
	case slices.Contains(workerAPIs, method):
		return pki.RoleWorker + " or " + pki.RoleAdmin
	case slices.Contains(operatorAPIs, method):
		return pki.RoleOperator + " or " + pki.RoleAdmin
	case method == "StartWorkflowExecution":
		return pki.RoleIntake + " (" + contract.WorkflowName + " only) or " + pki.RoleAdmin
	}
	return pki.RoleAdmin
}
