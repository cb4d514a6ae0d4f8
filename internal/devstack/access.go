//go:build !race

package devstack

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

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

// access maps client certificates and API keys to their roles
// (claimMapper) and decides each call (authorizer).
type access struct {
	namespace string
	// self is the servers' own certificate (DER): the cluster itself.
	self []byte
	// keys, when set, verifies API keys (JWTs signed by a key of the
	// JWKS); issuer and audience must be theirs.
	keys             *jwks
	issuer, audience string
}

// RolesClaim is the claim of an API key (a JWT) that lists its roles.
const RolesClaim = "smsorch_roles"

// roles is what a caller's certificate or API key grants, the claims'
// Extensions.
type roles struct {
	// who names the caller in a refusal: `the client certificate
	// "CN=…"` or `the API key of "sub"`.
	who     string
	subject string
	set     []string
	apiKey  bool
	// refused says why an API key is not taken.
	refused string
}

func (r roles) has(role string) bool { return slices.Contains(r.set, role) }

// GetClaims reads the roles of the API key, or else of the verified
// client certificate. A key, when given, is who calls: a web UI that
// holds a certificate of its own passes on the key of the person using
// it. Errors are not returned (the server would answer them with no
// reason): a key that is not taken is refused by Authorize, saying why.
func (a *access) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	if info.AuthToken != "" {
		r := a.apiKey(info.AuthToken, time.Now())
		return &authorization.Claims{Subject: r.subject, Extensions: r, AuthType: "jwt"}, nil
	}
	cert := authorization.PeerCert(info.TLSConnection)
	if cert == nil {
		return &authorization.Claims{}, nil
	}
	return &authorization.Claims{Subject: cert.Subject.String(), Extensions: rolesOf(cert, a.self), AuthType: "mtls"}, nil
}

// clockLeeway is how far apart the clocks of an API key's issuer and of
// this server may be.
const clockLeeway = time.Minute

// apiKey verifies a "Bearer KEY" header and reads the key's roles.
func (a *access) apiKey(header string, now time.Time) roles {
	r := roles{apiKey: true, who: "the API key", subject: "API key"}
	if a.keys == nil {
		r.refused = "this Temporal takes no API keys: present a client certificate of its CA, or start the server with --temporal-api-keys-jwks"
		return r
	}
	kind, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(kind, "bearer") {
		r.refused = `the authorization header is not "Bearer API_KEY"`
		return r
	}
	claims := jwt.MapClaims{}
	// The signature here; the times below, with a minute's leeway for
	// clocks apart (an identity provider's a second ahead of this
	// server's would refuse a login made now).
	_, err := jwt.NewParser(jwt.WithoutClaimsValidation()).ParseWithClaims(token, claims, a.keyFunc)
	exp, expIsNumber := claims["exp"].(float64)
	_, expGiven := claims["exp"]
	nbf, nbfIsNumber := claims["nbf"].(float64)
	iat, iatIsNumber := claims["iat"].(float64)
	at := func(secs float64) time.Time { return time.Unix(int64(secs), 0) }
	// The times of a key nobody can vouch for say nothing: the signature
	// is checked first.
	switch {
	case err != nil:
	case expGiven && !expIsNumber:
		r.refused = `the API key's expiry ("exp") is not a number of seconds since 1970`
		return r
	case expIsNumber && now.After(at(exp).Add(clockLeeway)):
		r.refused = fmt.Sprintf("the API key expired at %s: make a new one (in the web UI: log in again)", at(exp).UTC().Format(time.RFC3339))
		return r
	case nbfIsNumber && now.Add(clockLeeway).Before(at(nbf)):
		r.refused = fmt.Sprintf("the API key is not valid before %s: check the clocks of its issuer and of this server", at(nbf).UTC().Format(time.RFC3339))
		return r
	case iatIsNumber && now.Add(clockLeeway).Before(at(iat)):
		r.refused = fmt.Sprintf("the API key was issued at %s, in this server's future: check the clocks of its issuer and of this server", at(iat).UTC().Format(time.RFC3339))
		return r
	}
	switch {
	case err != nil:
		// The reasons name no more of what the caller sent than 80
		// characters: they are logged and returned.
		r.refused = fmt.Sprintf("the API key is not one this Temporal takes (%s): it takes JWTs signed by a key of its JWKS (--temporal-api-keys-jwks)", truncate(err.Error()))
		return r
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		r.refused = `the API key names no subject ("sub"): say whose it is`
		return r
	}
	r.who, r.subject = fmt.Sprintf("the API key of %q", truncate(sub)), sub
	list, listed := claims[RolesClaim].([]any)
	switch {
	case !expIsNumber:
		r.refused = fmt.Sprintf(`%s has no expiry ("exp", in seconds since 1970): give it one`, r.who)
	case !claims.VerifyIssuer(a.issuer, true):
		r.refused = fmt.Sprintf("%s is not issued by %s", r.who, a.issuer)
	case !claims.VerifyAudience(a.audience, true):
		r.refused = fmt.Sprintf("%s is not for the audience %s", r.who, a.audience)
	case !forThisAudienceAlone(claims, a.audience):
		// OpenID Connect Core 3.1.3.7: a token for several audiences
		// names the one it was issued to (azp); one issued to another
		// client that merely lists this audience is not ours.
		r.refused = fmt.Sprintf("%s was issued to another client (azp) than %s, or lists several audiences without saying which it was issued to", r.who, a.audience)
	case claims[RolesClaim] != nil && !listed:
		r.refused = fmt.Sprintf("%s has a %q claim that is not a list of role names", r.who, RolesClaim)
	}
	for _, v := range list {
		if role, ok := v.(string); ok && slices.Contains(pki.Roles, role) && !slices.Contains(r.set, role) {
			r.set = append(r.set, role)
		}
	}
	return r
}

// forThisAudienceAlone says a token was issued to audience: its
// authorized party, when it names one, is audience, and a token for
// several audiences names one.
func forThisAudienceAlone(claims jwt.MapClaims, audience string) bool {
	azp, hasAzp := claims["azp"].(string)
	if hasAzp && azp != audience {
		return false
	}
	if list, ok := claims["aud"].([]any); ok && len(list) > 1 && !hasAzp {
		return false
	}
	return true
}

// keyFunc finds the public key that signed an API key, by its kid.
func (a *access) keyFunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	switch t.Method.(type) {
	case *jwt.SigningMethodECDSA, *jwt.SigningMethodRSA:
		return a.keys.key(t.Method.Alg(), kid)
	}
	return nil, fmt.Errorf("it is signed with %s (ES256 and RS256 are taken)", truncate(t.Method.Alg()))
}

// truncate shortens what a caller sent to 80 characters, for a refusal.
func truncate(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}

func rolesOf(cert *x509.Certificate, self []byte) roles {
	r := roles{subject: cert.Subject.String()}
	r.who = fmt.Sprintf("the client certificate %q", r.subject)
	if bytes.Equal(cert.Raw, self) || slices.Contains(cert.Subject.OrganizationalUnit, pki.RoleServer) {
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

// Authorize decides one call. A refusal is returned as an error whose
// message is its reason (the server passes it through with
// frontend.exposeAuthorizerErrors): the SDK, the temporal CLI and the web
// UI show a PermissionDenied's message, and a bare "Request
// unauthorized." would not say which role the call takes.
func (a *access) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	if authorization.IsHealthCheckAPI(target.APIName) {
		return allow, nil
	}
	var r roles
	if claims != nil {
		r, _ = claims.Extensions.(roles)
	}
	if reason := a.refusal(r, target); reason != "" {
		return authorization.Result{Decision: authorization.DecisionDeny, Reason: reason}, serviceerror.NewPermissionDenied(reason, reason)
	}
	return allow, nil
}

var allow = authorization.Result{Decision: authorization.DecisionAllow}

// refusal is why r may not make the call, "" when it may.
func (a *access) refusal(r roles, target *authorization.CallTarget) string {
	method := api.MethodName(target.APIName)
	if r.subject == "" {
		if a.keys != nil {
			return fmt.Sprintf("%s needs a client certificate of this cluster's CA or an API key", method)
		}
		return fmt.Sprintf("%s needs a client certificate of this cluster's CA", method)
	}
	if r.refused != "" {
		return r.refused
	}
	if len(r.set) == 0 && r.apiKey {
		return fmt.Sprintf("%s names no role: give it a %q claim listing some of %s (docs/security.md)", r.who, RolesClaim, strings.Join(pki.Roles, ", "))
	}
	if len(r.set) == 0 {
		return fmt.Sprintf("%s names no role: give it an OU of %s (docs/security.md)", r.who, strings.Join(pki.Roles, ", "))
	}
	if r.has(pki.RoleAdmin) {
		return ""
	}
	meta := api.GetMethodMetadata(target.APIName)
	roleList := strings.Join(r.set, ", ")
	// A call in a namespace names the stack's. DescribeNamespace by id
	// (no name) says what ListNamespaces, a read of the cluster, says.
	if meta.Scope == api.ScopeNamespace && target.Namespace != a.namespace && !(method == "DescribeNamespace" && target.Namespace == "") {
		return fmt.Sprintf("%s (%s) may call %s in namespace %s only; namespace %q takes %s", r.who, roleList, method, a.namespace, truncate(target.Namespace), pki.RoleAdmin)
	}
	if meta.Access == api.AccessReadOnly && meta.Scope != api.ScopeUnknown {
		return ""
	}
	workflowService := strings.HasPrefix(target.APIName, api.WorkflowServicePrefix)
	if r.has(pki.RoleWorker) && slices.Contains(workerAPIs, method) && workflowService {
		if done, ok := target.Request.(*workflowservice.RespondWorkflowTaskCompletedRequest); ok {
			return a.workerCommands(r, done)
		}
		return ""
	}
	if r.has(pki.RoleOperator) && slices.Contains(operatorAPIs, method) && workflowService {
		return ""
	}
	if r.has(pki.RoleIntake) && method == "StartWorkflowExecution" && workflowService {
		if start, ok := target.Request.(*workflowservice.StartWorkflowExecutionRequest); ok {
			return a.intakeStart(r, start)
		}
	}
	return fmt.Sprintf("%s (%s) may not call %s: that takes %s", r.who, roleList, method, rolesFor(method))
}

// workerCommands refuses what a workflow task could do beyond its own
// run: start a child, signal or cancel another run, call a Nexus
// operation, or continue as a new run (of any type, queue, cron or
// timeout). SendSMS does none of these; a worker's certificate that did
// would act as an intake or an operator.
func (a *access) workerCommands(r roles, done *workflowservice.RespondWorkflowTaskCompletedRequest) string {
	for _, c := range done.GetCommands() {
		switch c.GetCommandType() {
		case enumspb.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION, enumspb.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION, enumspb.COMMAND_TYPE_SCHEDULE_NEXUS_OPERATION,
			enumspb.COMMAND_TYPE_REQUEST_CANCEL_NEXUS_OPERATION:
			return fmt.Sprintf("%s (%s) may not complete a workflow task with %s: a workflow of this stack acts on its own run only; that takes %s", r.who, strings.Join(r.set, ", "), c.GetCommandType(), pki.RoleAdmin)
		}
	}
	return ""
}

// intakeStart allows the start the starter makes, and only it: a
// SendSMS run on the stack's task queue that refuses a second run of a
// closed event and joins a running one, with its input, memo, search
// attributes, summary and header. Anything else could end a running run
// (TERMINATE_EXISTING, TERMINATE_IF_RUNNING), cut it short (timeouts),
// send again or late (a cron, a delay, a retry policy) or reach it
// elsewhere (callbacks, links, eager start, versioning, priority).
// Timeouts of zero are none: the SDK sends them so.
func (a *access) intakeStart(r roles, s *workflowservice.StartWorkflowExecutionRequest) string {
	if name := s.GetWorkflowType().GetName(); name != contract.WorkflowName {
		return fmt.Sprintf("%s (%s) may start %s runs only, not %s", r.who, strings.Join(r.set, ", "), contract.WorkflowName, truncate(name))
	}
	var wrong string
	switch {
	case s.GetTaskQueue().GetName() != contract.TaskQueue || s.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY:
		wrong = "a task queue other than " + contract.TaskQueue
	case s.GetWorkflowIdReusePolicy() != enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE:
		wrong = "an id reuse policy other than REJECT_DUPLICATE"
	case s.GetWorkflowIdConflictPolicy() != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING:
		wrong = "an id conflict policy other than USE_EXISTING"
	case s.GetWorkflowExecutionTimeout().AsDuration() != 0 || s.GetWorkflowRunTimeout().AsDuration() != 0 || s.GetWorkflowTaskTimeout().AsDuration() != 0:
		wrong = "timeouts"
	}
	if wrong == "" {
		rest := proto.Clone(s).(*workflowservice.StartWorkflowExecutionRequest)
		rest.Namespace, rest.WorkflowId, rest.WorkflowType, rest.TaskQueue = "", "", nil, nil
		rest.Input, rest.Identity, rest.RequestId, rest.Memo, rest.SearchAttributes, rest.UserMetadata, rest.Header = nil, "", "", nil, nil, nil, nil
		rest.WorkflowIdReusePolicy, rest.WorkflowIdConflictPolicy = 0, 0
		rest.WorkflowExecutionTimeout, rest.WorkflowRunTimeout, rest.WorkflowTaskTimeout = nil, nil, nil
		if !proto.Equal(rest, &workflowservice.StartWorkflowExecutionRequest{}) {
			var set []string
			rest.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
				set = append(set, string(f.Name()))
				return true
			})
			wrong = strings.Join(set, ", ")
		}
	}
	if wrong == "" {
		return ""
	}
	return fmt.Sprintf("%s (%s) may start %s runs as the starter does, without %s: that takes %s", r.who, strings.Join(r.set, ", "), contract.WorkflowName, wrong, pki.RoleAdmin)
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
