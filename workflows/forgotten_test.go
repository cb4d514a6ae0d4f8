package workflows

// The paths of issue "the send is never forgotten, hidden or dropped",
// one test each: an attempt that may have sent is looked for before the
// run settles, a message found is reported, a decision acknowledged is
// carried out, and a send that never began is sent again.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// uncertainFirst answers attempt 1 of the event key without a certain
// answer and every later attempt with then; the ledger (Recall) holds
// attempt 1 as uncertain.
func (h *harness) uncertainFirst(then func(attempt int32) (activities.SendOutput, error)) {
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if attempt == 1 && in.Request.Key == key {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: timed out" })
		}
		return then(attempt)
	})
	h.recall = func(in activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 2, LastUncertainAt: h.start}
	}
}

// 1. Attempt 1 ends without an answer, attempt 2 is refused with a 401
// (a credential rotated). The refusal says nothing about attempt 1: the
// run searches once attempt 1 can no longer take effect, finds its
// message, and follows it to delivery instead of ending Failed.
func TestARejectionAfterAnUncertainAttemptSearchesFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.uncertainFirst(func(attempt int32) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) { r.Reason = "bird: 401 unauthorized" })
	})
	calls := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusSent}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{"m-1"}, res.MessageIDs)
	require.NotEmpty(t, calls.at)
	require.GreaterOrEqual(t, calls.at[0], h.policy.LateEffectHorizon, "the search waits until attempt 1 can no longer take effect")
	require.Equal(t, "Delivered", h.settled.Outcome)
}

// 1, where nothing can be searched: Sendy, no message id. The run does
// not end Failed: it awaits a decision with the outcome unknown, and a
// cancel says that an SMS may have gone out.
func TestARejectionAfterAnUnsearchableUncertainAttemptIsNotFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.uncertainFirst(func(attempt int32) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) { r.Reason = "sendy: 402 payment required" })
	})
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{How: "sendy has no list endpoint", LastUncertainAt: h.start}, nil
	})
	var during contract.Status
	h.env.RegisterDelayedCallback(func() { during = h.query() }, 2*time.Hour)
	h.signal(3*time.Hour, contract.SignalCancel, map[string]string{"reason": "topped up, will send by hand", "by": "erin"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.AwaitingDecision, during.State, during.Reason)
	require.Contains(t, during.Reason, "the outcome is unknown")
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.OutcomeUnknown, res.Reason)
	require.Contains(t, res.Reason, "may have gone out")
	require.Contains(t, h.settled.Reason, "may have gone out", "the ledger's record says it too")
}

// 2. Every attempt ends without an answer, the window closes and every
// search fails; a person cancels. The uncertain attempts alone arm the
// last look before the run settles, and a run that cannot complete it
// says so in its result.
func TestFailedSearchesStillGetALastLookAndSaySo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	last := h.start.Add(h.policy.SendBudget() - time.Minute)
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: last}
	}
	calls := h.searchesFail(errors.New("bird: 503 on the list endpoint"))
	cancelAt := h.policy.SendBudget() + 4*time.Hour
	h.signal(cancelAt, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	calls.mu.Lock()
	defer calls.mu.Unlock()
	require.GreaterOrEqual(t, calls.at[len(calls.at)-1], cancelAt, "a look after the cancel, before the run settles")
	require.True(t, res.OutcomeUnknown)
	require.Contains(t, res.Reason, "may have gone out")
}

// 3. A resend acknowledged by the update waits because the search fails;
// later searches succeed and find nothing. The resend is carried out,
// not consumed: the message goes out under the resend key.
func TestAnAcknowledgedResendIsCarriedOutOnceASearchSucceeds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	decided := h.policy.SendBudget() + time.Hour
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since >= decided && since < decided+h.policy.ReconcileBudget+time.Minute { // the search inside the resend, retried until its budget ends
			return activities.ReconcileOutput{}, errors.New("bird: 502 on the list endpoint")
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
	})
	var ack contract.DecisionAck
	var ackErr error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "u-1", &updateCallbacks{
			complete: func(v any, err error) {
				if err == nil {
					ack = v.(contract.DecisionAck)
				}
				ackErr = err
			},
		}, bound(contract.Decision{Action: contract.ActionResend, Reason: "customer called", By: "alice"}))
	}, decided)
	h.run()
	res, err := h.result()
	require.NoError(t, ackErr)
	require.Contains(t, ack.Message, "resend accepted")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
	require.Len(t, res.Resends, 1)
	require.Equal(t, "alice", res.Resends[0].By)
	require.Equal(t, contract.BasisReconciled, res.Resends[0].Basis)
	require.True(t, timelineHas(h.query(), "carrying out the resend decided by alice"), "%v", h.query().Timeline)
}

// 4. The event key's attempt was uncertain, the search found nothing, the
// resend went out under ~resend-1, and then the first attempt's message
// lands: two live messages under two keys are a duplicate, reported.
func TestTwoLiveMessagesUnderTwoKeysAreADuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	var mu sync.Mutex
	n := 0
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n <= 2 { // at the window, and before the resend
			return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
			{ID: "m-1", Reference: key, Status: provider.StatusDelivered},
			{ID: "m-9", Reference: key + "~resend-1", Status: provider.StatusDelivered},
		}}, nil
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: h.start.Add(h.policy.SendBudget() - time.Minute)}
	}
	h.signal(h.policy.SendBudget()+time.Hour, contract.SignalResend, map[string]string{"reason": "customer called", "by": "alice"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.ElementsMatch(t, []string{"m-1", "m-9"}, res.MessageIDs)
	require.True(t, res.DuplicateSend, "two live messages of one event under two keys")
}

// 4, after a failover: a late message at the provider the run left is
// still found by one last look there, and reported with the one sent
// at the fallback.
func TestARunThatMovedLooksOnceMoreAtTheProviderItLeft(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	via := key + "~via-sendy"
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == via {
			return accepted("s-1", attempt, provider.Accepted), nil
		}
		return activities.SendOutput{}, failAttempt(provider.NotExecuted, attempt)
	})
	calls := h.reconcileWith(func(since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if in.Provider == "bird" && since >= h.policy.SendBudget() {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "b-1", Reference: key, Status: provider.StatusDelivered}}}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, NotExecutedOnly: true}, nil
	})
	h.planned()
	h.statuses(provider.StatusSent, provider.StatusDelivered)
	h.runWithFallback("sendy")
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.ElementsMatch(t, []string{"s-1", "b-1"}, res.MessageIDs, "%v", h.query().Timeline)
	require.True(t, res.DuplicateSend)
	calls.mu.Lock()
	defer calls.mu.Unlock()
	lastBird := -1
	for i, c := range calls.calls {
		if c.Provider == "bird" {
			lastBird = i
			require.NotContains(t, c.KnownIDs, "s-1", "a provider is asked only for its own message ids")
		}
	}
	require.Greater(t, lastBird, 0)
	require.Greater(t, calls.at[lastBird], calls.at[0], "the look at bird after the move")
}

// 5. A Temporal reset: the new run replays the old run's claim, so the
// ledger names the old run and the first send is fenced. The run takes
// the event over (a new claim in its name), learns the keys the event
// had, and goes on: one message, settled.
func TestAResetRunTakesTheEventOver(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	var mu sync.Mutex
	prepares := 0
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(func(context.Context, activities.PrepareInput) (activities.PrepareOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		prepares++
		return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}, LastUncertainAt: h.start}, nil
	})
	fenced := true
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if fenced {
			fenced = false
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("ledger: the event is held by another run: attempt 1 of "+key+" belongs to run new, but run old holds the event now", activities.ErrFenced, nil)
		}
		return accepted("m-1", attempt, provider.Replayed), nil
	})
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusDelivered}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, 1, prepares, "the claim made again in the run's name")
	require.Equal(t, "Delivered", h.settled.Outcome)
	require.True(t, timelineHas(h.query(), "taking the event over"))
}

// 5, at the end: the ledger holds a key this run never knew (the run a
// reset replaced sent under it). The settle refuses, the run searches
// that key, finds its message, and only then settles.
func TestTheSettleRefusesKeysTheRunDoesNotKnow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	calls := h.reconcileByKey(map[string]provider.Message{key + "~resend-1": {ID: "m-7", Status: provider.StatusDelivered}})
	h.settleUnknown = &activities.SettleOutput{UnknownKeys: []activities.SendKey{{Key: key + "~resend-1", FirstAttemptAt: h.start.Add(4 * time.Hour)}}}
	h.signal(h.policy.SendBudget()+time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Unconfirmed, res.State, res.Reason)
	require.Contains(t, res.KeysUsed, key+"~resend-1")
	require.Contains(t, res.MessageIDs, "m-7")
	require.Equal(t, "Unconfirmed", h.settled.Outcome)
	require.GreaterOrEqual(t, len(h.settles), 2, "refused once, then written")
	calls.mu.Lock()
	defer calls.mu.Unlock()
	require.Contains(t, calls.calls[len(calls.calls)-1].Keys, key+"~resend-1")
}

// 6. A message id our ledger recorded that the provider no longer finds
// is an unknown outcome: never a failover's proof, and a plain resend is
// refused as blind.
func TestAVanishedMessageIsAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Vanished: []string{"m-1"}}, nil
	})
	plans := h.planned()
	var refused error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "u-1", &updateCallbacks{
			reject: func(err error) { refused = err },
		}, bound(contract.Decision{Action: contract.ActionResend, Reason: "customer called", By: "alice"}))
	}, h.policy.SendBudget()+time.Hour)
	h.signal(h.policy.SendBudget()+2*time.Hour, contract.SignalCancel, map[string]string{"reason": "gave up", "by": "alice"})
	h.runWithFallback("sendy")
	res, _ := h.result()
	require.Empty(t, *plans, "no failover on a message that vanished")
	require.Error(t, refused, "a plain resend is blind here")
	require.Equal(t, contract.Cancelled, res.State)
	require.Contains(t, res.MessageIDs, "m-1")
	require.True(t, res.OutcomeUnknown, res.Reason)
}

// queuedThenAccepted mocks Send: the first queued sends wait in the task
// queue for 4 h, past their budget, and none of them begins an attempt;
// every later one is accepted as m-1. The ledger (Recall) holds the
// attempts that began, none before the first.
func (h *harness) queuedThenAccepted(queued int) {
	h.env.OnActivity(a.Send, mock.Anything, mock.Anything).After(4*time.Hour).Return(activities.SendOutput{}, errors.New("never reached")).Times(queued)
	h.acceptsAs("m-1")
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		// Recall calls h.recall with h.mu held: h.sends are the sends that began.
		if len(h.sends) == 0 {
			return activities.RecallOutput{} // the ledger holds no attempt
		}
		return activities.RecallOutput{FirstAttemptAt: h.env.Now(), Attempts: len(h.sends)}
	}
}

// 7. The send waits in the task queue past its budget: no attempt began,
// so nothing reached the provider and the key's window has not started.
// The run sends again instead of awaiting a decision as "unknown".
func TestASendThatNeverLeftTheQueueIsSentAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.queuedThenAccepted(1)
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key}, res.KeysUsed)
	require.True(t, timelineHas(h.query(), "never left the task queue"))
}

// 7, for a resend key: a resend key is reported as "N tries" of its
// window with no attempt begun, counting the windows of the key before
// it.
//
// Path: three windows of the event key end with no attempt begun (the
// send waited in the task queue each time; the ledger holds no attempt):
// notSentLoops reaches 3 and the run awaits a decision, "no attempt ...
// ever began in 3 tries ... a plain resend is safe". A person resends;
// the first window of ~resend-1 ends the same way. notSentLoops is not
// reset for the new key, so it is 4 and the run awaits a decision again
// at once ("no attempt under ~resend-1 ever began in 4 tries"), after one
// window of that key, instead of sending it again as it does for a key's
// first windows. With no second decision it ends Failed.
func TestANewResendKeyCountsItsOwnWindowsWithNoAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.queuedThenAccepted(4)
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, ByKey: true})
	h.statuses(provider.StatusDelivered)
	h.signal(12*time.Hour+30*time.Minute, contract.SignalResend, map[string]string{"reason": "nothing ever left", "by": "frank"})
	h.run()
	res, _ := h.result()
	s := h.query()
	require.True(t, timelineHas(s, "no attempt under "+key+" ever began in 3 tries"), "the event key awaited a decision after its third window")
	require.False(t, timelineHas(s, "~resend-1 ever began in 4 tries"),
		"the first window of ~resend-1 with no attempt is counted as its 4th: the run awaits a decision instead of sending the key again (%s)", res.Reason)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key, key + "~resend-1"}, res.KeysUsed)
}

// A replay that carries the message's final status is taken as it: the
// run ends Delivered at once.
func TestAReplayedFinalStatusIsTakenAsSuch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		out := accepted("m-1", attempt, provider.Replayed)
		out.Result.Status = provider.StatusDelivered
		return out, nil
	})
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		return provider.Message{}, errors.New("sendy: status lookups are down")
	}).Maybe()
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
}

// updateCallbacks adapts the test environment's update callbacks.
type updateCallbacks struct {
	reject   func(error)
	complete func(any, error)
}

func (u *updateCallbacks) Accept() {}
func (u *updateCallbacks) Reject(err error) {
	if u.reject != nil {
		u.reject(err)
	}
}
func (u *updateCallbacks) Complete(v any, err error) {
	if u.complete != nil {
		u.complete(v, err)
	}
}

// 3, bounded: a resend that waits for a search keeps the deadline of the
// wait it was decided in. Every search after the decision fails: the run
// ends Failed by that deadline, saying the resend was never carried out.
func TestADeferredResendKeepsTheFirstDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	decided := h.policy.SendBudget() + time.Hour
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since >= decided {
			return activities.ReconcileOutput{}, errors.New("bird: 502 on the list endpoint")
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
	})
	h.signal(decided, contract.SignalResend, map[string]string{"reason": "customer called", "by": "alice"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Failed, res.State)
	require.Contains(t, res.Reason, "the resend decided by alice (customer called) was never carried out")
	require.Empty(t, res.ResendKeys)
	// The wait began when the window closed (just before SendBudget); its
	// deadline is 72 h later, and the last search may run its budget.
	require.Less(t, h.env.Now().Sub(h.start), h.policy.SendBudget()+h.policy.DecisionDeadline+h.policy.ReconcileBudget+time.Minute)
}

// 5, while awaiting a decision: the run a reset started resends, and its
// first send under the resend key is fenced. The ledger knows only the
// event key (the resend key was never tried): the run takes the event
// over and carries on with its own newer key, not back to the event key.
func TestATakeoverKeepsTheRunsNewerKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.statuses(provider.StatusDelivered)
	resend := key + "~resend-1"
	h.sendFencedOnce(underANewKey, func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: 502" })
		}
		return accepted("m-9", attempt, provider.Accepted), nil
	})
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}},
	}, nil).Once()
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, ByKey: true})
	h.signal(h.policy.SendBudget()+time.Hour, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{resend}, res.ResendKeys)
	require.Equal(t, []string{"m-9"}, res.MessageIDs)
	require.True(t, timelineHas(h.query(), "took the event over"), "%v", h.query().Timeline)
}

// 7, again: a send of the key that waited in the queue ends with the
// outcome unknown, the ledger shows its first attempt later than the run
// thought, so the window is still open and the run sends the key again
// in a new activity. That activity's attempts restart at 1: it must
// number its ledger rows after the run's earlier ones (AfterRetries), or
// it overwrites the record of the uncertain attempt, and a second
// message behind it goes unreported (the Sendy burst drill, seed 4).
func TestASecondSendOfAKeyNumbersItsRowsAfterTheFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	var mu sync.Mutex
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		switch len(h.sends) {
		case 1: // the retries waited in the queue past their budget
			return activities.SendOutput{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil)
		case 2: // the last attempt's answer was lost
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		}
		return accepted("m-1", attempt, provider.Accepted), nil
	})
	// The key's first attempt began much later than the run asked for it
	// (it waited in the queue): its window is open for a while yet.
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.env.Now().Add(-time.Second), Attempts: 1, LastUncertainAt: h.env.Now().Add(-time.Second)}
	}
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusDelivered}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.GreaterOrEqual(t, len(h.sends), 3, "the retries' Send, the last attempt, and the Send of the window that is still open")
	require.False(t, h.sends[0].AfterRetries, "the run's first Send of the key numbers from 1")
	for _, s := range h.sends[1:] {
		require.True(t, s.AfterRetries, "a later Send of %s numbers its rows after the earlier ones", s.Request.Key)
	}
}
