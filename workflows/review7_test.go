package workflows

// Review of version 7 (versionLedgerMessages). Each test fails on the
// code as it is; the comment says the path and what goes wrong.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// review7SearchDown is a search that fails (not retried, to keep the
// test short): the provider refuses it, as every request during a
// credential rotation.
func review7SearchDown() error {
	return temporal.NewNonRetryableApplicationError("bird: 401 unauthorized", "ProviderUnauthorized", nil)
}

// settled() since version 7 takes the ledger's outcome when another run
// of the workflow settled first, but not the ledger's message.
//
// Path: run A found message m-A (its search succeeded) and settled the
// event Delivered with m-A. An operator reset the workflow to a point
// where the send of the event key had ended with the outcome unknown;
// the new run B sends nothing more (so it is never fenced and never
// takes over, which is where the ledger's Settled would be read), every
// search B makes fails, and a person cancels. B settles: the ledger
// answers Delivered, m-A. Version 7 turns B into Delivered, but its
// messageIds stay empty: a Delivered result with no message, whose
// outcomeUnknown is still true, and without the ledger's message (the
// simulation's check "the ledger's message ... is not among the run's"
// is exactly this disagreement).
func TestReview7TheLedgersOutcomeIsTakenWithoutTheLedgersMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.settled = &activities.SettleInput{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-A", MessageID: "m-A"}
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 3, LastUncertainAt: h.start}
	}
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, review7SearchDown()
	})
	h.signal(h.policy.SendBudget()+time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Delivered, res.State, "version 7 takes the ledger's outcome: %s", res.Reason)
	require.Contains(t, res.MessageIDs, "m-A",
		"the result takes the ledger's outcome Delivered but not its message: messageIds %v, outcomeUnknown %v", res.MessageIDs, res.OutcomeUnknown)
}

// rejected() since version 7 searches whenever the ledger holds any
// message id of the event and no message is live, including a message
// this very run saw fail: it is in the ledger, and failed, so not live.
//
// Path: m-1 is accepted and its delivery fails; a person resends inside
// the window (no search needed: the delivery failed), and the resend is
// refused with a 401 because the credential was rotated, which refuses
// the search too. Version 6 ended Failed at once: nothing was uncertain.
// Version 7 "searches for a live one", the search fails, and the run
// awaits a decision claiming "an earlier attempt ended without a certain
// answer"; with no decision it ends, a deadline later, Failed with
// outcomeUnknown ("an SMS of the event may have gone out"), although
// every attempt of the event had a certain answer and the only message
// is one the run itself saw fail.
func TestReview7ARefusedResendAfterAFailedDeliveryIsNoUnknownOutcome(t *testing.T) {
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
	calls := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, review7SearchDown()
	})
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

// Version 7 makes a run that resumes the event list every message id the
// ledger holds (seed 1120), but not a run that finds the event settled:
// Prepare returns before it reads the attempts when the event is settled,
// and prepare()'s (and takeOver()'s) Settled branch adds only the settled
// message id.
//
// Path: run A sent m-0 under the event key, its delivery failed, a
// person resent, and m-1 under ~resend-1 was delivered; A settled
// Delivered with m-1. An operator resets the workflow to its first
// workflow task: the new run's Prepare finds the event settled, and the
// run ends Duplicate with messageIds [m-1]. m-0, which the ledger holds
// and the provider holds (failed), is missing and the run does not say
// its outcome is unknown: the simulation's "unknown message" promise,
// broken on the same reset path version 7 fixed for a resumed run.
// (Simulation seed 5161 is the same path with a proven duplicate that
// run A found: the reset run ends Duplicate with one of the two live
// messages and no duplicateSend; there the second id is in no ledger row
// at all, since the ledger's settle keeps one message id and no
// duplicate flag.)
func TestReview7ARunThatFindsTheEventSettledListsTheLedgersMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resend := key + "~resend-1"
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		Settled: &ledger.Event{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-1", MessageID: "m-1", SettledAt: h.start.Add(2 * time.Hour)},
		// Since the fix, Prepare reads the attempts of a settled event too.
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
