package workflows

// The paths of versionLedgerMessages, which the deterministic simulation
// (simulation/) found in version 6, one test each: each fails on version 6
// (pinned below) and passes since.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// resumed mocks Prepare as the claim of a run that a reset made: the run
// it replaced tried the event key and got message m-old.
func (h *harness) resumed() {
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}},
		Messages: []activities.SentMessage{{Key: key, ID: "m-old"}},
	}, nil).Once()
}

// Simulation seeds 2245 (Bird) and 2777 (Sendy): the run a reset replaced
// was accepted as m-old; the new run's attempt of the same key is refused
// (401, a credential rotated). The new run does not end Failed: the
// ledger holds m-old, so the run searches, finds it alive and follows it.
func TestARefusalWhileTheLedgerHoldsAMessageFollowsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumed()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) { r.Reason = "bird: 401 unauthorized" })
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 2,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}},
			Messages: []activities.SentMessage{{Key: key, ID: "m-old"}}}
	}
	calls := h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-old", Reference: key, Status: provider.StatusSent}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{"m-old"}, res.MessageIDs)
	require.NotEmpty(t, calls.calls)
	require.Contains(t, calls.calls[0].KnownIDs, "m-old", "the search looks up the id the ledger holds")
	require.Equal(t, "Delivered", h.settled.Outcome)
	require.Equal(t, "m-old", h.settled.MessageID)
	require.True(t, timelineHas(h.query(), "the ledger holds message m-old"))
}

// Simulation seed 1120: a reset after a resend. The new run resumes the
// resend key and is delivered under it; its result also lists the first
// message (failed), which the ledger holds.
func TestAResumingRunListsTheMessagesTheLedgerHolds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resend := key + "~resend-1"
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: resend, FirstAttemptAt: h.start.Add(time.Hour)}},
		Messages: []activities.SentMessage{{Key: key, ID: "m-first"}, {Key: resend, ID: "m-resend"}},
	}, nil).Once()
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(h.request(resend), nil)
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return accepted("m-resend", attempt, provider.Replayed), nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{"m-first", "m-resend"}, res.MessageIDs)
	require.Equal(t, "m-resend", h.settled.MessageID)
}

// Simulation seed 2235: the run a reset replaced settled the event before
// the reset; the new run, replaying past its claim, settles too. The
// ledger keeps the outcome that knows most of a message that went out
// (ledger.Rank): here the old run's Delivered (m-A) stands over the new
// run's Failed (its resend refused, 401). Since version 7 the run ends in
// the ledger's outcome, lists its message and says what it found itself,
// so the result and the ledger agree; version 6 ended Failed beside a
// ledger that says Delivered.
func TestASettleThatFindsAnotherOutcomeTakesTheLedgers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.settled = &activities.SettleInput{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-A", MessageID: "m-A"}
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) { r.Reason = "bird: 401 unauthorized" })
	})
	h.run()
	res, _ := h.result()
	require.Equal(t, "Delivered", h.settled.Outcome, "the ledger keeps the delivered message")
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Contains(t, res.Reason, "the ledger already held the outcome Delivered")
	require.Contains(t, res.Reason, "found: Failed")
	require.Equal(t, []string{"m-A"}, res.MessageIDs)
}

// A run whose own outcome knows more than the ledger's corrects it: the
// old run settled Unconfirmed, the new one follows m-1 to delivery and
// settles Delivered, which replaces it (ledger.Rank).
func TestASettleThatKnowsMoreReplacesTheLedgers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.settled = &activities.SettleInput{Key: key, Outcome: string(contract.Unconfirmed), Reason: "message m-1 turned up after the run had ended Cancelled", MessageID: "m-1"}
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return accepted("m-1", attempt, provider.Accepted), nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, "Delivered", h.settled.Outcome)
	require.Equal(t, []string{"m-1"}, res.MessageIDs)
}

// Simulation seed 5161: the run that settled the event proved a
// duplicate (two live messages, one of them found by a search, so in no
// attempt's row). A run that finds the event settled (a reset to its
// first task, a second start) reports what the ledger keeps of it: every
// message and the duplicate.
func TestARunThatFindsTheEventSettledReportsWhatTheLedgerKeeps(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		Settled: &ledger.Event{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-1", MessageID: "m-1",
			SettledAt: h.start.Add(time.Hour), MessageIDs: []string{"m-1", "m-2"}, Findings: []string{ledger.FindingDuplicateSend}},
		Messages: []activities.SentMessage{{Key: key, ID: "m-1"}},
	}, nil).Once()
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Duplicate, res.State, res.Reason)
	require.Equal(t, []string{"m-1", "m-2"}, res.MessageIDs)
	require.True(t, res.DuplicateSend, "the proven duplicate is reported again")
}

// The settle of a run since version 7 keeps every message it knows and
// what it reports with the event, for a run that finds it settled.
func TestTheSettleKeepsTheMessagesAndFindings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.unknownThenAccepted("m-2", "bird: timed out")
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
			{ID: "m-1", Reference: key, Status: provider.StatusSent}, {ID: "m-2", Reference: key, Status: provider.StatusSent}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.True(t, res.DuplicateSend, res.Reason)
	require.ElementsMatch(t, []string{"m-1", "m-2"}, h.settled.MessageIDs)
	require.Contains(t, h.settled.Findings, ledger.FindingDuplicateSend)
}

// Simulation seed 9906: many attempts end without a certain answer and
// no search succeeds before a person cancels. Each may have sent its own
// SMS: the run says more than one may have gone out (a possible
// duplicate), not only that one may have.
func TestManyUnresolvedAttemptsAreAPossibleDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	last := h.start.Add(h.policy.SendBudget() - time.Minute)
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: last, Uncertain: 9}
	}
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, errors.New("bird: 503 on the list endpoint")
	})
	h.signal(h.policy.SendBudget()+4*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.OutcomeUnknown)
	require.True(t, res.PossibleDuplicate, res.Reason)
	require.Contains(t, h.settled.Findings, ledger.FindingPossibleDuplicate)
}
