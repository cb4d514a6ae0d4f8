package bench

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// A recorded delivered Bird run, counted: one start, one Send attempt
// that sends and looks the message up once (found delivered, so no
// status activity follows), the ledger's claim as a local activity in
// the first workflow task, and two upserts. This recording was started
// without search attributes, so the run sets SmsKey, SmsProvider and
// SmsState=Sending itself (event 5); a run started by our starter carries
// them in the start request and skips that upsert: 13 events, 4 actions.
func TestCostCountsARecordedDeliveredRun(t *testing.T) {
	f, err := os.Open("../../../workflows/testdata/bird-delivered.json")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	c := costOf(h.GetEvents())
	require.Equal(t, Cost{Events: 14, WorkflowTasks: 2, ActivityAttempts: 1, LocalActivityTasks: 1, Markers: 1, Upserts: 2, Actions: 5}, c)
	lines := describe(h.GetEvents())
	require.Len(t, lines, 14)
	require.Equal(t, "  1 WorkflowExecutionStarted", lines[0])
	require.Contains(t, lines, "  7 ActivityTaskScheduled Send on sms-bird")
	require.Contains(t, lines, "  6 MarkerRecorded LocalActivity")
	require.Equal(t, " 14 WorkflowExecutionCompleted", lines[13])
}

// The report prints each scenario's cost and one delivered run's
// history, and marks the run's events and actions against the targets.
func TestTheReportShowsWhatARunCosts(t *testing.T) {
	rep := report()
	rep.Rows[0].Cost = &Cost{Events: 11, WorkflowTasks: 2, ActivityAttempts: 1, Actions: 2}
	rep.Rows[1].Cost = &Cost{Events: 21, WorkflowTasks: 3, ActivityAttempts: 2, LocalActivityTasks: 2, Markers: 2, Upserts: 2, Actions: 7}
	rep.Rows[1].History = []string{"  1 WORKFLOW_EXECUTION_STARTED", " 21 WORKFLOW_EXECUTION_COMPLETED"}
	got := map[string]Target{}
	for _, x := range rep.Targets() {
		got[x.Name] = x
	}
	require.False(t, got["history events of a delivered Bird run"].Met, "21 is over 16")
	require.False(t, got["billable actions of a delivered Bird run"].Met, "7 is over 5")
	var b bytes.Buffer
	rep.Print(&b)
	for _, want := range []string{"actions as Temporal Cloud counts them", "the history of one delivered run (ours):", " 21 WORKFLOW_EXECUTION_COMPLETED"} {
		require.Contains(t, b.String(), want)
	}
}
