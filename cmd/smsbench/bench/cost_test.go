package bench

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// A recorded delivered Bird run, counted: one start, the send (one
// attempt) and the status lookup (two: its first attempt is the wait
// before the first lookup, which fails on purpose and is billed like any
// attempt), local activities in two workflow tasks, three upserts.
func TestCostCountsARecordedDeliveredRun(t *testing.T) {
	f, err := os.Open("../../../workflows/testdata/bird-delivered.json")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	c := costOf(h.GetEvents())
	require.Equal(t, Cost{Events: 22, WorkflowTasks: 3, ActivityAttempts: 3, LocalActivityTasks: 2, Markers: 2, Upserts: 3, Actions: 9}, c)
	lines := describe(h.GetEvents())
	require.Len(t, lines, 22)
	require.Equal(t, "  1 WorkflowExecutionStarted", lines[0])
	require.Contains(t, lines, "  7 ActivityTaskScheduled Send on sms-bird")
	require.Contains(t, lines, "  6 MarkerRecorded LocalActivity")
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
