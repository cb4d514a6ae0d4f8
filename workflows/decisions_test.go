package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// A decision is bound to its event and applied once. Whoever can reach
// Temporal without the keys can still copy a sealed decision out of a
// history and signal it again: a decision that names no event, one for
// another event, and a copy of one the run applied earlier are refused in
// the timeline, by signal and by update, and the run keeps waiting for a
// decision of its own.
func TestDecisionsAreBoundToTheirEventAndAppliedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.awaitsAfterTheWindow()
	raw := func(after time.Duration, name string, payload map[string]any) {
		h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, payload) }, after)
	}
	resend := map[string]any{"reason": "customer says nothing arrived", "by": "alice", "force": true, "key": key, "id": "ticket-1"}

	// The window closes after about 3h; the run awaits a decision.
	raw(4*time.Hour, contract.SignalResend, map[string]any{"reason": "unbound", "by": "mallory", "force": true})
	raw(4*time.Hour+time.Minute, contract.SignalResend, map[string]any{"reason": "another event's", "by": "mallory", "force": true, "key": "order-1-shipped", "id": "ticket-9"})
	var atFirst contract.Status
	h.env.RegisterDelayedCallback(func() { atFirst = h.query() }, 4*time.Hour+2*time.Minute)
	raw(4*time.Hour+3*time.Minute, contract.SignalResend, resend)
	// The resend's key gets its own window, with the outcome unknown
	// again: the run awaits a decision a second time.
	var atSecond contract.Status
	h.env.RegisterDelayedCallback(func() { atSecond = h.query() }, 20*time.Hour)
	raw(20*time.Hour+time.Minute, contract.SignalResend, resend)
	var updateErr error
	h.env.RegisterDelayedCallback(func() {
		d := contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "alice", Force: true, Key: key, ID: "ticket-1"}
		h.env.UpdateWorkflow(contract.UpdateDecide, "copy", &updateCallbacks{reject: func(err error) { updateErr = err }}, d)
	}, 20*time.Hour+2*time.Minute)
	var atLast contract.Status
	h.env.RegisterDelayedCallback(func() { atLast = h.query() }, 20*time.Hour+3*time.Minute)
	raw(20*time.Hour+4*time.Minute, contract.SignalCancel, map[string]any{"reason": "will call the customer", "by": "bob", "key": key, "id": "ticket-2"})
	h.run()

	require.Equal(t, contract.AwaitingDecision, atFirst.State, "the refused decisions left the run waiting")
	require.True(t, timelineHas(atFirst, `refused a resend signal from mallory: refused: a decision names the event it is for and carries an id of its own`))
	require.True(t, timelineHas(atFirst, `refused a resend signal from mallory: refused: the decision is for event "order-1-shipped", not for this run's "`+key+`"`))

	require.Equal(t, contract.AwaitingDecision, atSecond.State)
	require.True(t, timelineHas(atSecond, "resend decided by alice: customer says nothing arrived (decision ticket-1)"))
	require.Equal(t, contract.AwaitingDecision, atLast.State, "the copies left the run waiting")
	require.True(t, timelineHas(atLast, "refused a resend signal from alice: refused: decision ticket-1 reached this run before"))
	require.ErrorContains(t, updateErr, "decision ticket-1 reached this run before")

	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.Equal(t, "cancelled by bob: will call the customer", res.Reason)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys, "one resend: the copy sent nothing")
	var sentKeys []string
	for _, s := range h.sends {
		if len(sentKeys) == 0 || sentKeys[len(sentKeys)-1] != s.Request.Key {
			sentKeys = append(sentKeys, s.Request.Key)
		}
	}
	require.Equal(t, []string{key, key + "~resend-1"}, sentKeys, fmt.Sprintf("attempts: %d", len(h.sends)))
}

// awaitsAfterTheWindow makes every attempt end with its outcome unknown
// and every search find nothing: the run awaits a decision once its
// window closed (about 3 h), and again after each resend's window.
func (h *harness) awaitsAfterTheWindow() {
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true})
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (provider.Request, error) {
		return h.request(in.SendKey), nil
	}).Maybe()
}
