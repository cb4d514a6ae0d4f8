package workflows

// Tests for the paths by which faults could make a second SMS without the
// run saying so, and for how the run tells a second live message of the
// event from one that failed.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/reconcile"
)

// unknownThenAccepted mocks Send: attempt 1 ends without an answer
// (reason), attempt 2 is accepted as message id, and the activity reports
// that an earlier attempt of the key, begun at the start, was uncertain.
func (h *harness) unknownThenAccepted(id, reason string) {
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		if attempt == 1 {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = reason })
		}
		out := accepted(id, attempt, provider.Accepted)
		out.Uncertain, out.UncertainSince = true, h.start
		return out, nil
	})
}

func (h *harness) planResends() {
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (provider.Request, error) {
		return h.request(in.SendKey), nil
	}).Maybe()
}

// Point 1: attempt 1 hangs at Bird, its lock expires, attempt 2 is
// accepted; the hung attempt takes effect only later. The immediate search
// finds one message; the run looks again once the hung attempt can no
// longer take effect, before it settles, and reports the duplicate.
func TestALateEffectOfAHungAttemptIsFoundBeforeSettling(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.unknownThenAccepted("m-2", "bird: no answer (timed out)")
	lateEffect := 40 * time.Second // the hung attempt takes effect then
	calls := h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		msgs := []provider.Message{{ID: "m-2", Reference: key, Status: provider.StatusDelivered}}
		if since >= lateEffect {
			msgs = append([]provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusDelivered}}, msgs...)
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: msgs}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.True(t, res.DuplicateSend, "the second message is reported")
	require.ElementsMatch(t, []string{"m-1", "m-2"}, res.MessageIDs)
	require.Len(t, calls.at, 2, "one search at acceptance, one after the late-effect horizon")
	require.Less(t, calls.at[0], lateEffect)
	require.GreaterOrEqual(t, calls.at[1], h.policy.LateEffectHorizon, "the second search waits until the hung attempt can no longer take effect")
	require.Equal(t, "Delivered", h.settled.Outcome)
	s := h.query()
	require.True(t, timelineHas(s, "waiting until"))
	require.True(t, timelineHas(s, "before settling: an attempt without a certain answer could take effect until"))
}

// Point 1, tracking: delivery takes longer than the horizon, so the run
// looks while tracking and once more before settling.
func TestUncertainAcceptanceLooksWhileTrackingAndBeforeSettling(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		out := accepted("m-2", attempt, provider.Accepted)
		out.Uncertain, out.UncertainSince = true, h.start.Add(-time.Hour) // an earlier run's hung attempt
		return out, nil
	})
	calls := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-2", Reference: key, Status: provider.StatusSent}}}, nil
	})
	h.statuses(provider.StatusSent, provider.StatusSent, provider.StatusSent, provider.StatusSent, provider.StatusSent, provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.False(t, res.DuplicateSend)
	require.Len(t, calls.at, 3, "at acceptance, once the horizon had passed (already, here) while tracking, and before settling")
}

// Point 1 at Sendy: no list endpoint, so a new message after an uncertain
// attempt cannot be checked; the run says a duplicate is possible.
func TestSendyNewMessageAfterAnUncertainAttemptIsAPossibleDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.unknownThenAccepted("s-2", "sendy: 500")
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, Messages: []provider.Message{{ID: "s-2", Status: provider.StatusDelivered}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.True(t, res.PossibleDuplicate)
	require.False(t, res.DuplicateSend)
	require.True(t, timelineHas(h.query(), "cannot be searched by key to tell"))
}

// Point 2: a hung request completed at the provider and was stored, but
// the backoff put the next retry past the window. One last attempt with
// the same key and bytes, as late as the window allows, collects the
// stored answer instead of leaving the outcome unknown.
func TestOneLastAttemptCollectsTheStoredAnswerBeforeTheWindowCloses(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.policy.MaxBackoff = 2 * time.Hour // retries 1, 2, 4 … s apart: the last lands ~2h16m in
	h.prepared()
	stored := h.policy.SendBudget() - 10*time.Minute
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		if h.env.Now().Sub(h.start) < stored {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "sendy: no answer (timed out)" })
		}
		return accepted("s-1", attempt, provider.Replayed), nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, []string{"s-1"}, res.MessageIDs)
	require.Equal(t, 1, res.Replays)
	require.Equal(t, len(h.sends), res.Attempts, "every attempt is counted, the retries' and the last one")
	last := h.sendAt[len(h.sendAt)-1]
	require.Less(t, last, h.policy.SendBudget(), "still inside the window")
	require.Greater(t, last, h.policy.SendBudget()-time.Minute, "as late as the window allows")
	for _, s := range h.sends {
		require.Equal(t, h.sends[0].Request, s.Request, "the same key and bytes")
	}
	require.True(t, timelineHas(h.query(), "one last attempt with the same key and bytes"))
}

// downThenAwaiting is a run whose key's window closed with the outcome
// unknown: the provider never answered.
func downThenAwaiting(h *harness) {
	h.prepared()
	h.planResends()
	h.unknownUntilResent()
	h.statuses(provider.StatusDelivered)
}

// unknownUntilResent mocks Send: every attempt under the event key ends
// without an answer (a 502); a resend is accepted as m-9.
func (h *harness) unknownUntilResent() {
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: 502" })
		}
		return accepted("m-9", attempt, provider.Accepted), nil
	})
}

var errSearch = errors.New("bird: list messages: answer 503: upstream down")

// Point 3: the search fails; a plain resend does not send blind. The run
// keeps awaiting with the reason shown and retries the search; a forced
// resend sends, recorded as blind in the timeline and the Result.
func TestNoResendPastTheWindowWithoutASearchUnlessForced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	calls := h.searchesFail(errSearch)
	var waiting contract.Status
	h.signal(4*time.Hour, contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice"})
	h.env.RegisterDelayedCallback(func() { waiting = h.query() }, 5*time.Hour)
	h.signal(6*time.Hour, contract.SignalResend, map[string]any{"reason": "customer called again", "by": "bob", "force": true})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)

	require.Equal(t, contract.AwaitingDecision, waiting.State, "a plain resend after a failed search waits")
	require.Contains(t, waiting.Reason, "the resend decided by alice waits: the provider's records could not be searched")
	require.Contains(t, waiting.Reason, `"force": true`)
	require.Empty(t, waiting.ResendKeys, "nothing was sent blind")
	require.Greater(t, len(calls.at), 3, "the failed search is retried while the run awaits")

	require.Equal(t, []string{key + "~resend-1"}, res.BlindResends)
	require.Equal(t, []contract.Resend{{Key: key + "~resend-1", By: "bob", Reason: "customer called again", Basis: contract.BasisBlind}}, res.Resends)
	require.True(t, res.PossibleDuplicate)
	require.True(t, timelineHas(h.query(), "blind resend under "+key+"~resend-1 forced by bob"))
}

// Point 3: the retried search succeeds and finds the message: the run
// follows it without anyone deciding.
func TestARetriedSearchFindsTheMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since < 4*time.Hour {
			return activities.ReconcileOutput{}, errSearch
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusSent}}}, nil
	})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, []string{"m-1"}, res.MessageIDs)
	require.Empty(t, res.ResendKeys)
	require.True(t, timelineHas(h.query(), "reconciled on retry"))
}

// Point 3 at Sendy without a message id: the search cannot look, so a
// plain resend is refused at once (update) and only a forced one sends.
func TestUnsearchableProviderNeedsAForcedResend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{How: "sendy has no list endpoint"}, nil
	})
	var refused error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "plain", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { refused = err }, OnAccept: func() { t.Error("a blind resend needs force") }, OnComplete: func(any, error) {},
		}, bound(contract.Decision{Action: contract.ActionResend, Reason: "customer called", By: "carol"}))
		h.env.UpdateWorkflow(contract.UpdateDecide, "forced", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, bound(contract.Decision{Action: contract.ActionResend, Reason: "customer confirmed nothing arrived", By: "carol", Force: true}))
	}, 4*time.Hour)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.ErrorContains(t, refused, `resend with "force": true`)
	require.Equal(t, []string{key + "~resend-1"}, res.BlindResends)
	require.Equal(t, contract.Delivered, res.State)
}

// Point 4: a decision that arrives while a resend is being planned is
// refused with a reason, never applied late or lost.
func TestADecisionDuringTheResendIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return accepted("m-1", attempt, provider.Accepted), nil
		}
		return accepted("m-2", attempt, provider.Accepted), nil
	})
	h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed})
	var plans int
	var mu sync.Mutex
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).After(time.Minute).Return(func(_ context.Context, in activities.PlanInput) (provider.Request, error) {
		mu.Lock()
		plans++
		mu.Unlock()
		return h.request(in.SendKey), nil
	})
	var during contract.Status
	var updateErr error
	h.signal(time.Hour, contract.SignalResend, map[string]string{"reason": "the phone was off", "by": "ivy"})
	h.env.RegisterDelayedCallback(func() {
		during = h.query()
		h.env.SignalWorkflow(contract.SignalCancel, map[string]string{"reason": "never mind", "by": "jack"})
		h.env.UpdateWorkflow(contract.UpdateDecide, "second", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updateErr = err }, OnAccept: func() { t.Error("a second decision must be refused") }, OnComplete: func(any, error) {},
		}, bound(contract.Decision{Action: contract.ActionResend, Reason: "again", By: "kim"}))
	}, time.Hour+30*time.Second)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, "the cancel was refused, not applied while the resend went out")
	require.NotEqual(t, contract.AwaitingDecision, during.State, "the run left AwaitingDecision before planning")
	require.ErrorContains(t, updateErr, "not awaiting a decision")
	require.Equal(t, []contract.Resend{{Key: key + "~resend-1", By: "ivy", Reason: "the phone was off", Basis: contract.BasisDeliveryFailed}}, res.Resends, "one resend, nobody decided a second")
	require.Equal(t, 1, plans)
	require.True(t, timelineHasKind(h.query(), contract.KindDecisionRefused), "jack's cancel was refused")
}

// Point 5: a run that resumes an event loads every key an earlier run
// used, reconciles all of them, and numbers its next resend after them.
func TestAResumedEventReconcilesEveryKeyAndNeverReusesAResendKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	long := h.start.Add(-10 * time.Hour)
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: long,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: long}, {Key: key + "~resend-1", FirstAttemptAt: long.Add(time.Hour)}},
	}, nil)
	var planned []string
	var mu sync.Mutex
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (provider.Request, error) {
		mu.Lock()
		planned = append(planned, in.SendKey)
		mu.Unlock()
		return h.request(in.SendKey), nil
	})
	calls := h.reconcileReturns(activities.ReconcileOutput{Searched: true, ByKey: true})
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		return accepted("m-3", attempt, provider.Accepted), nil
	})
	h.statuses(provider.StatusDelivered)
	h.signal(time.Hour, contract.SignalResend, map[string]string{"reason": "not found anywhere", "by": "lee"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, []string{key, key + "~resend-1"}, calls.calls[0].Keys, "the first reconciliation covers every key")
	require.Equal(t, []string{key + "~resend-1", key + "~resend-2"}, planned, "the last key is planned again, then the next resend is number 2")
	require.Equal(t, []string{key, key + "~resend-1", key + "~resend-2"}, res.KeysUsed)
	require.Equal(t, key+"~resend-2", h.sends[0].Request.Key)
}

// Point 6: a settle that cannot be written fails the run visibly instead
// of completing as if the outcome were recorded.
func TestASettleThatCannotBeWrittenFailsTheRunVisibly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.settleErr = errors.New("ledger: settle order-58213-shipped: disk I/O error")
	h.prepared()
	h.acceptsAs("m-1")
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.Error(t, err)
	require.Equal(t, contract.Failed, res.State)
	require.Contains(t, res.Reason, "the outcome Delivered (delivered as message m-1) could not be recorded in the ledger: ledger: settle order-58213-shipped: disk I/O error")
	require.Equal(t, []string{"m-1"}, res.MessageIDs, "what was sent is still reported")
}

// The last attempt goes a little before the window closes, so a run can
// await a decision with the outcome unknown while the clock is still
// inside the window: a resend then is still reconciled first. Only a
// message known to have failed lets a resend skip the search.
func TestAResendJustBeforeTheWindowClosesIsStillReconciled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	calls := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		// The ledger holds the unknown attempts, the last one just now.
		return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.start.Add(h.policy.SendBudget() - 10*time.Second)}, nil
	})
	h.signal(h.policy.SendBudget()-time.Second, contract.SignalResend, map[string]string{"reason": "customer called", "by": "alice"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Less(t, calls.at[0], h.policy.SendBudget(), "the run awaited inside the window")
	require.Len(t, calls.at, 3, "at the window's end, before the resend, and before settling")
	require.Equal(t, contract.BasisReconciled, res.Resends[0].Basis)
}

// After a forced resend, the new key's own outcome decides: its failed
// delivery inside its window is resent on a plain decision.
func TestAfterABlindResendAPlainResendOfAFailedDeliveryIsAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		}
		return accepted("s-"+in.Request.Key, attempt, provider.Accepted), nil
	})
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{How: "sendy has no list endpoint"}, nil
	})
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		if h.env.Now().Sub(h.start) < 5*time.Hour {
			return provider.Message{ID: in.MessageID, Status: provider.StatusFailed}, nil
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	h.signal(4*time.Hour, contract.SignalResend, map[string]any{"reason": "customer confirmed", "by": "carol", "force": true})
	h.signal(5*time.Hour+10*time.Minute, contract.SignalResend, map[string]any{"reason": "the phone was off", "by": "carol"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Len(t, res.Resends, 2)
	require.Equal(t, contract.BasisBlind, res.Resends[0].Basis)
	require.Equal(t, contract.BasisDeliveryFailed, res.Resends[1].Basis)
}

// A message fails delivery quickly while a hung attempt of the key may
// still land: a resend decided meanwhile waits for that and searches
// first, and follows the late message instead of sending another.
func TestAResendWaitsForAHungAttemptBeforeSending(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.unknownThenAccepted("m-2", "bird: unknown")
	h.statusByID(map[string]provider.Status{"m-2": provider.StatusFailed})
	lands := 40 * time.Second
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		msgs := []provider.Message{{ID: "m-2", Reference: key, Status: provider.StatusFailed}}
		if since >= lands {
			msgs = append(msgs, provider.Message{ID: "m-1", Reference: key, Status: provider.StatusSent})
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: msgs}, nil
	})
	h.signal(20*time.Second, contract.SignalResend, map[string]string{"reason": "the first one failed", "by": "ivy"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Empty(t, res.Resends, "the late message was followed; nothing was resent")
	for _, s := range h.sends {
		require.Equal(t, key, s.Request.Key)
	}
	require.Contains(t, res.MessageIDs, "m-1")
}

// A hung attempt lands after a person cancelled: the look before settling
// finds the message, and the run says it was sent after all instead of
// settling as Cancelled.
func TestAMessageThatLandsAfterACancelIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since < 4*time.Hour {
			return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.start.Add(h.policy.SendBudget() - time.Minute)}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusSent}}}, nil
	})
	h.signal(4*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Unconfirmed, res.State)
	require.Contains(t, res.Reason, "message m-1 of the event turned up after the run had ended Cancelled")
	require.False(t, res.OutcomeUnknown, "the search found the message: its outcome is known")
	require.Equal(t, "Unconfirmed", h.settled.Outcome)
	require.Equal(t, "m-1", h.settled.MessageID)
}

// At a provider that cannot be searched, several attempts of a key without
// a certain answer may each have sent a message: the run says so, even
// when a person then cancels.
func TestSeveralUnknownAttemptsAtSendyArePossibleDuplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{How: "sendy has no list endpoint", Unsearchable: []reconcile.Unsearchable{{Key: key, Uncertain: 3}}}, nil
	})
	h.signal(4*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.PossibleDuplicate)
	require.True(t, timelineHas(h.query(), "3 attempts of "+key+" ended without a certain answer at bird, which cannot be searched by key"))
}

// hungThenDelivered is the Bird lock-expiry path of
// TestALateEffectOfAHungAttemptIsFoundBeforeSettling: attempt 1 hangs,
// attempt 2 is accepted as a new message m-2, and the search at
// acceptance finds only m-2 (the hung attempt has not landed yet). Every
// later search fails.
func (h *harness) hungThenDelivered() *lookups {
	h.unknownThenAccepted("m-2", "bird: no answer (timed out)")
	calls := h.reconcileSlow(nil, func(n int, _ time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if n == 1 {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-2", Reference: key, Status: provider.StatusSent}}}, nil
		}
		return activities.ReconcileOutput{}, errors.New("bird: 503 on the list endpoint")
	})
	h.statuses(provider.StatusDelivered)
	return calls
}

// A run whose message is delivered but whose look after the late-effect
// horizon fails says nothing about the hung attempt.
//
// Path (Bird): attempt 1 hangs and takes effect later (within the 30 s
// lock, or after it expired) as m-1; attempt 2 is accepted as m-2 (not a
// replay: the lock expired, or Bird stored no 5xx answer). The search at
// acceptance is by key and finds only m-2, so no possibleDuplicate; the
// run arms the late look for attempt 1. Every search after the horizon
// fails (503 on the list endpoint, a 401 during a credential rotation),
// while tracking and before settling. The run ends Delivered with
// messageIds [m-2], no possibleDuplicate, no outcomeUnknown: mayHaveSent
// runs only for Cancelled and Failed, and settleKnown's "could not be
// searched" possibleDuplicate only for keys another run used. With m-1
// alive the phone has two SMS and the result hides the second (the
// simulation's "silent duplicate"). Compare
// TestALateEffectOfAHungAttemptIsFoundBeforeSettling, the same path
// with the late look succeeding (duplicateSend), and sent(), which says
// possibleDuplicate when the search at acceptance cannot go by key.
func TestADeliveredRunWhoseLateLookFailsDoesNotHideTheHungAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	calls := h.hungThenDelivered()
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.True(t, timelineHasKind(h.query(), contract.KindSearchFailed), "the late look failed")
	require.Greater(t, len(calls.calls), 1, "the late look was tried")
	require.True(t, res.PossibleDuplicate || res.OutcomeUnknown,
		"attempt 1 may have sent a second SMS and no search after it could take effect succeeded, yet the result says neither possibleDuplicate nor outcomeUnknown: %+v", res)
}

// When the followed message fails while another live message of the
// event is known, the run asks for a resend.
//
// Path: attempt 1 ends without an answer, attempt 2 is accepted as m-2;
// the search at acceptance finds m-1 (attempt 1's) and m-2, both alive
// under the event key: duplicateSend. The run follows m-2 (its own
// answer), whose delivery fails: finalStatus() sets AwaitingDecision,
// "message m-2 ended failed: a resend is a new message under a new key",
// although m-1 is alive (in r.live) and the phone may well get it. A
// resend would make a third message; with no decision the run ends Failed
// after 72h. It should follow m-1 (to Delivered here) and not ask.
func TestAFailedMessageBesideALiveOneFollowsTheLiveOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.unknownThenAccepted("m-2", "bird: no answer (timed out)")
	// The provider's records agree with its status lookups: m-2 is failed
	// once a lookup said so; m-1 stays alive.
	var m2Failed atomic.Bool
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		m2 := provider.StatusSent
		if m2Failed.Load() {
			m2 = provider.StatusFailed
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
			{ID: "m-1", Reference: key, Status: provider.StatusSent},
			{ID: "m-2", Reference: key, Status: m2},
		}}, nil
	})
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		if in.MessageID == "m-2" {
			m2Failed.Store(true)
			return provider.Message{ID: "m-2", Status: provider.StatusFailed}, nil
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	h.run()
	res, _ := h.result()
	require.True(t, res.DuplicateSend, "two live messages under the event key")
	s := h.query()
	require.False(t, timelineHasKind(s, contract.KindAwaitingDecision),
		"m-2 failed while m-1 of the event is alive, yet the run asked for a resend; it ended %s: %s", res.State, res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, "m-1", h.settled.MessageID)
	require.Empty(t, res.ResendKeys)
}

// live bookkeeping: m-1 accepted (live), then failed; the resend's m-2 is
// delivered. A later look that sees m-1 failed and m-2 delivered is no
// duplicate.
func TestAFailedThenResentMessageIsNoDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			if attempt == 1 {
				return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
			}
			out := accepted("m-1", attempt, provider.Replayed)
			out.Uncertain, out.UncertainSince = true, h.start
			return out, nil
		}
		return accepted("m-2", attempt, provider.Accepted), nil
	})
	h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
		{ID: "m-1", Reference: key, Status: provider.StatusFailed},
		{ID: "m-2", Reference: key + "~resend-1", Status: provider.StatusDelivered},
	}})
	h.signal(time.Hour, contract.SignalResend, map[string]string{"reason": "failed", "by": "alice"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.False(t, res.DuplicateSend, "%v", timelineTexts(h.query()))
}

// A failed search overwrites "cannot speak", and a plain resend goes
// out blind.
//
// Path: attempt 1 of the event key ends without an answer, attempt 2 is
// accepted as m-1 (Uncertain). The search for a second message under the
// key succeeds but cannot speak (Bird cannot find m-1 yet: Vanished):
// r.look.last = searchMute, possibleDuplicate. While the run tracks m-1,
// the late look at the horizon (track -> recheck -> lookForDuplicates)
// fails: r.look.last = searchFailed, which REPLACES searchMute (before
// the change, reconcileFailed was set and unsearchable stayed true), and
// recheck marks the late look done anyway. m-1 then fails: the run awaits
// a decision. A plain resend now passes checkState (it refuses only while
// last == searchMute) and resendSearches skips the search (inside the
// window, primary failed, late look "done"): ~resend-1 goes out with basis
// "delivery-failed", no search that could speak ever having ruled out a
// message of attempt 1. docs/decisions.md: "Nothing is resent blind unless
// a person says so ... When the provider cannot be searched at all for the
// event ... a plain resend is refused at once." Expected: the plain
// resend is refused (or searched first and held), and nothing goes out
// under ~resend-1 without force.
func TestAFailedLateLookAfterAMuteSearchStillRefusesAPlainResend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.uncertainThenAcceptedThenResent("bird: no answer (timed out)")
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since >= time.Minute && since < 2*time.Hour {
			return activities.ReconcileOutput{}, errSearch // the late look, and the retries after it
		}
		// Bird does not show m-1 yet (it just accepted it): a message id of
		// ours it cannot find, so the search cannot speak.
		return activities.ReconcileOutput{Searched: true, ByKey: true, Vanished: []string{"m-1"}, How: "ledger: 1 message id; bird cannot find m-1; searched by key: nothing"}, nil
	})
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		if in.MessageID == "m-1" && h.env.Now().Sub(h.start) > 30*time.Minute {
			return provider.Message{ID: "m-1", Status: provider.StatusFailed}, nil
		}
		if in.MessageID == "m-1" {
			return provider.Message{ID: "m-1", Status: provider.StatusSent}, nil
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	resend := h.decideByUpdate(40*time.Minute, "plain", contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "alice"})
	h.run()
	res, _ := h.result()
	s := h.query()
	require.True(t, timelineHas(s, "could not search"), "the late look failed")
	require.True(t, timelineHas(s, "message m-1 is failed"), "m-1 failed: the run awaited a decision")
	var sentResend bool
	for _, in := range h.sends {
		sentResend = sentResend || in.Request.Key == key+"~resend-1"
	}
	require.False(t, sentResend,
		"a plain resend (ack %v, err %v) went out under ~resend-1 although no search that could speak ruled out attempt 1's message; resends %+v, blind %v",
		resend.ack != nil, resend.err, res.Resends, res.BlindResends)
}

// uncertainThenAcceptedThenResent: attempt 1 of the event key ends
// without an answer (reason), attempt 2 is accepted as m-1 after it
// (uncertain), and any resend key is accepted as m-2.
func (h *harness) uncertainThenAcceptedThenResent(reason string) {
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key != key {
			return accepted("m-2", attempt, provider.Accepted), nil
		}
		if attempt == 1 {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = reason })
		}
		out := accepted("m-1", attempt, provider.Accepted)
		out.Uncertain, out.UncertainSince = true, h.start
		return out, nil
	})
}
