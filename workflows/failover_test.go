package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"

	"sync/atomic"
)

// planned records the PlanMove calls and answers them at the asked
// provider, with a policy of its own (a shorter replay window).
func (h *harness) planned() *[]activities.PlanInput {
	var mu sync.Mutex
	var calls []activities.PlanInput
	h.env.OnActivity(a.PlanMove, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.MoveOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, in)
		req := h.request(in.SendKey)
		req.Provider = provider.Name(in.Provider)
		pol := h.policy
		pol.ReplayWindow = time.Hour
		return activities.MoveOutput{Request: req, Policy: pol}, nil
	}).Maybe()
	return &calls
}

// uncertainAtBirdThenSendy mocks Send: Bird's attempt 1 ends without an
// answer and every later one is answered not executed; Sendy accepts as
// s-1.
func (h *harness) uncertainAtBirdThenSendy() {
	via := key + "~via-sendy"
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		switch {
		case in.Request.Key == via:
			return accepted("s-1", attempt, provider.Accepted), nil
		case attempt == 1:
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		}
		return activities.SendOutput{}, failAttempt(provider.NotExecuted, attempt)
	})
}

// uncertainThenMovedToSendy runs an event with Sendy as its fallback:
// Bird's attempt 1 ends without an answer and every later one is
// answered not executed; every search finds nothing; Sendy accepts and
// the message is delivered. It returns the searches and the plans.
func (h *harness) uncertainThenMovedToSendy() (*lookups, *[]activities.PlanInput) {
	h.t.Helper()
	h.prepared()
	h.uncertainAtBirdThenSendy()
	calls := h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.start}, nil
	})
	plans := h.planned()
	h.statuses(provider.StatusDelivered)
	h.runWithFallback("sendy")
	return calls, plans
}

// Bird: attempt 1 ends without an answer, every later one is answered
// 503 E01033 until the window closes. The search at the window finds
// nothing, but attempt 1 could still have taken effect: the run searches
// again after the late-effect horizon, finds nothing, and only then moves
// to Sendy, recording the switch.
func TestFailoverAfterAnUncertainAttemptWaitsForTheSearchThatProvesIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	via := key + "~via-sendy"
	calls, plans := h.uncertainThenMovedToSendy()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key, via}, res.KeysUsed)
	require.Equal(t, []string{"s-1"}, res.MessageIDs)
	require.Len(t, res.Resends, 1)
	require.Equal(t, contract.BasisNoMessage, res.Resends[0].Basis)
	require.Contains(t, res.Resends[0].Reason, "after every attempt could take effect, found no message")
	require.GreaterOrEqual(t, len(calls.calls), 2, "the search at the window, and the one after the horizon")
	for _, c := range calls.calls[:2] {
		require.Equal(t, "bird", c.Provider)
		require.Equal(t, []string{key}, c.Keys)
	}
	require.Len(t, *plans, 1)
	p := (*plans)[0]
	require.Equal(t, "sendy", p.Provider)
	require.Equal(t, via, p.SendKey)
	require.NotNil(t, p.Switch)
	require.Equal(t, "bird", p.Switch.From)
	require.Equal(t, "failover", p.Switch.By)
	require.Equal(t, "sendy", h.query().Provider)
	var atSendy []activities.SendInput
	for _, in := range h.sends {
		if in.Request.Key == via {
			atSendy = append(atSendy, in)
		}
	}
	require.NotEmpty(t, atSendy)
	for _, in := range atSendy {
		require.Equal(t, time.Hour-h.policy.WindowMargin, in.Budget, "the sends at Sendy run on Sendy's policy")
	}
}

// Sendy cannot be searched by key: an uncertain attempt there never moves
// the run by itself, fallback or not.
func TestNoFailoverFromAnUnsearchableUncertainOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileWith(func(_ time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: false, LastUncertainAt: h.start}, nil
	})
	plans := h.planned()
	h.runWithFallback("sendy")
	res, err := h.result()
	require.Error(t, err)
	require.Equal(t, contract.Failed, res.State, "no decision came")
	require.Empty(t, *plans, "nothing was planned at the fallback")
	require.Equal(t, []string{key}, res.KeysUsed)
	require.True(t, timelineHas(h.query(), "no failover to sendy: an attempt at bird ended without a certain answer"))
}

// "Every attempt was not executed" is the ledger's word, not the run's
// memory: without it (an attempt accepted whose id the provider no longer
// finds, say) an unsearchable provider is no proof, and the run does not
// move.
func TestNotExecutedProofComesFromTheLedger(t *testing.T) {
	t.Parallel()
	for _, ledgerSays := range []bool{false, true} {
		h := newHarness(t)
		h.prepared()
		h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
			if in.Request.Key == key+"~via-sendy" {
				return accepted("s-1", attempt, provider.Accepted), nil
			}
			return activities.SendOutput{}, failAttempt(provider.NotExecuted, attempt)
		})
		h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
			return activities.ReconcileOutput{Searched: false, NotExecutedOnly: ledgerSays}, nil
		})
		plans := h.planned()
		h.statuses(provider.StatusDelivered)
		h.runWithFallback("sendy")
		res, _ := h.result()
		if ledgerSays {
			require.Equal(t, contract.Delivered, res.State, res.Reason)
			require.Len(t, *plans, 1)
			require.Contains(t, res.Resends[0].Reason, "without being executed")
		} else {
			require.Equal(t, contract.Failed, res.State, "no proof: the run waited for a decision that never came")
			require.Empty(t, *plans)
		}
	}
}

// A failover proceeds on a late search that cannot speak (a message
// id of ours vanished), and the result says nothing of it.
//
// Path (pre-existing, failover.go): Bird, fallback Sendy. Attempt 1 of
// the event key ends without an answer, the later ones are answered not
// executed until the window closes. The search at the window finds
// nothing (ByKey). Attempt 1 could still take effect, so failover()
// searches Bird again after the horizon: by then the hung attempt's
// answer reached the ledger (message b-1), and Bird answers "not found"
// for b-1 (Vanished) and lists nothing. failover() checks Vanished only
// on the FIRST search (out), not on this one (again): searched(again)
// sets searchMute, adopt finds nothing live, and the run moves to Sendy
// "a search of bird's records by key ... found no message" and sends
// s-1. moveTo -> useKey resets r.look.last to searchSpoke and lateAt to
// zero, so the last look at Bird (mute again) reports nothing: the run
// ends Delivered with messageIds [b-1 s-1], possibleDuplicate false. A
// message id Bird gave us and can no longer find is "an unknown outcome,
// never proof that nothing was sent" (docs/decisions.md). Expected: no
// failover (as when the first search reports b-1 vanished), or at least
// the result reports a possible duplicate.
func TestNoFailoverAfterALateSearchThatFindsAVanishedMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.uncertainAtBirdThenSendy()
	var n atomic.Int32
	h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if n.Add(1) == 1 {
			return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.start, How: "searched bird by key: nothing"}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Vanished: []string{"b-1"}, How: "ledger: 1 message id; bird cannot find b-1; searched by key: nothing"}, nil
	})
	plans := h.planned()
	h.statuses(provider.StatusDelivered)
	in := input
	in.Fallback = "sendy"
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	res, _ := h.result()
	require.GreaterOrEqual(t, int(n.Load()), 2, "the late search ran")
	moved := len(*plans) > 0
	require.False(t, moved && !res.PossibleDuplicate && !res.DuplicateSend,
		"the run failed over after bird said message b-1 of the event vanished, and reports no possible duplicate: %s, messages %v, possibleDuplicate %v",
		res.State, res.MessageIDs, res.PossibleDuplicate)
}
