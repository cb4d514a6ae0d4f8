package bench

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// Cost is what one run spends, counted from its history: the server's
// work (events, workflow tasks, activity attempts, timers, upserts,
// markers) and the billable actions Temporal Cloud would count for it.
//
// Actions follow Temporal Cloud's published categories
// (docs.temporal.io/cloud/actions): a workflow start, each activity
// attempt, the local activities of one workflow task together, each
// timer, signal, accepted update and search-attribute upsert. Version
// and side-effect markers are not actions. It is an estimate read from
// the history, as Temporal Cloud's own history view estimates; queries
// and heartbeats, which leave no event, are not in it.
type Cost struct {
	Events           int `json:"events"`
	WorkflowTasks    int `json:"workflowTasks"`
	ActivityAttempts int `json:"activityAttempts"`
	// LocalActivityTasks is the workflow tasks that ran local
	// activities (one action each, whatever their number).
	LocalActivityTasks int `json:"localActivityTasks"`
	Markers            int `json:"markers"`
	Timers             int `json:"timers"`
	Upserts            int `json:"upserts"`
	Signals            int `json:"signals"`
	Updates            int `json:"updates"`
	Actions            int `json:"actions"`
}

// localActivityMarker is the marker the Go SDK records for a local
// activity.
const localActivityMarker = "LocalActivity"

// costOf counts a run's history.
func costOf(events []*historypb.HistoryEvent) Cost {
	var c Cost
	c.Events = len(events)
	laInTask := false // the current workflow task's commands ran a local activity
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.Actions++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.WorkflowTasks++
			laInTask = false
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// One event for the attempt that ended the activity; its
			// number counts the attempts before it.
			n := int(max(e.GetActivityTaskStartedEventAttributes().GetAttempt(), 1))
			c.ActivityAttempts += n
			c.Actions += n
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			c.Markers++
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == localActivityMarker && !laInTask {
				laInTask = true
				c.LocalActivityTasks++
				c.Actions++
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.Timers++
			c.Actions++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.Upserts++
			c.Actions++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			c.Signals++
			c.Actions++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			c.Updates++
			c.Actions++
		}
	}
	return c
}

// history reads a run's whole history.
func history(ctx context.Context, c client.Client, workflowID string) ([]*historypb.HistoryEvent, error) {
	var out []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s: %w", workflowID, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// describe lists a history event by event, one line each: its id, its
// type, and the activity, marker or task queue it names.
func describe(events []*historypb.HistoryEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		line := fmt.Sprintf("%3d %s", e.GetEventId(), e.GetEventType())
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			a := e.GetActivityTaskScheduledEventAttributes()
			line += fmt.Sprintf(" %s on %s", a.GetActivityType().GetName(), a.GetTaskQueue().GetName())
		case e.GetActivityTaskStartedEventAttributes() != nil:
			line += fmt.Sprintf(" attempt %d", e.GetActivityTaskStartedEventAttributes().GetAttempt())
		case e.GetMarkerRecordedEventAttributes() != nil:
			line += " " + e.GetMarkerRecordedEventAttributes().GetMarkerName()
		}
		out = append(out, line)
	}
	return out
}

// printCosts writes what one run of each scenario cost, beside bare's,
// and the history of one delivered run of ours.
func (r Report) printCosts(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "per run (one run of each scenario, from its history; actions as Temporal Cloud counts them)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tscenario\thistory events\tworkflow tasks\tactivity attempts\tlocal-activity tasks\tmarkers\ttimers\tupserts\tsignals\tupdates\tactions\t")
	var shown []string
	for _, x := range r.Rows {
		if x.Cost == nil {
			continue
		}
		c := x.Cost
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", x.Backend, x.Scenario, c.Events, c.WorkflowTasks,
			c.ActivityAttempts, c.LocalActivityTasks, c.Markers, c.Timers, c.Upserts, c.Signals, c.Updates, c.Actions)
		if x.Scenario == ScenarioOurs && shown == nil {
			shown = x.History
		}
	}
	_ = tw.Flush()
	if len(shown) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "the history of one delivered run (ours):")
		for _, l := range shown {
			fmt.Fprintln(w, "  "+l)
		}
	}
}
