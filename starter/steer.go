package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/keys"
)

func newRequestID() string { return uuid.NewString() }

// checkKey validates a key given to a steering call.
func checkKey(key string) error {
	if _, err := keys.ParseEvent(key); err != nil {
		return invalid("key", err)
	}
	return nil
}

func notFound(key string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s (never started, or closed longer ago than the namespace retention)", ErrNotFound, key)
	}
	return err
}

// Status queries the run's state: the result so far and its timeline.
func (s *Starter) Status(ctx context.Context, key string) (contract.Status, error) {
	if err := checkKey(key); err != nil {
		return contract.Status{}, err
	}
	v, err := s.c.QueryWorkflow(ctx, key, "", contract.QueryState)
	if err != nil {
		return contract.Status{}, notFound(key, fmt.Errorf("query the run of %s: %w", key, err))
	}
	var st contract.Status
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("read the state of %s: %w", key, err)
	}
	return st, nil
}

// Decide applies a resend or cancel decision through the workflow's update:
// the answer is synchronous, and a decision that does not fit the run's
// state is refused at once (the error says why) without touching history.
// It needs a worker to answer; Signal queues a decision without one.
func (s *Starter) Decide(ctx context.Context, key string, d contract.Decision) (contract.DecisionAck, error) {
	if err := checkKey(key); err != nil {
		return contract.DecisionAck{}, err
	}
	d, err := bind(key, d)
	if err != nil {
		return contract.DecisionAck{}, err
	}
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: key, UpdateName: contract.UpdateDecide, Args: []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// The server answers an update to a closed run with NotFound too.
		if ex, derr := s.describe(ctx, key, ""); derr == nil {
			return contract.DecisionAck{}, fmt.Errorf("refused: the run of %s has ended (%s, %s); a %s applies only to a run awaiting a decision", key, ex.State, ex.Status, d.Action)
		}
	}
	if err != nil {
		return contract.DecisionAck{}, notFound(key, fmt.Errorf("%s %s: %w", d.Action, key, err))
	}
	var ack contract.DecisionAck
	if err := h.Get(ctx, &ack); err != nil {
		return ack, fmt.Errorf("%s %s: %w", d.Action, key, err)
	}
	return ack, nil
}

// Signal sends a decision as the plain resend/cancel signal, exactly as the
// Temporal UI's signal form or CLI does. It is durable: the run applies it
// (or records why it refused it, in its timeline) when a worker runs.
func (s *Starter) Signal(ctx context.Context, key string, d contract.Decision) error {
	if err := checkKey(key); err != nil {
		return err
	}
	d, err := bind(key, d)
	if err != nil {
		return err
	}
	// The signal's payload is the decision without its action, which
	// the signal's name carries.
	payload := d
	payload.Action = ""
	err = s.c.SignalWorkflow(ctx, key, "", d.Action, payload)
	return notFound(key, err)
}

// bind checks a decision and binds it to the run of key: it names the
// event and gets an id of its own unless the caller chose one (a ticket
// number, or the id of a decision being retried), so the run applies it
// once and no other run applies it at all.
func bind(key string, d contract.Decision) (contract.Decision, error) {
	if d.Key == "" {
		d.Key = key
	}
	if d.ID == "" {
		d.ID = newRequestID()
	}
	if err := errors.Join(d.Validate(), d.CheckProvider(), d.CheckBinding(key)); err != nil {
		return d, invalid("decision", err)
	}
	return d, nil
}

// Wait blocks until the run ends and returns its Result. A run that ended
// Failed or Cancelled returns its Result and the run's error.
func (s *Starter) Wait(ctx context.Context, key string) (contract.Result, error) {
	if err := checkKey(key); err != nil {
		return contract.Result{}, err
	}
	var res contract.Result
	err := s.c.GetWorkflow(ctx, key, "").Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	if r, ok := contract.ResultFromError(err); ok {
		return r, err
	}
	return res, notFound(key, err)
}

// Run is one row of List.
type Run struct {
	Key      string         `json:"key"`
	RunID    string         `json:"runId"`
	State    contract.State `json:"state"`
	Provider string         `json:"provider"`
	// Status is Temporal's: Running, Completed, Failed, Canceled, ...
	Status    string    `json:"status"`
	StartTime time.Time `json:"startTime"`
	CloseTime time.Time `json:"closeTime"`
}

// List returns the event runs in a state (all when state is empty), newest
// first, through the visibility query the Temporal UI uses:
// SmsState="AwaitingDecision".
func (s *Starter) List(ctx context.Context, state contract.State, limit int) ([]Run, error) {
	q := fmt.Sprintf("WorkflowType = %q", contract.WorkflowName)
	if state != "" {
		q += fmt.Sprintf(" AND %s = %q", contract.StateAttribute.GetName(), string(state))
	}
	var out []Run
	var token []byte
	for {
		resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.namespace, Query: q, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs (%s): %w", q, err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, runOf(e))
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// runOf turns one execution of the visibility list into a Run. Each
// attribute is read on its own: a run without a provider attribute (or
// with one that does not decode) lists an empty provider, not the value
// of another attribute.
func runOf(e *workflowpb.WorkflowExecutionInfo) Run {
	r := Run{
		Key: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Status: e.GetStatus().String(),
		StartTime: e.GetStartTime().AsTime(),
	}
	if e.GetCloseTime() != nil {
		r.CloseTime = e.GetCloseTime().AsTime()
	}
	fields := e.GetSearchAttributes().GetIndexedFields()
	r.State = contract.State(keyword(fields, contract.StateAttribute.GetName()))
	r.Provider = keyword(fields, contract.ProviderAttribute.GetName())
	return r
}

// keyword decodes one Keyword search attribute into a fresh string: ""
// when the attribute is missing or does not decode as a string. (The
// converter answers a missing payload with no error and leaves its target
// as it was, so a variable shared between attributes would keep the last
// one's value.)
func keyword(fields map[string]*commonpb.Payload, name string) string {
	p := fields[name]
	if p == nil {
		return ""
	}
	var v string
	if converter.GetDefaultDataConverter().FromPayload(p, &v) != nil {
		return ""
	}
	return v
}

// knownStates are the values List accepts.
var knownStates = []contract.State{contract.Sending, contract.Reconciling, contract.Accepted, contract.AwaitingDecision,
	contract.Delivered, contract.Failed, contract.Cancelled, contract.Duplicate, contract.Unconfirmed}

// ParseState accepts a state name in any case.
func ParseState(s string) (contract.State, error) {
	for _, k := range knownStates {
		if strings.EqualFold(s, string(k)) {
			return k, nil
		}
	}
	names := make([]string, len(knownStates))
	for i, k := range knownStates {
		names[i] = string(k)
	}
	return "", invalid("state", fmt.Errorf("%q is not a state: use one of %s", s, strings.Join(names, ", ")))
}
