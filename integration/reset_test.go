package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// history reads a run's events.
func history(t *testing.T, key, runID string) []*historypb.HistoryEvent {
	t.Helper()
	return historyOn(t, stack.Client, key, runID)
}

// historyOn is history through another stack's client.
func historyOn(t *testing.T, c client.Client, key, runID string) []*historypb.HistoryEvent {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), key, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// historyWith waits until the current run's history holds an event of
// type, and returns the history then.
func historyWith(t *testing.T, key string, typ enumspb.EventType, within time.Duration) []*historypb.HistoryEvent {
	t.Helper()
	return historyWithOn(t, stack.Client, key, typ, within)
}

// historyWithOn is historyWith through another stack's client.
func historyWithOn(t *testing.T, c client.Client, key string, typ enumspb.EventType, within time.Duration) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	require.Eventually(t, func() bool {
		events = historyOn(t, c, key, "")
		for _, ev := range events {
			if ev.GetEventType() == typ {
				return true
			}
		}
		return false
	}, within, 20*time.Millisecond, "no %s in the history of %s", typ, key)
	return events
}

// firstTaskCompleted is the first workflow task completed after the event
// that after picks (or the run's first one, after nil): a reset point.
func firstTaskCompleted(t *testing.T, events []*historypb.HistoryEvent, after func(*historypb.HistoryEvent) bool) int64 {
	t.Helper()
	seen := after == nil
	for _, ev := range events {
		if !seen {
			seen = after(ev)
			continue
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return ev.GetEventId()
		}
	}
	t.Fatalf("no workflow task completed after the point asked for in %d events", len(events))
	return 0
}

// reset resets the event's current run to the workflow task completed
// at eventID, as the web UI's Reset does, and returns the new run's id.
func reset(t *testing.T, key string, eventID int64) string {
	t.Helper()
	return resetOn(t, stack, key, eventID)
}

// resetOn is reset on another stack.
func resetOn(t *testing.T, a *app.App, key string, eventID int64) string {
	t.Helper()
	d, err := a.Client.DescribeWorkflowExecution(context.Background(), key, "")
	require.NoError(t, err)
	resp, err := a.Client.WorkflowService().ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 a.Namespace,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: key, RunId: d.GetWorkflowExecutionInfo().GetExecution().GetRunId()},
		Reason:                    "operator reset after a bug fix",
		WorkflowTaskFinishEventId: eventID,
		RequestId:                 uuid.NewString(),
	})
	require.NoError(t, err)
	return resp.GetRunId()
}

// settledAs waits for the ledger to hold the event's outcome.
func settledAs(t *testing.T, key string) string {
	t.Helper()
	return settledOn(t, stack.Ledger, key)
}

// settledOn is settledAs for another stack's ledger.
func settledOn(t *testing.T, l ledger.Ledger, key string) string {
	t.Helper()
	var outcome string
	require.Eventually(t, func() bool {
		e, err := l.Event(context.Background(), key)
		outcome = e.Outcome
		return err == nil && outcome != ""
	}, 30*time.Second, 100*time.Millisecond, "the ledger never settled %s", key)
	return outcome
}

// A Temporal reset starts a new run of the same workflow id, which
// replays the old run's claim of the event: the ledger names the old run
// as its holder. At each point an operator may reset to, the new run
// takes the event over and the event still ends with exactly one message
// and a settled ledger.
func TestAResetRunTakesTheEventOverAtEveryPoint(t *testing.T) {
	t.Run("after acceptance", func(t *testing.T) {
		t.Parallel()
		in := input(provider.Bird, newKey("shipped"))
		run, err := start(context.Background(), in)
		require.NoError(t, err)
		res, err := result(t, run)
		require.NoError(t, err)
		require.Equal(t, contract.Delivered, res.State, res.Reason)
		events := history(t, in.Key, run.GetRunID())
		point := firstTaskCompleted(t, events, func(ev *historypb.HistoryEvent) bool {
			return ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
		})
		newRun := reset(t, in.Key, point)
		res, err = result(t, stack.Client.GetWorkflow(context.Background(), in.Key, newRun))
		require.NoError(t, err, res.Reason)
		require.Equal(t, contract.Delivered, res.State, res.Reason)
		require.Len(t, messages(provider.Bird, in.Key), 1, "one message, whatever the reset")
		require.Equal(t, "Delivered", settledAs(t, in.Key))
	})
	t.Run("while awaiting a decision", func(t *testing.T) {
		t.Parallel()
		key := resetWhileAwaiting(t)
		res, err := result(t, stack.Client.GetWorkflow(context.Background(), key, ""))
		require.NoError(t, err, res.Reason)
		require.Equal(t, contract.Delivered, res.State, res.Reason)
		require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
		require.Contains(t, timelineText(status(t, key)), "taking the event over", "the resend was fenced, and the run took the event over")
		require.Len(t, eventMessages(key), 1, "one message for the event under all its keys")
		require.Equal(t, "Delivered", settledAs(t, key))
	})
	t.Run("mid-retry", func(t *testing.T) {
		t.Parallel()
		in := input(provider.Bird, newKey("shipped"))
		fault(t, simulator.Fault{Kind: simulator.Error5xx, Provider: "bird", Key: in.Key, Count: 4})
		_, err := start(context.Background(), in)
		require.NoError(t, err)
		// Reset while the Send activity is still being retried.
		events := historyWith(t, in.Key, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 10*time.Second)
		newRun := reset(t, in.Key, firstTaskCompleted(t, events, nil))
		res, err := result(t, stack.Client.GetWorkflow(context.Background(), in.Key, newRun))
		require.NoError(t, err, res.Reason)
		require.Equal(t, contract.Delivered, res.State, res.Reason)
		require.Len(t, messages(provider.Bird, in.Key), 1, "one message, whatever the reset")
		require.Equal(t, "Delivered", settledAs(t, in.Key))
	})
}

// resetWhileAwaiting resets an event awaiting a decision to its first
// workflow task and resends from the new run, which must take the event
// over first; it returns the key once the new run ended.
func resetWhileAwaiting(t *testing.T) string {
	t.Helper()
	in := downPastTheWindow(t, provider.Bird)
	// The point after the send ended: the new run keeps the old run's
	// claim (Prepare's marker), so the ledger fences its first send.
	point := firstTaskCompleted(t, history(t, in.Key, ""), func(ev *historypb.HistoryEvent) bool {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			return true
		}
		return false
	})
	newRun := reset(t, in.Key, point)
	require.Eventually(t, func() bool {
		d, err := stack.Client.DescribeWorkflowExecution(context.Background(), in.Key, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetExecution().GetRunId() == newRun && status(t, in.Key).State == contract.AwaitingDecision
	}, 60*time.Second, 200*time.Millisecond)
	// The fault is on the event key only: the resend key goes through.
	require.NoError(t, stack.Client.SignalWorkflow(context.Background(), in.Key, newRun, contract.SignalResend, decision(in.Key, map[string]any{"reason": "customer called", "by": "olga"})))
	// The resend is fenced, the run takes the event over, sends, and
	// looks once more after the late-effect horizon (31 s) before it
	// settles: more than result's minute on a loaded machine.
	_, _ = resultWithin(t, stack.Client.GetWorkflow(context.Background(), in.Key, newRun), 3*time.Minute)
	return in.Key
}

// unknownThen401 starts an event whose first attempt takes effect
// without an answer that can be replayed (a 500 after the send), and
// every later one a 401, as after a credential rotation. It runs on a
// stack of its own with a 30 s replay window: the test's premise is that
// the first attempt runs within the window, and on a loaded machine the
// shared stack's server dispatched a first Send more than 9 s late (the
// run then rightly said nothing was sent).
func unknownThen401(t *testing.T, p provider.Name) (*app.App, contract.Input, client.WorkflowRun) {
	t.Helper()
	pol := policy
	if p == provider.Sendy {
		pol = pacedPolicy
	}
	pol.ReplayWindow = 30 * time.Second
	own := ownStack(t, pol, 13)
	in := unknownThen401Input(t, p, own.Sim)
	run, err := startOn(context.Background(), own.Client, in)
	require.NoError(t, err)
	return own, in, run
}

// unknownThen401Input is the event of unknownThen401, with its faults
// added to s.
func unknownThen401Input(t *testing.T, p provider.Name, s *simulator.Listening) contract.Input {
	t.Helper()
	in := input(p, newKey("shipped"))
	require.NoError(t, s.AddFault(simulator.Fault{Kind: simulator.Unstored, Provider: string(p), Key: in.Key, Count: 1}))
	require.NoError(t, s.AddFault(simulator.Fault{Kind: simulator.Unauthorized, Provider: string(p), Key: in.Key, Rate: 1}))
	return in
}

// An attempt that took effect without an answer, then a 401: the run
// does not end Failed. It searches once the first attempt can no longer
// take effect, finds the message and follows it to delivery.
func TestA401AfterAnUnknownAttemptFindsTheMessage(t *testing.T) {
	t.Parallel()
	own, in, run := unknownThen401(t, provider.Bird)
	res, err := resultOn(t, own.Client, run, 90*time.Second)
	require.NoError(t, err, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Len(t, own.Sim.Messages(simulator.Filter{Provider: string(provider.Bird), Key: in.Key}), 1)
	require.Equal(t, "Delivered", settledOn(t, own.Ledger, in.Key))
}

// The same at Sendy, which cannot be searched without a message id: the
// run awaits a decision with the outcome unknown, and a cancel says an
// SMS may have gone out, in the result and in the ledger.
func TestA401AfterAnUnknownSendyAttemptIsNotFailed(t *testing.T) {
	t.Parallel()
	own, in, run := unknownThen401(t, provider.Sendy)
	s := awaitStateOn(t, own.Client, in.Key, contract.AwaitingDecision, 90*time.Second)
	require.Contains(t, s.Reason, "the outcome is unknown")
	require.NoError(t, own.Client.SignalWorkflow(context.Background(), in.Key, "", contract.SignalCancel, decision(in.Key, map[string]any{"reason": "will call the customer", "by": "pia"})))
	res, _ := resultOn(t, own.Client, run, time.Minute)
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.OutcomeUnknown, res.Reason)
	require.Len(t, own.Sim.Messages(simulator.Filter{Provider: string(provider.Sendy), Key: in.Key}), 1, "the first attempt did send")
	e, err := own.Ledger.Event(context.Background(), in.Key)
	require.NoError(t, err)
	require.Equal(t, "Cancelled", e.Outcome)
	require.Contains(t, e.Reason, "may have gone out")
}

// resetAccepted starts a Bird event, lets its first run be accepted,
// then, before that run settles, adds the faults (each limited to the
// event's key) and resets the run to its first workflow task. It returns
// the input and the new run's id.
func resetAccepted(t *testing.T, faults ...simulator.Fault) (contract.Input, string) {
	t.Helper()
	return resetAcceptedOn(t, stack, faults...)
}

// resetAcceptedOn is resetAccepted on another stack.
func resetAcceptedOn(t *testing.T, a *app.App, faults ...simulator.Fault) (contract.Input, string) {
	t.Helper()
	in := input(provider.Bird, newKey("shipped"))
	// Delivered late: the Send's first look finds it not delivered yet,
	// so the run is accepted and not settled when it is reset.
	require.NoError(t, a.Sim.AddFault(simulator.Fault{Kind: simulator.SlowDelivery, Provider: "bird", Key: in.Key, Delay: simulator.Duration(5 * time.Second)}))
	_, err := startOn(context.Background(), a.Client, in)
	require.NoError(t, err)
	events := historyWithOn(t, a.Client, in.Key, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 20*time.Second)
	require.Len(t, a.Sim.Messages(simulator.Filter{Provider: "bird", Key: in.Key}), 1)
	for _, f := range faults {
		f.Provider, f.Key = "bird", in.Key
		require.NoError(t, a.Sim.AddFault(f))
	}
	return in, resetOn(t, a, in.Key, firstTaskCompleted(t, events, nil))
}

// resetThen401 resets an accepted run with the credential rotated away:
// every later request of the key is refused with 401.
func resetThen401(t *testing.T) (contract.Input, string) {
	t.Helper()
	return resetAccepted(t, simulator.Fault{Kind: simulator.Unauthorized, Rate: 1})
}

// resetThenLookupsDown resets an accepted run on a with every send of
// its key answered 503 until the key's window closes and every read of
// its messages failing: the new run's search before any resend fails.
// Once the new run follows the message the ledger holds, reads work
// again. A failed read of Bird's list fails every search whose page
// holds the key's message: the parallel tests take a stack of their own.
func resetThenLookupsDown(t *testing.T, a *app.App) (contract.Input, string) {
	t.Helper()
	in, newRun := resetAcceptedOn(t, a, simulator.Fault{Kind: simulator.Unavailable, Rate: 1}, simulator.Fault{Kind: simulator.LookupsDown, Rate: 1})
	require.Eventually(t, func() bool {
		s, err := queryState(context.Background(), a.Client, in.Key)
		return err == nil && strings.Contains(timelineText(s), "the ledger holds bird's accepted answer")
	}, time.Minute, 100*time.Millisecond, "the new run did not follow the message the ledger holds")
	a.Sim.ClearFaultsFor(in.Key)
	return in, newRun
}

// The run a reset made cannot send (503 until its key's window closes)
// nor search (every read fails) where the run it replaced was accepted.
// The ledger holds Bird's accepted answer: the run follows that message
// instead of awaiting a decision with the outcome unknown, and is
// delivered once reads work again (the simulation's seed 8121, where a
// cancellation then ended the run Cancelled; fixed in SendSMS version 1).
func TestAResetRunWhoseSearchFailsFollowsTheMessageTheLedgerHolds(t *testing.T) {
	t.Parallel()
	own := ownStack(t, policy, 17)
	in, newRun := resetThenLookupsDown(t, own)
	res, err := resultOn(t, own.Client, own.Client.GetWorkflow(context.Background(), in.Key, newRun), 2*time.Minute)
	require.NoError(t, err, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.False(t, res.OutcomeUnknown, res.Reason)
	old := own.Sim.Messages(simulator.Filter{Provider: "bird", Key: in.Key})
	require.Len(t, old, 1, "one message, and no second send")
	require.Equal(t, []string{old[0].ID}, res.MessageIDs)
	require.Equal(t, "Delivered", settledOn(t, own.Ledger, in.Key))
}

// A run that a reset made is refused (401) where the run it replaced was
// accepted: it does not end Failed. The ledger holds the old run's
// message, so the run searches, finds it alive and follows it (the
// deterministic simulation's seed 2245, fixed in version 7).
func TestAResetRunThatIsRefusedFollowsTheMessageTheOldRunSent(t *testing.T) {
	t.Parallel()
	in, newRun := resetThen401(t)
	res, err := resultWithin(t, stack.Client.GetWorkflow(context.Background(), in.Key, newRun), 2*time.Minute)
	require.NoError(t, err, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	old := messages(provider.Bird, in.Key)
	require.Len(t, old, 1, "one message, and no second send")
	require.Equal(t, []string{old[0].ID}, res.MessageIDs)
	require.Contains(t, timelineText(status(t, in.Key)), "the ledger holds message "+old[0].ID)
	require.Equal(t, "Delivered", settledAs(t, in.Key))
}

// A Sendy attempt takes effect without a stored answer (a 500), and the
// retry makes a second message: the run reports a possible duplicate,
// since Sendy cannot be searched by key. An operator resets the run to
// its first workflow task before it settled: the new run's Send gets a
// replay of the second message, and its own attempts look certain. It
// still reports the possible duplicate, which the Send wrote to the
// ledger when it returned (the cluster drill's seed 3 found a reset run
// that did not: a silent duplicate).
func TestAResetRunStillReportsAPossibleDuplicateItsPredecessorFound(t *testing.T) {
	t.Parallel()
	in := input(provider.Sendy, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.Unstored, Provider: "sendy", Key: in.Key, Count: 1})
	_, err := start(context.Background(), in)
	require.NoError(t, err)
	// The Send completed with the second message; the run now waits out
	// the late-effect horizon before it settles.
	events := historyWith(t, in.Key, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, 30*time.Second)
	newRun := reset(t, in.Key, firstTaskCompleted(t, events, nil))
	res, err := resultWithin(t, stack.Client.GetWorkflow(context.Background(), in.Key, newRun), 2*time.Minute)
	require.NoError(t, err, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Len(t, messages(provider.Sendy, in.Key), 2, "the unstored attempt and the retry each made a message")
	require.True(t, res.PossibleDuplicate, "the reset run reports what its predecessor found: %s", res.Reason)
}
