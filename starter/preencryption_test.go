package starter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/acme/smsorch/codec/unsealed"
	"github.com/acme/smsorch/contract"
)

// preEncryptionTemporal is what a worker's own client (codec.ApplyRefusingUnsealed,
// the client the intake's starter uses) answers for an event whose run was
// started before encryption was turned on: its input arrives marked unsealed.
type preEncryptionTemporal struct {
	client.Client
	input contract.Input
}

type preEncryptionService struct {
	workflowservice.WorkflowServiceClient
}

func (preEncryptionService) StartWorkflowExecution(context.Context, *workflowservice.StartWorkflowExecutionRequest, ...grpc.CallOption) (*workflowservice.StartWorkflowExecutionResponse, error) {
	return &workflowservice.StartWorkflowExecutionResponse{RunId: "run-1", Started: false}, nil
}

func (f *preEncryptionTemporal) WorkflowService() workflowservice.WorkflowServiceClient {
	return preEncryptionService{}
}

func (f *preEncryptionTemporal) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}}, nil
}

type preEncryptionEvents struct{ list []*historypb.HistoryEvent }

func (e *preEncryptionEvents) HasNext() bool { return len(e.list) > 0 }
func (e *preEncryptionEvents) Next() (*historypb.HistoryEvent, error) {
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}

func (f *preEncryptionTemporal) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	input, err := converter.GetDefaultDataConverter().ToPayloads(f.input)
	if err != nil {
		panic(err)
	}
	for _, p := range input.GetPayloads() { // what codec's refusing Decode makes of a plain payload
		*p = *unsealed.Mark(p)
	}
	return &preEncryptionEvents{list: []*historypb.HistoryEvent{{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: input},
		},
	}}}
}

// The same event posted again while its pre-encryption run is in
// retention (and the workers no longer run --accept-unsealed) must join
// it (or be a ConflictError), never fail: a compare that could not read
// the marked input would have the intake answer 503 "send the same event
// again" to every retry until the run leaves retention.
func TestTheCompareReadsAPreEncryptionRun(t *testing.T) {
	t.Parallel()
	f := &preEncryptionTemporal{input: contract.Input{Key: "order-58213-shipped", Provider: "bird", To: "+31612345678", Text: "Order 58213 has shipped."}}
	res, err := New(f).Send(context.Background(), Event{Kind: "order", ID: "58213", Stage: "shipped", To: "+31612345678", Text: "Order 58213 has shipped.", Provider: "bird"})
	require.NoError(t, err)
	require.False(t, res.Started)
	require.Equal(t, "run-1", res.RunID)
}
