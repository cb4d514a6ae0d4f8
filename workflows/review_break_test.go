package workflows

// Adversarial review of the snapshot "snapshot under review" (decisions
// meeting work in flight, deferred resends, decidedWhileFound, liveHere).
// Each test fails on the code as it is; its comment gives the path and
// what a user would expect.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// A. A carried-out deferred resend that never reaches recordResend leaves
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
func TestReviewBreakAResendAfterADeferredResendWhoseMoveFailedKeepsItsOwnDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.env.OnActivity(a.PlanMove, mock.Anything, mock.Anything).Return(activities.MoveOutput{},
		temporal.NewNonRetryableApplicationError("sendy: no settings on this worker", "MoveUnavailable", nil))
	window := h.policy.SendBudget()
	alice := window + time.Hour
	d1 := window + h.policy.DecisionDeadline
	bob := d1 + time.Hour
	calls := h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if (since >= alice && since < alice+5*time.Minute) || (since >= bob && since < bob+5*time.Minute) {
			return activities.ReconcileOutput{}, review7SearchDown()
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
	})
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

// A, second route, same cause: the carried-out deferred resend searches
// again (the retried search reported an attempt that may still take
// effect, so it is not fresh) and finds m-1 alive: "resend not needed",
// the run follows m-1 (Accepted) and deferredUntil keeps D1. m-1 fails,
// the run awaits a decision for 72h; Bob resends after D1, his search
// fails once, and the run ends Failed at once with Bob's acknowledged
// resend never carried out. Expected: Delivered under ~resend-1.
func TestReviewBreakAResendAfterADeferredResendThatFoundTheMessageKeepsItsOwnDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.planResends()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: 502" })
		}
		return accepted("m-9", attempt, provider.Accepted), nil
	})
	h.review2StatusByID(map[string]provider.Status{"m-1": provider.StatusFailed, "m-9": provider.StatusDelivered})
	window := h.policy.SendBudget()
	alice := window + time.Hour
	d1 := window + h.policy.DecisionDeadline
	bob := d1 + time.Hour
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		switch {
		case since < alice:
			return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
		case since < alice+5*time.Minute, since >= bob && since < bob+5*time.Minute:
			return activities.ReconcileOutput{}, review7SearchDown()
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

// B. A resend acknowledged during the last retried search, which then
// succeeds, is dropped as if no search had succeeded.
//
// Path: every attempt ends without an answer; the search at the window
// fails; the run awaits until D (window + 72h) and searches again every
// 10 minutes. The last retry starts at D-10m; the provider is slow and it
// returns at D+15m, successfully, finding no message. At D-6m a person
// resends by update; the run is AwaitingDecision, so the resend is
// acknowledged ("if the search fails, the resend waits and is carried out
// once a search succeeds"). When the retry returns, await() takes the
// resend (fix 2) but freshSearch is only set for a deferred resend, so
// resend() searches again; that search fails, the resend is deferred with
// deferredUntil = lastDeadline = D, already past, and await() ends the
// run at once: Failed, "the resend decided by ... was never carried out:
// no search of bird's records that could rule out a message succeeded".
// A search that started before the deadline, after the resend was
// acknowledged, did succeed and found nothing: docs/decisions.md ("If no
// search started before then succeeds, the run ends Failed") says the
// resend is carried out, as it is when the same search ends a deferred
// resend's wait. Expected: the resend goes out under ~resend-1.
func TestReviewBreakAResendAcknowledgedDuringALastSearchThatSucceedsIsCarriedOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	deadline := h.policy.SendBudget() + h.policy.DecisionDeadline
	var mu sync.Mutex
	var start time.Duration
	slow := 0
	h.env.OnActivity(a.Reconcile, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		start = h.env.Now().Sub(h.start)
		if start >= deadline-15*time.Minute && slow == 0 {
			slow++
			return 25 * time.Minute // the last retry: slow, then it succeeds
		}
		return 0
	}).Return(func(context.Context, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if start >= deadline-15*time.Minute && slow == 1 {
			slow++
			return activities.ReconcileOutput{Searched: true, ByKey: true, How: "searched bird by key: nothing"}, nil
		}
		return activities.ReconcileOutput{}, review7SearchDown()
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
