package starter

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/contract"
)

// Each row of List reads its state and its provider from its own search
// attributes: a provider that is missing or does not decode is empty,
// never the state's value, and nothing carries over from the row before.
func TestRunOfReadsEachAttributeOnItsOwn(t *testing.T) {
	t.Parallel()
	payload := func(v any) *commonpb.Payload {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		return p
	}
	state, prov := contract.StateAttribute.GetName(), contract.ProviderAttribute.GetName()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	exec := func(key string, attrs map[string]*commonpb.Payload) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{
			Execution:        &commonpb.WorkflowExecution{WorkflowId: key, RunId: "run-" + key},
			Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			StartTime:        timestamppb.New(start),
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: attrs},
		}
	}
	for _, tc := range []struct {
		name     string
		attrs    map[string]*commonpb.Payload
		state    contract.State
		provider string
	}{
		{"both", map[string]*commonpb.Payload{state: payload("AwaitingDecision"), prov: payload("bird")}, contract.AwaitingDecision, "bird"},
		{"no provider", map[string]*commonpb.Payload{state: payload("Sending")}, contract.Sending, ""},
		{"provider does not decode", map[string]*commonpb.Payload{state: payload("Delivered"), prov: payload(42)}, contract.Delivered, ""},
		{"no state", map[string]*commonpb.Payload{prov: payload("sendy")}, "", "sendy"},
		{"state does not decode", map[string]*commonpb.Payload{state: payload([]string{"Sending"}), prov: payload("sendy")}, "", "sendy"},
		{"none", nil, "", ""},
	} {
		r := runOf(exec("order-1-shipped", tc.attrs))
		require.Equal(t, tc.state, r.State, tc.name)
		require.Equal(t, tc.provider, r.Provider, tc.name)
		require.Equal(t, "order-1-shipped", r.Key, tc.name)
		require.Equal(t, "run-order-1-shipped", r.RunID, tc.name)
		require.Equal(t, "Running", r.Status, tc.name)
		require.Equal(t, start, r.StartTime, tc.name)
		require.True(t, r.CloseTime.IsZero(), tc.name)
	}
	closed := exec("order-2-shipped", nil)
	closed.CloseTime = timestamppb.New(start.Add(time.Minute))
	require.Equal(t, start.Add(time.Minute), runOf(closed).CloseTime)
}

// signalRecorder is a Temporal client that records the decisions sent
// to it.
type signalRecorder struct {
	client.Client
	name    string
	payload any
	update  client.UpdateWorkflowOptions
}

func (r *signalRecorder) SignalWorkflow(_ context.Context, _, _, name string, arg any) error {
	r.name, r.payload = name, arg
	return nil
}

func (r *signalRecorder) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	r.update = o
	return nil, errors.New("recorded")
}

// A decision leaves the starter bound to its event with an id of its
// own, by signal (with everything a person gave, the provider too) and
// by update; one that names another event is refused before any call.
func TestDecisionsLeaveBoundToTheirEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &signalRecorder{}
	s := New(rec)
	d := contract.Decision{Action: contract.ActionResend, Reason: "Bird is down", By: "alice", Force: true, Provider: "sendy"}
	require.NoError(t, s.Signal(ctx, "order-1-shipped", d))
	require.Equal(t, contract.SignalResend, rec.name)
	raw, err := json.Marshal(rec.payload)
	require.NoError(t, err)
	got, err := contract.ParseSignal(rec.name, raw)
	require.NoError(t, err)
	require.NoError(t, got.CheckBinding("order-1-shipped"))
	require.Equal(t, d.Provider, got.Provider)
	require.True(t, got.Force)
	first := got.ID

	require.NoError(t, s.Signal(ctx, "order-1-shipped", d))
	raw, _ = json.Marshal(rec.payload)
	got, _ = contract.ParseSignal(rec.name, raw)
	require.NotEqual(t, first, got.ID, "each decision gets an id of its own")

	d.ID = "ticket-4711"
	_, err = s.Decide(ctx, "order-1-shipped", d)
	require.ErrorContains(t, err, "recorded")
	sent := rec.update.Args[0].(contract.Decision)
	require.Equal(t, "order-1-shipped", sent.Key)
	require.Equal(t, "ticket-4711", sent.ID, "an id the caller chose is kept")

	rec.name = ""
	d.Key = "order-2-shipped"
	require.ErrorContains(t, s.Signal(ctx, "order-1-shipped", d), `the decision is for event "order-2-shipped"`)
	require.Empty(t, rec.name, "nothing was sent")
}
