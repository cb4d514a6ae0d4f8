package workflows

// The last looks: once no attempt without a certain answer can take
// effect any more, a run looks once more before it settles, at its
// provider and at a provider it moved away from; what such a look finds,
// or cannot tell, is what the run ends with.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"

	"context"

	"github.com/stretchr/testify/mock"
)

// As TestFailedSearchesStillGetALastLookAndSaySo, via the ledger's
// refusal: every attempt ends without an answer and the last attempt is
// refused by the Send activity because the ledger's clock says the key's
// window closed (ErrWindowClosed). Every search fails; a person cancels.
// The uncertain attempts must still arm the last look before the run
// settles.
func TestAWindowClosedRefusalStillArmsTheLastLook(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.AfterRetries {
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("the replay window of "+in.Request.Key+" closed", activities.ErrWindowClosed, nil)
		}
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	last := h.start.Add(h.policy.SendBudget() - 10*time.Minute)
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: last}
	}
	calls := h.searchesFail(temporal.NewNonRetryableApplicationError("bird: 503 on the list endpoint", "ProviderDown", nil))
	cancelAt := h.policy.SendBudget() + 4*time.Hour + 5*time.Minute
	h.signal(cancelAt, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.OutcomeUnknown)
	calls.mu.Lock()
	defer calls.mu.Unlock()
	require.NotEmpty(t, calls.at)
	require.GreaterOrEqual(t, calls.at[len(calls.at)-1], cancelAt, "the uncertain attempts arm a last look after the cancel, before the run settles; timeline:\n%s", timelineTexts(h.query()))
}

// movedThenCancelled runs an event with Sendy as its fallback: Bird's
// attempt 1 ends without an answer and every later one is answered not
// executed; the searches find nothing, so the run moves to Sendy, where
// s-1 is accepted and fails; a person cancels. The run's last look at
// Bird, which it moved away from, answers last.
func (h *harness) movedThenCancelled(last activities.ReconcileOutput) *lookups {
	h.t.Helper()
	h.prepared()
	h.uncertainAtBirdThenSendy()
	calls := h.reconcileWith(func(since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if in.Provider == "bird" && since >= h.policy.SendBudget()+time.Hour {
			return last, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.start}, nil
	})
	h.planned()
	h.statuses(provider.StatusFailed)
	h.signal(h.policy.SendBudget()+2*time.Hour, contract.SignalCancel, map[string]string{"reason": "will call the customer", "by": "dave"})
	h.runWithFallback("sendy")
	return calls
}

// SmsState says Cancelled for an SMS that was sent.
//
// Path (last look): every attempt ends without a certain answer, the
// search at the window finds nothing, a person cancels. finish() upserts
// the search attributes first (SmsState=Cancelled), then lastLook() looks
// once more, after the late-effect horizon, and finds m-1: turnedUp()
// makes the result and the ledger Unconfirmed, and nothing upserts the
// search attributes again. Path (look at a provider left): the same after
// lookAtLeft() finds a live message at Bird, which the run moved away
// from. SmsState="Cancelled" then lists, as cancelled, an event whose SMS
// was sent.
func TestSmsStateFollowsAMessageThatTurnsUpInTheLastLook(t *testing.T) {
	t.Parallel()
	t.Run("last look", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		states := h.smsStates()
		h.prepared()
		h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		})
		h.recall = func(activities.RecallInput) activities.RecallOutput {
			return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: h.start.Add(h.policy.SendBudget() - time.Minute)}
		}
		cancelAt := h.policy.SendBudget() + time.Hour
		h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
			if since < cancelAt {
				return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
			}
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusDelivered}}}, nil
		})
		h.signal(cancelAt, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
		h.run()
		res, err := h.result()
		require.NoError(t, err)
		require.Equal(t, contract.Unconfirmed, res.State, res.Reason)
		require.Equal(t, "Unconfirmed", h.settled.Outcome)
		got := states()
		require.NotEmpty(t, got)
		require.Equal(t, string(contract.Unconfirmed), got[len(got)-1],
			"the run ended %s (message m-1 turned up in its last look) but the last SmsState it upserted is %q (upserts: %v)", res.State, got[len(got)-1], got)
	})
	t.Run("look at a provider left", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		states := h.smsStates()
		h.movedThenCancelled(activities.ReconcileOutput{Searched: true, ByKey: true,
			Messages: []provider.Message{{ID: "b-1", Reference: key, Status: provider.StatusDelivered}}})
		res, err := h.result()
		require.NoError(t, err)
		require.Equal(t, contract.Unconfirmed, res.State, res.Reason)
		require.Contains(t, res.MessageIDs, "b-1")
		got := states()
		require.NotEmpty(t, got)
		require.Equal(t, string(contract.Unconfirmed), got[len(got)-1],
			"the run ended %s (message b-1 turned up at bird) but the last SmsState it upserted is %q (upserts: %v)", res.State, got[len(got)-1], got)
	})
}

// A message id the provider gave us that it can no longer find is an
// unknown outcome, at a provider the run moved away from too.
//
// Path: the run moves to Sendy, s-1 fails there, a person cancels. The
// last look at Bird (lookAtLeft) answers that b-1, a message id of the
// event the ledger holds for Bird, is gone (Vanished). cannotSpeak() makes
// that an unknown outcome and lookAtLeft() lists b-1 among the run's
// messages: the Cancelled result says an SMS may have gone out and names
// b-1. This passes; it fails if "|| len(out.Vanished) > 0" is dropped from
// cannotSpeak(), or lookAtLeft's use of it or its Vanished loop is.
func TestAMessageVanishedAtAProviderLeftIsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	calls := h.movedThenCancelled(activities.ReconcileOutput{Searched: true, ByKey: true, Vanished: []string{"b-1"},
		How: "searched bird by key: message b-1 of the event is not found"})
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State, res.Reason)
	require.Equal(t, []string{key, key + "~via-sendy"}, res.KeysUsed, "the run moved to sendy")
	calls.mu.Lock()
	last := calls.calls[len(calls.calls)-1]
	calls.mu.Unlock()
	require.Equal(t, "bird", last.Provider, "the last look was at bird")
	require.True(t, timelineHas(h.query(), "the last look at bird, which the run moved away from"))
	require.Contains(t, res.MessageIDs, "b-1", "a message id bird gave and can no longer find is the event's")
	require.True(t, res.OutcomeUnknown, "b-1 vanished at bird: whether it went out cannot be told: %s", res.Reason)
	require.Contains(t, res.Reason, "may have gone out")
}

// A late look that failed counts as done, and a plain resend inside
// the window skips the search that would have found the hung attempt's
// message.
//
// Path (pre-existing; the same root as 1 with a search that spoke):
// attempt 1 of the event key ends without an answer, attempt 2 is
// accepted as m-1 (Uncertain); the search at acceptance finds nothing
// else. recheck() at the late-effect horizon sets lateDone = true BEFORE
// it searches, and the search fails (Bird's list is down for half an
// hour): the late look is owed but recheckPending() says it was made.
// m-1 then fails and the run awaits a decision. A plain resend at 40m:
// resendSearches() sees the primary failed inside its window and no late
// look pending, so ~resend-1 goes out as m-2 without any search. Attempt
// 1 had sent m-0, which Bird lists by then: a search before the resend
// (the one owed) finds it alive ("resend not needed"); instead the phone
// gets m-0 and m-2, and the run only proves the duplicate afterwards.
// Expected: a late look that failed stays owed, so the resend searches
// first and sends nothing.
func TestAFailedLateLookStaysOwedBeforeAResend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.uncertainThenAcceptedThenResent("bird: 502")
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		switch {
		case since < time.Minute:
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusAccepted}}}, nil
		case since < 35*time.Minute:
			return activities.ReconcileOutput{}, errSearch
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
			{ID: "m-0", Reference: key, Status: provider.StatusDelivered},
			{ID: "m-1", Reference: key, Status: provider.StatusFailed},
		}}, nil
	})
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		if in.MessageID == "m-1" {
			if h.env.Now().Sub(h.start) > 30*time.Minute {
				return provider.Message{ID: "m-1", Status: provider.StatusFailed}, nil
			}
			return provider.Message{ID: "m-1", Status: provider.StatusSent}, nil
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	h.decideByUpdate(40*time.Minute, "plain", contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "alice"})
	h.run()
	res, _ := h.result()
	s := h.query()
	require.True(t, timelineHas(s, "could not search bird's records for a second message"), "the late look failed")
	require.True(t, timelineHas(s, "resend decided by alice"), "alice's resend was taken")
	require.Empty(t, res.ResendKeys,
		"~resend-1 went out without the owed late look, which finds m-0 alive; the run ended %s, duplicateSend %v, messages %v", res.State, res.DuplicateSend, res.MessageIDs)
}
