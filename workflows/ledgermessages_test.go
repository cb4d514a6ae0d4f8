package workflows

// The messages of an event the ledger holds: paths the deterministic
// simulation (simulation/) found, one test each, where a run must follow,
// list or report a message the ledger holds, another run's included.

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

// rejected() searches whenever the ledger holds any message id of the
// event and no message is live (as above), including a message this very
// run saw fail: it is in the ledger, and failed, so not live.
//
// Path: m-1 is accepted and its delivery fails; a person resends inside
// the window (no search needed: the delivery failed), and the resend is
// refused with a 401 because the credential was rotated, which refuses
// the search too. Nothing was uncertain: the run should end Failed at
// once. Instead it "searches for a live one", the search fails, and the
// run awaits a decision claiming "an earlier attempt ended without a
// certain answer"; with no decision it ends, a deadline later, Failed
// with outcomeUnknown ("an SMS of the event may have gone out"), although
// every attempt of the event had a certain answer and the only message
// is one the run itself saw fail.
func TestARefusedResendAfterAFailedDeliveryIsNoUnknownOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.policy.DecisionDeadline = 2 * time.Hour
	resend := key + "~resend-1"
	h.prepared()
	h.planResends()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return accepted("m-1", attempt, provider.Accepted), nil
		}
		return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) {
			r.Reason, r.HTTPStatus = "bird: 401 unauthorized", 401
		})
	})
	h.statuses(provider.StatusFailed)
	// The ledger: m-1 under the event key (accepted, certain); the
	// resend key once it was tried (refused, certain).
	h.recall = func(in activities.RecallInput) activities.RecallOutput {
		out := activities.RecallOutput{
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}},
			Messages: []activities.SentMessage{{Key: key, ID: "m-1"}},
		}
		if in.SendKey == key {
			out.FirstAttemptAt, out.Attempts = h.start, 1
		} else {
			out.FirstAttemptAt, out.Attempts = h.start.Add(5*time.Minute), 1
			out.SendKeys = append(out.SendKeys, activities.SendKey{Key: resend, FirstAttemptAt: out.FirstAttemptAt})
		}
		return out
	}
	calls := h.searchesFail(searchDown())
	h.signal(5*time.Minute, contract.SignalResend, map[string]string{"reason": "delivery failed", "by": "erin"})
	h.run()
	res, _ := h.result()
	require.Equal(t, []string{key, resend}, res.KeysUsed)
	require.Equal(t, contract.Failed, res.State, res.Reason)
	require.False(t, res.OutcomeUnknown,
		"every attempt had a certain answer and the only message failed, yet the run says an SMS may have gone out (%d searches): %s", len(calls.calls), res.Reason)
	require.Less(t, h.env.Now().Sub(h.start), time.Hour,
		"the run awaited a decision after the refusal instead of ending: %s", res.Reason)
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
// run's Failed (its resend refused, 401). The run ends in the ledger's
// outcome, lists its message and says what it found itself, so the
// result and the ledger agree, rather than ending Failed beside a ledger
// that says Delivered.
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
	h.acceptsAs("m-1")
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

// A run that resumes the event lists every message id the ledger holds
// (seed 1120, TestAResumingRunListsTheMessagesTheLedgerHolds), but not a
// run that finds the event settled: Prepare returns before it reads the
// attempts when the event is settled, and prepare()'s (and takeOver()'s)
// Settled branch adds only the settled message id.
//
// Path: run A sent m-0 under the event key, its delivery failed, a
// person resent, and m-1 under ~resend-1 was delivered; A settled
// Delivered with m-1. An operator resets the workflow to its first
// workflow task: the new run's Prepare finds the event settled, and the
// run ends Duplicate with messageIds [m-1]. m-0, which the ledger holds
// and the provider holds (failed), is missing and the run does not say
// its outcome is unknown: the simulation's "unknown message" promise,
// broken on the same reset path where a resumed run keeps it.
// (Simulation seed 5161 is the same path with a proven duplicate that
// run A found: the reset run ends Duplicate with one of the two live
// messages and no duplicateSend; there the second id is in no ledger row
// at all, since the ledger's settle keeps one message id and no
// duplicate flag.)
func TestARunThatFindsTheEventSettledListsTheLedgersMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resend := key + "~resend-1"
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		Settled: &ledger.Event{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-1", MessageID: "m-1", SettledAt: h.start.Add(2 * time.Hour)},
		// Prepare reads the attempts of a settled event too.
		Messages: []activities.SentMessage{{Key: key, ID: "m-0"}, {Key: resend, ID: "m-1"}},
	}, nil).Once()
	// What the ledger holds of the event, had the run asked.
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: resend, FirstAttemptAt: h.start.Add(time.Hour)}},
			Messages: []activities.SentMessage{{Key: key, ID: "m-0"}, {Key: resend, ID: "m-1"}},
		}
	}
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Duplicate, res.State, res.Reason)
	require.False(t, res.OutcomeUnknown || res.PossibleDuplicate)
	require.Contains(t, res.MessageIDs, "m-0",
		"the ledger holds m-0 (failed at the provider) and the Duplicate result lists only %v", res.MessageIDs)
}

// The settle of a run keeps every message it knows and what it reports
// with the event, for a run that finds it settled.
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
	h.searchesFail(errors.New("bird: 503 on the list endpoint"))
	h.signal(h.policy.SendBudget()+4*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.OutcomeUnknown)
	require.True(t, res.PossibleDuplicate, res.Reason)
	require.Contains(t, h.settled.Findings, ledger.FindingPossibleDuplicate)
}
