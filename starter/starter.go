// Package starter is the Go API for application code: start the SMS of a
// business event, see its run, decide on it, wait for it.
//
//	s := starter.New(temporalClient)
//	res, err := s.Send(ctx, starter.Event{Kind: "order", ID: "58213", Stage: "shipped",
//		To: "+31612345678", Text: "Order 58213 has shipped.", Provider: "bird"})
//	// res.Started is true for the call that started the run; every other
//	// call for the same event gets the existing run (res.Started false).
//
// Everything is validated before anything starts. The run's id is the
// event key, with REJECT_DUPLICATE and USE_EXISTING, so a second start of
// the same event joins or is refused and never sends again; a second start
// with another recipient or text is a ConflictError, never a silent attach.
package starter

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/codec/unsealed"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/sms"
)

// Errors callers match with errors.Is (and errors.As for the types).
var (
	// ErrConflict: the key already has a run for a different message.
	ErrConflict = errors.New("event key already used for a different message")
	// ErrNotFound: no run for the key (never started, or past retention).
	ErrNotFound = errors.New("no run for this event key")
)

// ConflictError names what differs between the existing run and the event.
type ConflictError struct {
	Key   string
	Field string
	// Existing is the run that holds the key.
	Existing Existing
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %s already has a run (%s) with another %s; nothing was started. A different message is a different event: derive its own key",
		ErrConflict, e.Key, e.Existing.State, e.Field)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Existing describes a run found for a key.
type Existing struct {
	RunID string         `json:"runId"`
	State contract.State `json:"state"`
	// Status is Temporal's status of the run: Running, Completed, ...
	Status string `json:"status"`
}

// Result says what Send did.
type Result struct {
	Key   string `json:"key"`
	RunID string `json:"runId"`
	// Started is true when this call started the run; false when the
	// event's run already existed (running or closed) and nothing new started.
	Started bool           `json:"started"`
	State   contract.State `json:"state"`
	// Text is the encoding and segment count of the message.
	Text     sms.Text `json:"text"`
	Warnings []string `json:"warnings,omitempty"`
}

// Starter starts and steers event runs.
type Starter struct {
	c         client.Client
	namespace string
	identity  string
	now       func() time.Time
}

// Option configures a Starter.
type Option func(*Starter)

// WithNamespace sets the namespace (default "default", or what the client was dialled with).
func WithNamespace(ns string) Option { return func(s *Starter) { s.namespace = ns } }

// New returns a Starter over a connected Temporal client.
func New(c client.Client, opts ...Option) *Starter {
	host, _ := os.Hostname()
	s := &Starter{c: c, namespace: client.DefaultNamespace, identity: fmt.Sprintf("smsorch-starter@%s", host), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Send validates the event and starts its run, or finds the run that
// already exists for it.
func (s *Starter) Send(ctx context.Context, e Event) (Result, error) {
	return s.SendRequest(ctx, e, "")
}

// SendRequest is Send for a caller that can tell one request from its
// repeats (the HTTP intake, by the request's signature): requestID names
// the start request to Temporal, so the same requestID again is answered
// as the first was, Started true, while its run is the event's current
// one. An empty requestID is a new request each call.
func (s *Starter) SendRequest(ctx context.Context, e Event, requestID string) (Result, error) {
	plan, err := Validate(e, s.now())
	if err != nil {
		return Result{}, err
	}
	return s.start(ctx, plan, requestID)
}

// Start starts a validated plan. See Send.
func (s *Starter) Start(ctx context.Context, plan Plan) (Result, error) {
	return s.start(ctx, plan, "")
}

func (s *Starter) start(ctx context.Context, plan Plan, requestID string) (res Result, err error) {
	header, endSpan := traceStart(ctx, contract.WorkflowID(plan.Key))
	defer func() { endSpan(err) }()
	if requestID == "" {
		requestID = newRequestID()
	}
	in := plan.Input
	res = Result{Key: in.Key, Text: plan.Text, Warnings: plan.Warnings}
	dc := converter.GetDefaultDataConverter()
	input, err := dc.ToPayloads(in)
	if err != nil {
		return res, err
	}
	summary, err := dc.ToPayload(Summary(in))
	if err != nil {
		return res, err
	}
	details, err := dc.ToPayload(Details(plan))
	if err != nil {
		return res, err
	}
	fp, err := dc.ToPayload(fingerprint(in))
	if err != nil {
		return res, err
	}
	sa := map[string]*commonpb.Payload{}
	for name, v := range map[string]string{
		contract.StateAttribute.GetName():    string(contract.Sending),
		contract.ProviderAttribute.GetName(): in.Provider,
		contract.KeyAttribute.GetName():      in.Key,
	} {
		if sa[name], err = dc.ToPayload(v); err != nil {
			return res, err
		}
		sa[name].Metadata["type"] = []byte("Keyword")
	}
	// The raw request, because its answer says whether this call started
	// the run (USE_EXISTING answers an attach as a success).
	resp, err := s.c.WorkflowService().StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace:                s.namespace,
		WorkflowId:               contract.WorkflowID(plan.Key),
		WorkflowType:             &commonpb.WorkflowType{Name: contract.WorkflowName},
		TaskQueue:                &taskqueuepb.TaskQueue{Name: contract.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		Input:                    input,
		Identity:                 s.identity,
		RequestId:                requestID,
		WorkflowIdReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIdConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		SearchAttributes:         &commonpb.SearchAttributes{IndexedFields: sa},
		Memo:                     &commonpb.Memo{Fields: map[string]*commonpb.Payload{FingerprintMemo: fp}},
		UserMetadata:             &sdkpb.UserMetadata{Summary: summary, Details: details},
		Header:                   header,
	})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil && resp.GetStarted():
		res.RunID, res.Started, res.State = resp.GetRunId(), true, contract.Sending
		return res, nil
	case err == nil:
		res.RunID = resp.GetRunId()
	case errors.As(err, &already):
		res.RunID = already.RunId // closed within retention: REJECT_DUPLICATE refused a new run
	default:
		return res, fmt.Errorf("start the run of %s: %w (nothing was started; retrying is safe)", in.Key, err)
	}
	existing, field, err := s.compare(ctx, in, res.RunID)
	if err != nil {
		return res, err
	}
	res.State = existing.State
	if field != "" {
		return res, &ConflictError{Key: in.Key, Field: field, Existing: existing}
	}
	return res, nil
}

// Summary is the run's static summary in the Temporal UI, number masked.
func Summary(in contract.Input) string {
	return fmt.Sprintf("SMS %s to %s via %s", in.Key, sms.MaskPhone(in.To), in.Provider)
}

// Details are the run's static details in the Temporal UI: the facts of
// the event, without the text (it may be a one-time code).
func Details(p Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- key: `%s`\n- provider: %s\n- to: %s\n- text: %s\n", p.Input.Key, p.Input.Provider, sms.MaskPhone(p.Input.To), p.Text)
	if p.Input.From != "" {
		fmt.Fprintf(&b, "- sender: %s\n", p.Input.From)
	}
	if p.Input.Fallback != "" {
		fmt.Fprintf(&b, "- fallback: %s, only where %s's records prove it sent nothing\n", p.Input.Fallback, p.Input.Provider)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "- warning: %s\n", sms.MaskPhones(w))
	}
	fmt.Fprintf(&b, "\nDecide on a run awaiting a decision with the signal `%s` or `%s` and `%s`.\n", contract.SignalResend, contract.SignalCancel, contract.DecisionForm(p.Input.Key))
	return b.String()
}

// FingerprintMemo is the memo field in which the starter records the
// fingerprint of the message a run sends (see fingerprint). A second
// start of the same event compares it from the one describe that also
// reads the run's state; it is a payload like the input, sealed by the
// client's codec.
const FingerprintMemo = "smsorch-message"

// fingerprint identifies the message of an input: the event key and
// the provider, recipient, text and sender, the fields a second start is
// compared on, each exactly as given. Equal fingerprints are the same
// message; a different or missing one (a run started before the memo,
// or by other means) is decided by reading the run's input from its
// history, which also names the field.
func fingerprint(in contract.Input) string {
	h := sha256.New()
	for _, f := range []string{"smsorch-message/1", in.Key, in.Provider, in.To, in.Text, in.From} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return "v1:" + hex.EncodeToString(h.Sum(nil))
}

// compare reads the existing run's input and state; field names what
// differs from in ("" when it is the same message). A run that carries
// the fingerprint of the same message costs the describe alone.
func (s *Starter) compare(ctx context.Context, in contract.Input, runID string) (Existing, string, error) {
	existing, fp, err := s.describeWithFingerprint(ctx, in.Key, runID)
	if err != nil {
		return existing, "", err
	}
	if fp == fingerprint(in) {
		return existing, "", nil
	}
	it := s.c.GetWorkflowHistory(ctx, in.Key, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return existing, "", fmt.Errorf("the run %s of %s has no history", runID, in.Key)
	}
	first, err := it.Next()
	if err != nil {
		return existing, "", fmt.Errorf("read the run %s of %s: %w", runID, in.Key, err)
	}
	var was contract.Input
	// A run started before encryption was turned on arrives marked as
	// unsealed on a worker's client: it is only compared here, never
	// acted on, so it is read as it was written.
	input := &commonpb.Payloads{}
	for _, p := range first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads() {
		input.Payloads = append(input.Payloads, unsealed.Restored(p))
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(input, &was); err != nil {
		return existing, "", fmt.Errorf("read the input of run %s of %s: %w", runID, in.Key, err)
	}
	if r, err := sms.ParseRecipient(was.To); err == nil {
		was.To = r.E164 // a run started elsewhere may have been given another spelling
	}
	switch {
	case was.Key != in.Key:
		// A run under this event's id whose input names another event
		// (started by hand, or from another event's copied input) is
		// not this event's run: its workflow would refuse the key.
		return existing, "event key", nil
	case was.Provider != in.Provider:
		return existing, "provider", nil
	case was.To != in.To:
		return existing, "recipient", nil
	case was.Text != in.Text:
		return existing, "text", nil
	case strings.TrimSpace(was.From) != in.From:
		return existing, "sender", nil
	}
	return existing, "", nil
}

func (s *Starter) describe(ctx context.Context, key, runID string) (Existing, error) {
	ex, _, err := s.describeWithFingerprint(ctx, key, runID)
	return ex, err
}

// describeWithFingerprint is describe, with the message fingerprint the
// run carries in its memo ("" when it has none or it cannot be read).
func (s *Starter) describeWithFingerprint(ctx context.Context, key, runID string) (Existing, string, error) {
	d, err := s.c.DescribeWorkflowExecution(ctx, key, runID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return Existing{}, "", fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return Existing{}, "", fmt.Errorf("describe the run of %s: %w", key, err)
	}
	info := d.GetWorkflowExecutionInfo()
	var fp string
	if p := info.GetMemo().GetFields()[FingerprintMemo]; p != nil {
		// Read as written, as compare reads the input: a memo from
		// before encryption arrives marked on a worker's client. One
		// that does not decode leaves the compare to the history.
		if converter.GetDefaultDataConverter().FromPayload(unsealed.Restored(p), &fp) != nil {
			fp = ""
		}
	}
	ex := Existing{RunID: info.GetExecution().GetRunId(), Status: info.GetStatus().String()}
	// An open run's search attributes are its own: the server answers
	// them from the run's mutable state, as current as the state query,
	// without needing a worker. A closed run's may be answered from the
	// visibility store instead, or not at all where the server may not
	// fetch them from there; the result in its history holds the state
	// it ended in.
	ex.State = contract.State(keyword(info.GetSearchAttributes().GetIndexedFields(), contract.StateAttribute.GetName()))
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		if st := s.finalState(ctx, key, ex.RunID); st != "" {
			ex.State = st
		} else if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
			// Failed before it set a state of its own (its input
			// refused, say): the Sending the start set is not so.
			ex.State = contract.Failed
		}
	}
	return ex, fp, nil
}

// finalState is the state a closed run ended in, from its result in its
// history: a completed run's Result, or the Result a failed or cancelled
// run carries in its error; "" when it cannot be read. (A run that was
// terminated or timed out has none: its last search attribute stands.)
func (s *Starter) finalState(ctx context.Context, key, runID string) contract.State {
	var res contract.Result
	if err := s.c.GetWorkflow(ctx, key, runID).Get(ctx, &res); err != nil {
		res, _ = contract.ResultFromError(err)
	}
	return res.State
}
