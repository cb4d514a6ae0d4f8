package workflows

// Deferred resends: a resend decided while the provider's records cannot
// be searched is acknowledged and waits until a search succeeds, within
// the deadline of the wait it was decided in; a later decision replaces
// it. (TestAnAcknowledgedResendIsCarriedOutOnceASearchSucceeds and
// TestADeferredResendKeepsTheFirstDeadline are the plain paths.)

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"

	"context"
	"sync/atomic"
)

// searchesDownJustAfter makes every search succeed and find nothing,
// except those that begin in the five minutes after one of the times
// given (since the start), which fail.
func (h *harness) searchesDownJustAfter(times ...time.Duration) *lookups {
	return h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		for _, at := range times {
			if since >= at && since < at+5*time.Minute {
				return activities.ReconcileOutput{}, searchDown()
			}
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
	})
}

// A later deferred resend inherits an earlier one's deadline.
//
// Path: the window closes, the search finds nothing, the run awaits a
// decision until D1 (about 74h50m after the start). At 74h Alice resends;
// the search fails, so the resend waits (deferred, deferredUntil = D1); a
// search ten minutes later succeeds and the resend goes out under
// ~resend-1 as m-9, whose delivery fails at once. The run awaits a decision
// again, until 72h later. Once ~resend-1's window has closed Bob resends
// (78h); that search fails once, so his resend waits too, but
// deferredUntil was never reset: the run shows "awaiting a decision
// until" D1, already past, and ends Failed at once ("the resend decided by
// bob ... was never carried out ... within 72h0m0s"), without searching
// again, although a search ten minutes later succeeds. An acknowledged
// resend is lost and no SMS is sent.
func TestALaterDeferredResendGetsItsOwnDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		switch in.Request.Key {
		case r1:
			return accepted("m-9", attempt, provider.Accepted), nil
		case r2:
			return accepted("m-10", attempt, provider.Accepted), nil
		}
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: 502" })
	})
	h.statusByID(map[string]provider.Status{"m-9": provider.StatusFailed, "m-10": provider.StatusDelivered})
	alice, bob := 74*time.Hour, 78*time.Hour
	calls := h.searchesDownJustAfter(alice, bob)
	h.signal(alice, contract.SignalResend, map[string]string{"reason": "customer called", "by": "alice"})
	h.signal(bob, contract.SignalResend, map[string]string{"reason": "customer called again", "by": "bob"})
	h.run()
	res, _ := h.result()
	require.True(t, timelineHas(h.query(), "carrying out the resend decided by alice"), "alice's resend waited for a search and was carried out")
	calls.mu.Lock()
	n := len(calls.calls)
	calls.mu.Unlock()
	require.Equal(t, contract.Delivered, res.State,
		"bob's resend, whose search failed once, was dropped at alice's old deadline: %s (%d searches)", res.Reason, n)
	require.Equal(t, []string{r1, r2}, res.ResendKeys)
}

// A carried-out deferred resend that never reaches recordResend leaves
// its deadline behind, and a later resend inherits it.
//
// Path: Bird's window closes with the outcome unknown; the search at the
// window finds nothing; the run awaits until D1 (window + 72h). Alice
// resends at Sendy; the search before it fails, so it is deferred with
// deferredUntil = D1. The retried search 10 minutes later succeeds:
// await() carries it out with `r.pending, r.deferred = r.deferred, nil`
// (deferredUntil is NOT cleared). planResend -> moveTo -> PlanMove fails
// ("decide again"): the run awaits a decision again, with a fresh 72h
// deadline, but deferredUntil still holds D1. Bob (after D1, well inside
// the new wait) resends at Bird; its search fails once, so it is deferred;
// searchBeforeResend keeps the stale deferredUntil (it is not zero), and
// await() sets the deadline to D1, already past: the run ends Failed at
// once, "the resend decided by bob ... was never carried out", without a
// single retried search. docs/decisions.md: "Once a resend is carried
// out, its key has a wait of its own, and a resend decided there gets
// that wait's deadline." Expected: bob's resend goes out once a search
// succeeds (10 minutes later) and the run ends Delivered.
func TestAResendAfterADeferredResendWhoseMoveFailedKeepsItsOwnDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.env.OnActivity(a.PlanMove, mock.Anything, mock.Anything).Return(activities.MoveOutput{},
		temporal.NewNonRetryableApplicationError("sendy: no settings on this worker", "MoveUnavailable", nil))
	window := h.policy.SendBudget()
	alice := window + time.Hour
	d1 := window + h.policy.DecisionDeadline
	bob := d1 + time.Hour
	calls := h.searchesDownJustAfter(alice, bob)
	h.signal(alice, contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice", "provider": "sendy"})
	h.signal(bob, contract.SignalResend, map[string]any{"reason": "customer called again", "by": "bob"})
	h.run()
	res, _ := h.result()
	s := h.query()
	require.True(t, timelineHas(s, "carrying out the resend decided by alice"), "alice's deferred resend was carried out")
	require.True(t, timelineHas(s, "the resend at sendy decided by alice cannot be carried out"), "its move failed")
	calls.mu.Lock()
	n := len(calls.calls)
	calls.mu.Unlock()
	require.Equal(t, contract.Delivered, res.State,
		"bob's acknowledged resend, decided in a wait of its own, was dropped at alice's old deadline: %s (%d searches, ended %s after start)",
		res.Reason, n, h.env.Now().Sub(h.start))
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
}

// The second route to the same cause: the carried-out deferred resend
// searches again (the retried search reported an attempt that may still
// take effect, so it is not fresh) and finds m-1 alive: "resend not
// needed", the run follows m-1 (Accepted) and deferredUntil keeps D1. m-1
// fails, the run awaits a decision for 72h; Bob resends after D1, his
// search fails once, and the run ends Failed at once with Bob's
// acknowledged resend never carried out. Expected: Delivered under
// ~resend-1.
func TestAResendAfterADeferredResendThatFoundTheMessageKeepsItsOwnDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.unknownUntilResent()
	h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed, "m-9": provider.StatusDelivered})
	window := h.policy.SendBudget()
	alice := window + time.Hour
	d1 := window + h.policy.DecisionDeadline
	bob := d1 + time.Hour
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		switch {
		case since < alice:
			return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
		case since < alice+5*time.Minute, since >= bob && since < bob+5*time.Minute:
			return activities.ReconcileOutput{}, searchDown()
		case since < alice+10*time.Minute+30*time.Second:
			// The retried search succeeds; the ledger reports an attempt
			// that may still take effect for a minute.
			return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.env.Now()}, nil
		case since < bob:
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusSent}}}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusFailed}}}, nil
	})
	h.signal(alice, contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice"})
	h.signal(bob, contract.SignalResend, map[string]any{"reason": "customer called again", "by": "bob"})
	h.run()
	res, _ := h.result()
	s := h.query()
	require.True(t, timelineHas(s, "carrying out the resend decided by alice"), "alice's deferred resend was carried out")
	require.True(t, timelineHas(s, "resend not needed: a message of this event is alive"), "its search found m-1")
	require.True(t, timelineHas(s, "message m-1 is failed"), "m-1 failed: a new wait")
	require.Equal(t, contract.Delivered, res.State,
		"bob's acknowledged resend was dropped at alice's old deadline: %s (ended %s after start)", res.Reason, h.env.Now().Sub(h.start))
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
}

// A resend acknowledged during the last retried search, which then
// succeeds, is dropped as if no search had succeeded.
//
// Path: every attempt ends without an answer; the search at the window
// fails; the run awaits until D (window + 72h) and searches again every
// 10 minutes. The last retry starts at D-10m; the provider is slow and it
// returns at D+15m, successfully, finding no message. At D-6m a person
// resends by update; the run is AwaitingDecision, so the resend is
// acknowledged ("if the search fails, the resend waits and is carried out
// once a search succeeds"). When the retry returns, await() takes the
// resend but freshSearch is only set for a deferred resend, so
// resend() searches again; that search fails, the resend is deferred with
// deferredUntil = lastDeadline = D, already past, and await() ends the
// run at once: Failed, "the resend decided by ... was never carried out:
// no search of bird's records that could rule out a message succeeded".
// A search that started before the deadline, after the resend was
// acknowledged, did succeed and found nothing: docs/decisions.md ("If no
// search started before then succeeds, the run ends Failed") says the
// resend is carried out, as it is when the same search ends a deferred
// resend's wait. Expected: the resend goes out under ~resend-1.
func TestAResendAcknowledgedDuringALastSearchThatSucceedsIsCarriedOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	deadline := h.policy.SendBudget() + h.policy.DecisionDeadline
	slow := 0 // the last retry, the first search to begin 15 minutes before the deadline or later
	h.reconcileSlow(func(n int, since time.Duration) time.Duration {
		if since >= deadline-15*time.Minute && slow == 0 {
			slow = n
			return 25 * time.Minute // the last retry: slow, then it succeeds
		}
		return 0
	}, func(n int, _ time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if n == slow {
			return activities.ReconcileOutput{Searched: true, ByKey: true, How: "searched bird by key: nothing"}, nil
		}
		return activities.ReconcileOutput{}, searchDown()
	})
	resend := h.decideByUpdate(deadline-6*time.Minute, "erin", contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "erin"})
	h.run()
	res, _ := h.result()
	require.NoError(t, resend.err)
	require.NotNil(t, resend.ack, "the resend was acknowledged before the deadline")
	s := h.query()
	require.True(t, timelineHas(s, "reconciled on retry: searched bird by key: nothing"), "the retry that started before the deadline succeeded and found nothing")
	require.NotEqual(t, contract.Failed, res.State,
		"the resend acknowledged at D-6m, followed by a search that succeeded and found nothing, was dropped: %s", res.Reason)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
}

// As TestAnAcknowledgedResendIsCarriedOutOnceASearchSucceeds, with a
// flapping search: a resend acknowledged by the update waits because its
// search fails. Every search of the await loop succeeds (nothing found)
// and every search inside the resend fails. The run must not cycle for
// ever (each cycle resets the decision deadline): by the decision
// deadline the acknowledged resend is carried out or the run has ended.
func TestADeferredResendDoesNotCycleForEverOnAFlappingSearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	stop := h.policy.SendBudget() + h.policy.DecisionDeadline + 2*time.Hour
	calls := h.reconcileSlow(nil, func(n int, since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if since >= stop || n == 1 || n%2 == 0 {
			return activities.ReconcileOutput{}, temporal.NewNonRetryableApplicationError("bird: 502 on the list endpoint", "ProviderDown", nil)
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, How: "bird: nothing under the keys"}, nil
	})
	decided := h.policy.SendBudget() + time.Minute
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "u-1", &updateCallbacks{}, bound(contract.Decision{Action: contract.ActionResend, Reason: "customer called", By: "alice"}))
	}, decided)
	var during contract.Status
	var resentBy int
	h.env.RegisterDelayedCallback(func() {
		during = h.query()
		h.mu.Lock()
		for _, s := range h.sends {
			if s.Request.Key != key {
				resentBy++
			}
		}
		h.mu.Unlock()
	}, stop)
	h.signal(stop+time.Hour, contract.SignalCancel, map[string]string{"reason": "end of test", "by": "reviewer"})
	h.run()
	calls.mu.Lock()
	searches := len(calls.calls)
	calls.mu.Unlock()
	if during.State == "" {
		// The run ended before the check point: what it sent is final.
		res, _ := h.result()
		during.State, during.Reason = res.State, res.Reason
		for _, k := range res.KeysUsed {
			if k != key {
				resentBy++
			}
		}
	}
	require.True(t, resentBy > 0 || during.State.Final(),
		"%s after the resend was acknowledged (decision deadline %s) the run is still %s with the resend neither carried out nor given up, after %d searches; reason: %s",
		stop-decided, h.policy.DecisionDeadline, during.State, searches, during.Reason)
}

// Double click and cancel while a resend waits: a resend is acknowledged
// and deferred (search failed), a second resend and then a cancel come;
// the second replaces the first, the cancel wins over it, nothing is
// sent, and the Cancelled result says an SMS may have gone out.
func TestACancelWhileADeferredResendWaitsWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: h.start.Add(h.policy.SendBudget() - time.Minute)}
	}
	h.searchesFail(errSearch)
	decided := h.policy.SendBudget() + time.Hour
	var errs [2]error
	for i, by := range []string{"alice", "bob"} {
		h.env.RegisterDelayedCallback(func() {
			h.env.UpdateWorkflow(contract.UpdateDecide, "u-"+by, &updateCallbacks{
				reject:   func(err error) { errs[i] = err },
				complete: func(_ any, err error) { errs[i] = err },
			}, bound(contract.Decision{Action: contract.ActionResend, Reason: "customer called", By: by}))
		}, decided+time.Duration(i)*45*time.Minute)
	}
	h.signal(decided+2*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1], "the second resend replaces the deferred one")
	require.Equal(t, contract.Cancelled, res.State, res.Reason)
	require.Empty(t, res.ResendKeys)
	for _, s := range h.sends {
		require.Equal(t, key, s.Request.Key, "nothing sent under a new key")
	}
	require.True(t, res.OutcomeUnknown)
	require.True(t, timelineHas(h.query(), "this decision replaces the resend decided by alice"))
}

// A cancel refused during the search at the deadline is told "the run
// ends without a decision", and then the run sends.
//
// Path: the key's window closes with the outcome unknown; the search at
// the window finds nothing; the run awaits until D. Alice resends; the
// search before it fails, so the resend waits (deferred until D) and
// every retried search fails. At D the run searches once more (the new
// search at the deadline); the provider is slow and answers at D+5m,
// successfully, with nothing found. At D+1m Bob cancels by update:
// checkState refuses it with "refused: the decision deadline passed ...;
// the run ends without a decision". The search then succeeds and the run
// carries out Alice's resend: ~resend-1 goes out at D+5m. Bob was told
// the run ends without a decision and nothing more happens; an SMS went
// out after his cancel was refused with that reason. Expected: a cancel
// that comes while an acknowledged resend is still pending either
// replaces it (docs/decisions.md: "a new decision replaces it") or is
// refused with a reason that says the resend will still be carried out.
func TestACancelRefusedAtTheDeadlineIsNotToldTheRunEndsWhenItThenSends(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	window := h.policy.SendBudget()
	alice := window + time.Hour
	var deadline atomic.Int64 // since start
	h.env.RegisterDelayedCallback(func() {
		deadline.Store(int64(h.query().DecisionDeadline.Sub(h.start)))
	}, window+30*time.Minute)
	h.env.OnActivity(a.Reconcile, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		if d := time.Duration(deadline.Load()); d > 0 && h.env.Now().Sub(h.start) >= d {
			return 5 * time.Minute // the search at the deadline: slow
		}
		return 0
	}).Return(func(context.Context, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		since := h.env.Now().Sub(h.start)
		d := time.Duration(deadline.Load())
		if since < alice || (d > 0 && since >= d) {
			return activities.ReconcileOutput{Searched: true, ByKey: true, How: "searched bird by key: nothing"}, nil
		}
		return activities.ReconcileOutput{}, searchDown()
	})
	h.decideByUpdate(alice, "alice", contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "alice"})
	var cancel *decideByUpdate
	h.env.RegisterDelayedCallback(func() {
		d := time.Duration(deadline.Load())
		cancel = h.decideByUpdate(d+time.Minute-(alice+time.Minute), "bob", contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "bob"})
	}, alice+time.Minute)
	h.run()
	res, _ := h.result()
	require.NotZero(t, deadline.Load())
	require.NotNil(t, cancel)
	s := h.query()
	require.True(t, timelineHas(s, "carrying out the resend decided by alice"), "the search at the deadline carried alice's resend out")
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys, "the run sent after the deadline")
	require.Error(t, cancel.err, "bob's cancel came after the deadline")
	require.NotContains(t, cancel.err.Error(), "the run ends without a decision",
		"bob was told the run ends without a decision, then it sent ~resend-1 and ended %s", res.State)
}
