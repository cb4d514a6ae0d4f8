package workflows

// The messages of an event the ledger holds: paths the deterministic
// simulation (simulation/) found, one test each, where a run must follow,
// list or report a message the ledger holds, another run's included.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

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

// resumedThenRefused is a reset run (resumed) whose attempts of the
// event key are refused with 401 (a credential rotated), while the
// ledger holds the replaced run's attempt and its message m-old.
func (h *harness) resumedThenRefused() {
	h.resumed()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) { r.Reason = "bird: 401 unauthorized" })
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 2,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}},
			Messages: []activities.SentMessage{{Key: key, ID: "m-old"}}}
	}
}

// Simulation seeds 2245 (Bird) and 2777 (Sendy): the run a reset replaced
// was accepted as m-old; the new run's attempt of the same key is refused
// (401, a credential rotated). The new run does not end Failed: the
// ledger holds m-old, so the run searches, finds it alive and follows it.
func TestARefusalWhileTheLedgerHoldsAMessageFollowsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedThenRefused()
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

// Simulation seed 8121: the run a reset replaced was accepted as m-old,
// and the ledger holds that answer. The new run's Send never reaches
// Bird before the key's window closes, and in an outage every search
// and every lookup fails; a Temporal cancellation request comes two
// hours later. Bird took the SMS: the run follows m-old as if its own
// Send had got the answer, refuses the cancellation (nothing can unsend
// it) and reads m-old's status once lookups work again. Version 0 ended
// Cancelled, saying the outcome was unknown, for an SMS that went out.
func TestASearchThatFailsWhileTheLedgerHoldsTheKeysAnswerFollowsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedPastTheWindow()
	outage := 3 * time.Hour
	searches := h.searchesFail(temporal.NewApplicationError("bird: 503 service unavailable", "ProviderUnavailable"))
	var lookedUp []string
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		lookedUp = append(lookedUp, in.MessageID)
		if h.env.Now().Sub(h.start) < outage {
			return provider.Message{}, temporal.NewApplicationError("bird: 503 service unavailable", "ProviderUnavailable")
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Hour)
	h.run()
	res, err := h.result()
	require.NoError(t, err, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.False(t, res.OutcomeUnknown, res.Reason)
	require.Equal(t, []string{"m-old"}, res.MessageIDs)
	require.Equal(t, []string{key}, res.KeysUsed, "no resend")
	require.NotEmpty(t, searches.calls, "the run searched first")
	require.Contains(t, lookedUp, "m-old")
	require.Equal(t, "Delivered", h.settled.Outcome)
	require.Equal(t, "m-old", h.settled.MessageID)
	st := h.query()
	require.True(t, timelineHas(st, "the ledger holds bird's accepted answer to an attempt under "+key), "the timeline says why the run follows m-old")
	require.True(t, timelineHas(st, "refused a cancellation request"), "the cancellation is refused with its reason")
}

// As above, through a refusal: the new run's attempt is refused (401, a
// credential rotated) and the search that would find m-old fails too.
// The ledger holds Bird's accepted answer under the key: the run follows
// m-old and does not await a decision with the outcome unknown.
func TestARefusalWhoseSearchFailsFollowsTheLedgersAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedThenRefused()
	h.searchesFail(searchDown())
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.False(t, res.OutcomeUnknown, res.Reason)
	require.Equal(t, []string{"m-old"}, res.MessageIDs)
	require.Less(t, h.env.Now().Sub(h.start), time.Hour, "the run followed m-old at once instead of awaiting a decision")
}

// resumedWith mocks Prepare as a reset run's: the ledger holds the key
// (its window closed long ago) and the given messages under it.
func (h *harness) resumedWith(ms ...activities.SentMessage) {
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}},
		Messages: ms,
	}, nil).Once()
}

// ledgerHolds mocks Recall as the ledger of a reset run's event: the
// attempts under the event key that got the messages ms (one at least),
// long begun.
func (h *harness) ledgerHolds(ms ...activities.SentMessage) {
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: max(1, len(ms)),
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}, Messages: ms}
	}
}

// resumedPastTheWindow is seed 8121's reset run: resumed, its key's
// window closed, and the ledger holding the replaced run's m-old.
func (h *harness) resumedPastTheWindow() {
	h.resumed()
	h.windowClosed()
	h.ledgerHolds(activities.SentMessage{Key: key, ID: "m-old"})
}

// ledgerHoldsFrom mocks Recall as ledgerHolds, with the messages ms only
// from after into the run: the replaced run's attempt ended late.
func (h *harness) ledgerHoldsFrom(after time.Duration, ms ...activities.SentMessage) {
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		out := activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 1,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}}
		if h.env.Now().Sub(h.start) > after {
			out.Messages = ms
		}
		return out
	}
}

// windowClosed makes every Send answer that the key's window closed.
func (h *harness) windowClosed() {
	h.sendWith(func(int32, activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("the replay window of "+key+" has closed", activities.ErrWindowClosed, nil)
	})
}

// inBothVersions runs f on a harness of the latest version and on one of
// version 0 (1.0.0), each in its own parallel subtest.
func inBothVersions(t *testing.T, f func(t *testing.T, h *harness, v0 bool)) {
	for _, v0 := range []bool{false, true} {
		t.Run(map[bool]string{false: "latest", true: "v0"}[v0], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if v0 {
				h.asVersion0()
			}
			f(t, h, v0)
		})
	}
}

// asVersion0 makes the run follow workflow.DefaultVersion (1.0.0).
func (h *harness) asVersion0() {
	h.env.OnGetVersion(changeID, minSupportedVersion, latestVersion).Return(workflow.DefaultVersion)
}

// The run a reset replaced got two accepted answers under the key
// (Bird's lock expired mid-send), and the ledger holds both; the new
// run's search fails. Version 1 follows the first and reports the
// proven duplicate (the provider accepted the key twice, as adopt()
// says of a search that finds both); version 0 reported a possible one.
// Found by the review of version 1, where the second went unreported.
func TestTwoLedgerAnswersUnderTheKeyAreNotSilentlyOne(t *testing.T) {
	t.Parallel()
	inBothVersions(t, func(t *testing.T, h *harness, v0 bool) {
		ms := []activities.SentMessage{{Key: key, ID: "m-1"}, {Key: key, ID: "m-2"}}
		h.resumedWith(ms...)
		h.windowClosed()
		h.ledgerHolds(ms...)
		h.searchesFail(searchDown())
		h.statuses(provider.StatusDelivered)
		h.run()
		res, _ := h.result()
		st := h.query()
		require.True(t, res.DuplicateSend || res.PossibleDuplicate,
			"two accepted messages under %s in the ledger, neither ruled out: %s\n%s", key, res.Reason, timelineTexts(st))
		if !v0 {
			require.True(t, res.DuplicateSend, "the provider accepted the key twice: a proven duplicate")
		}
	})
}

// As above, but the message the run follows (m-1) turns out failed:
// the run goes on with m-2, the ledger's other accepted answer under the
// key, which is delivered, and a cancellation meanwhile is refused.
func TestTheLedgersOtherAnswerIsNotDroppedWhenTheFirstFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ms := []activities.SentMessage{{Key: key, ID: "m-1"}, {Key: key, ID: "m-2"}}
	h.resumedWith(ms...)
	h.windowClosed()
	h.ledgerHolds(ms...)
	h.searchesFail(searchDown())
	h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed, "m-2": provider.StatusDelivered})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Hour)
	h.run()
	res, _ := h.result()
	st := h.query()
	require.NotEqual(t, contract.Cancelled, res.State, "%s\n%s", res.Reason, timelineTexts(st))
	require.Equal(t, contract.Delivered, res.State, "m-2 is followed once m-1 failed: %s\n%s", res.Reason, timelineTexts(st))
	require.Equal(t, []string{key}, res.KeysUsed, "no resend: m-2 went out")
}

// A reset run whose own attempts under the key ended without a
// certain answer (a timeout), while the ledger holds the replaced run's
// accepted answer under the key; every search fails. The run follows
// m-old, which is delivered; its own uncertain attempt may have sent a
// second message: a possible duplicate, in both versions.
func TestOwnUncertainAttemptBesideTheLedgersAnswerIsAPossibleDuplicate(t *testing.T) {
	t.Parallel()
	inBothVersions(t, func(t *testing.T, h *harness, v0 bool) {
		ms := []activities.SentMessage{{Key: key, ID: "m-old"}}
		h.resumedWith(ms...)
		h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		})
		h.recall = func(activities.RecallInput) activities.RecallOutput {
			return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 2, Uncertain: 1, LastUncertainAt: h.start,
				SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}, Messages: ms}
		}
		h.searchesFail(searchDown())
		h.statuses(provider.StatusDelivered)
		h.run()
		res, _ := h.result()
		st := h.query()
		require.True(t, res.PossibleDuplicate || res.DuplicateSend, "%s\n%s", res.Reason, timelineTexts(st))
	})
}

// The ledger's answer m-old failed delivery, which the reset run
// never saw. It follows m-old; tracking finds the failure and asks for
// a resend, and a resend decided then is carried out once a search
// succeeds (the search finds m-old failed).
func TestAFollowedLedgerAnswerThatFailedAsksForAResend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ms := []activities.SentMessage{{Key: key, ID: "m-old"}}
	h.resumedWith(ms...)
	var resent []string
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("the replay window of "+key+" has closed", activities.ErrWindowClosed, nil)
		}
		resent = append(resent, in.Request.Key)
		return accepted("m-new", attempt, provider.Accepted), nil
	})
	h.ledgerHolds(ms...)
	h.planResends()
	h.reconcileWith(func(since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since < 3*time.Hour {
			return activities.ReconcileOutput{}, searchDown()
		}
		return foundByKey(in, map[string]provider.Message{key: {ID: "m-old", Status: provider.StatusFailed}}), nil
	})
	h.statusByID(map[string]provider.Status{"m-old": provider.StatusFailed, "m-new": provider.StatusDelivered})
	h.signal(time.Hour, contract.SignalResend, map[string]string{"by": "alice", "reason": "m-old failed"})
	h.run()
	res, _ := h.result()
	st := h.query()
	require.Equal(t, contract.Delivered, res.State, "%s\n%s", res.Reason, timelineTexts(st))
	require.Len(t, resent, 1, timelineTexts(st))
	require.False(t, res.DuplicateSend, timelineTexts(st))
}

// A run of version 0 (started before version 1 reached its worker)
// keeps 1.0.0's path: seed 8121's run ends Cancelled with the outcome
// unknown.
func TestVersion0KeepsTheOldPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.asVersion0()
	h.resumedPastTheWindow()
	h.searchesFail(temporal.NewApplicationError("bird: 503 service unavailable", "ProviderUnavailable"))
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		return provider.Message{}, temporal.NewApplicationError("bird: 503 service unavailable", "ProviderUnavailable")
	}).Maybe()
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Hour)
	h.run()
	res, _ := h.result()
	st := h.query()
	require.Equal(t, contract.Cancelled, res.State, "%s\n%s", res.Reason, timelineTexts(st))
	require.True(t, res.OutcomeUnknown)
	require.False(t, timelineHas(st, "the ledger holds bird's accepted answer"))
}

// The ledger gets the replaced run's accepted answer only after the
// reset run awaits a decision (that run's attempt ended late), and the
// reset run learns it when a resend is decided (learnFromLedger), while
// searches are down. The resend is not carried out: the run follows the
// message instead of waiting for a search, and a cancellation later is
// refused. Found by the review of version 1.
func TestALedgerAnswerLearnedAtAResendIsFollowedToo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared() // the claim holds no message yet
	h.windowClosed()
	ms := []activities.SentMessage{{Key: key, ID: "m-old"}}
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		out := activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 1,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}}
		if h.env.Now().Sub(h.start) > 30*time.Minute {
			out.Messages = ms // the replaced run's attempt ended late
		}
		return out
	}
	h.planResends()
	h.searchesFail(searchDown())
	h.statuses(provider.StatusDelivered)
	h.signal(time.Hour, contract.SignalResend, map[string]string{"by": "alice", "reason": "customer asks"})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Hour)
	h.run()
	res, _ := h.result()
	st := h.query()
	require.NotEqual(t, contract.Cancelled, res.State, "%s\n%s", res.Reason, timelineTexts(st))
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key}, res.KeysUsed, "the resend is not carried out: m-old went out")
	require.True(t, timelineHas(st, "resend not needed: the provider accepted a message of this event under its key"))
}

// SmsState at close equals the result's state on seed 8121's path
// (followed, then delivered).
func TestSmsStateAtCloseAfterFollowingTheLedger(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedPastTheWindow()
	h.searchesFail(searchDown())
	h.statuses(provider.StatusSent, provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	h.mu.Lock()
	states := append([]string(nil), h.states...)
	h.mu.Unlock()
	require.Equal(t, string(contract.Delivered), states[len(states)-1])
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, "m-old", h.settled.MessageID)
}

// Seed 8121 with the reset point after Prepare (any workflow task after
// the first). The new run replays the replaced run's Prepare, which held
// no message yet; its Send meets the key's closed window (checked before
// the fence, so no takeover reads the ledger). When its search fails it
// reads the ledger's messages again, finds Bird's accepted answer m-old
// under its key and follows it. Found by the review of version 1.
func TestSeed8121WithTheResetPointAfterPrepare(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared() // the replaced run's Prepare, replayed: no message yet
	h.windowClosed()
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start.Add(-3 * time.Hour), Attempts: 1,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start.Add(-3 * time.Hour)}},
			Messages: []activities.SentMessage{{Key: key, ID: "m-old"}}}
	}
	h.searchesFail(searchDown())
	h.statuses(provider.StatusDelivered)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Hour)
	h.run()
	res, _ := h.result()
	st := h.query()
	require.NotEqual(t, contract.Cancelled, res.State, "%s\n%s", res.Reason, timelineTexts(st))
	require.Contains(t, res.MessageIDs, "m-old")
	require.Equal(t, contract.Delivered, res.State, res.Reason)
}

// A forced resend, acknowledged as "sends under the next resend key
// unless the message is found, even if the search fails (a blind
// resend)", meets a search that fails while the ledger (read at the
// resend) holds an accepted answer m-old under the key. It is carried
// out as acknowledged: a person chose to send without a search that
// speaks. (The review of version 1 found it followed m-old instead and
// ended Unconfirmed with no resend.)
func TestAForcedResendIsCarriedOutBesideTheLedgersAnswer(t *testing.T) {
	t.Parallel()
	// m-old never reaches a final status, or fails: the resend goes out
	// all the same.
	for _, old := range []provider.Status{provider.StatusSent, provider.StatusFailed} {
		t.Run(string(old), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.prepared()
			h.windowClosed()
			h.ledgerHoldsFrom(30*time.Minute, activities.SentMessage{Key: key, ID: "m-old"})
			h.planResends()
			h.searchesFail(searchDown())
			h.statusByID(map[string]provider.Status{"m-old": old})
			u := h.decideByUpdate(time.Hour, "alice", contract.Decision{Action: contract.ActionResend, Force: true, By: "alice", Reason: "customer says nothing arrived"})
			h.run()
			res, _ := h.result()
			require.NoError(t, u.err)
			require.NotNil(t, u.ack)
			require.True(t, res.PossibleDuplicate || res.DuplicateSend, "a blind resend beside m-old is reported: %s", res.Reason)
			require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys,
				"the forced resend was acknowledged as %q but was never carried out (state %s)", u.ack.Message, res.State)
		})
	}
}

// The ledger holds m-old, the replaced run's accepted answer under the
// key (learned at Prepare); the reset run's own Send of the same key,
// inside the window, is accepted as a new message m-own (the provider did
// not replay m-old: its lock expired or it did not store the answer).
// Two accepted ids under one key: a proven duplicate, as adopt() says.
// Version 0 reported nothing (found by the review of version 1).
func TestTheRunsOwnNewMessageBesideTheLedgersAnswerIsAProvenDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedWith(activities.SentMessage{Key: key, ID: "m-old"})
	h.acceptsAs("m-own")
	h.statuses(provider.StatusDelivered)
	h.reconcileByKey(map[string]provider.Message{})
	h.run()
	res, _ := h.result()
	require.True(t, res.DuplicateSend,
		"the ledger holds m-old under %s and the run's own Send got m-own under it: two SMS may have reached the phone (%s)", key, res.Reason)
	require.ElementsMatch(t, []string{"m-old", "m-own"}, res.MessageIDs)
}

// The reset run's own Send of the key is accepted as m-own after an
// uncertain attempt, beside the ledger's m-old under the same key (a
// proven duplicate); its look for a second message fails and m-own fails
// delivery: the run awaits a decision and searches again (every search
// fails, each taking 5 minutes). Bob cancels by update while a retried
// search runs. The run reads m-old's status before it calls anything
// sent, finds it failed, and ends Cancelled as bob decided.
func TestACancelPendingWhenARetriedSearchFindsTheLedgersAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedWith(activities.SentMessage{Key: key, ID: "m-old"})
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		out := accepted("m-own", attempt, provider.Accepted)
		out.Uncertain, out.UncertainSince = true, h.start
		return out, nil
	})
	h.reconcileSlow(func(int, time.Duration) time.Duration { return 5 * time.Minute },
		func(int, time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
			return activities.ReconcileOutput{}, searchDown()
		})
	var looked []string
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		looked = append(looked, in.MessageID)
		return provider.Message{ID: in.MessageID, Status: provider.StatusFailed}, nil
	})
	u := h.decideByUpdate(22*time.Minute, "bob", contract.Decision{Action: contract.ActionCancel, By: "bob", Reason: "order cancelled"})
	h.run()
	res, _ := h.result()
	require.NoError(t, u.err)
	require.NotNil(t, u.ack, "bob's cancel was taken")
	require.True(t, res.DuplicateSend, "m-own and m-old were both accepted under the key: %s", res.Reason)
	require.Contains(t, looked, "m-old", "the run called m-old sent without reading its status: %s", res.Reason)
	require.Equal(t, contract.Cancelled, res.State, res.Reason)
}

// The reset run's own Send of the key is answered from the provider's
// replay store with m-old itself, the replaced run's accepted answer the
// ledger holds: one message, no duplicate.
func TestAReplayOfTheLedgersAnswerIsNoDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.resumedWith(activities.SentMessage{Key: key, ID: "m-old"})
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return accepted("m-old", attempt, provider.Replayed), nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.False(t, res.DuplicateSend || res.PossibleDuplicate, res.Reason)
	require.Equal(t, []string{"m-old"}, res.MessageIDs)
}

// A reset run resumes the replaced run's resend key ~resend-1 (window
// closed); the ledger holds m-first, the replaced run's message under the
// event key, whose status no run of this workflow saw, and m-resend, its
// accepted answer under ~resend-1. Every search fails. The run follows
// m-resend, and m-first, never ruled out, is a possible duplicate, as
// version 0 said (found by the third review of version 1).
func TestAnEarlierKeysUnseenMessageBesideAFollowedAnswerIsAPossibleDuplicate(t *testing.T) {
	t.Parallel()
	inBothVersions(t, func(t *testing.T, h *harness, v0 bool) {
		resend := key + "~resend-1"
		sendKeys := []activities.SendKey{{Key: key, FirstAttemptAt: h.start.Add(-5 * time.Hour)}, {Key: resend, FirstAttemptAt: h.start.Add(-4 * time.Hour)}}
		ms := []activities.SentMessage{{Key: key, ID: "m-first"}, {Key: resend, ID: "m-resend"}}
		h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
			Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start.Add(-5 * time.Hour),
			SendKeys: sendKeys, Messages: ms,
		}, nil).Once()
		h.planResends()
		h.recall = func(in activities.RecallInput) activities.RecallOutput {
			return activities.RecallOutput{FirstAttemptAt: h.start.Add(-4 * time.Hour), Attempts: 1, SendKeys: sendKeys, Messages: ms}
		}
		h.windowClosed()
		h.searchesFail(searchDown())
		h.statuses(provider.StatusDelivered)
		h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Hour)
		h.run()
		res, _ := h.result()
		st := h.query()
		require.True(t, res.PossibleDuplicate || res.DuplicateSend,
			"m-first (never seen) and m-resend (accepted) are both in the ledger; the run ends %s and says nothing of a second SMS: %s\n%s", res.State, res.Reason, timelineTexts(st))
	})
}
