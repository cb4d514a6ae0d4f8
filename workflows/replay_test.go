package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// (see integration/record_test.go). A change to SendSMS that would break
// runs already in flight fails here.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			fh, err := os.Open(f)
			require.NoError(t, err)
			defer func() { _ = fh.Close() }()
			h, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
			require.NoError(t, err)
			// SendSMS refuses a workflow id other than the event key, so the
			// replay runs under the original id rather than the replayer's default.
			var in contract.Input
			started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in))
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(SendSMS, workflow.RegisterOptions{Name: contract.WorkflowName})
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(
				logging.SDK(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))), h,
				worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: in.Key, RunID: started.GetOriginalExecutionRunId()}}))
		})
	}
}
