package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/contract"
)

// A decision signal that the run refused (it came while the run was still
// sending) stays in the run's history, payload and all. A copy of it
// signalled later, when the run awaits a decision for a reason its author
// never saw, is refused too: the signal's id was spent when it was read.
func TestARefusedSignalCopiedFromHistoryAppliesNothingLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.awaitsAfterTheWindow()
	payload := func() map[string]any {
		return map[string]any{"reason": "customer says nothing arrived", "by": "alice", "force": true, "key": key, "id": "ticket-A"}
	}
	// Alice's forced resend, too early: the run is still sending.
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(contract.SignalResend, payload()) }, time.Hour)
	var early contract.Status
	h.env.RegisterDelayedCallback(func() { early = h.query() }, time.Hour+time.Minute)
	// Later the run awaits a decision; someone replays the payload copied
	// out of the history.
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(contract.SignalResend, payload()) }, 4*time.Hour)
	var later contract.Status
	h.env.RegisterDelayedCallback(func() { later = h.query() }, 4*time.Hour+time.Minute)
	h.signal(20*time.Hour, contract.SignalCancel, map[string]string{"reason": "stop", "by": "bob"})
	h.run()

	require.True(t, timelineHas(early, "refused a resend signal from alice: refused: the run is Sending"), "the early signal was refused")
	res, _ := h.result()
	require.Empty(t, res.ResendKeys, "a copy of a decision out of the run's history resent: %v", res.ResendKeys)
	require.False(t, timelineHas(later, "resend decided by alice"), "the copy was applied as alice's decision")
	require.True(t, timelineHas(later, "refused a resend signal from alice: refused: decision ticket-A reached this run before"))
}

// The same decision id by signal and by update in one workflow task
// applies once; the update is refused by its validator.
func TestTheSameIDBySignalAndUpdatesAppliesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.awaitsAfterTheWindow()
	var updateErr error
	accepted := 0
	h.env.RegisterDelayedCallback(func() {
		d := contract.Decision{Action: contract.ActionResend, Reason: "r", By: "alice", Key: key, ID: "X"}
		h.env.UpdateWorkflow(contract.UpdateDecide, "u1", &updateCallbacks{reject: func(err error) { updateErr = err }, complete: func(any, error) { accepted++ }}, d)
		h.env.SignalWorkflow(contract.SignalResend, map[string]any{"reason": "r", "by": "alice", "key": key, "id": "X"})
		h.env.UpdateWorkflow(contract.UpdateDecide, "u2", &updateCallbacks{reject: func(err error) { updateErr = err }, complete: func(any, error) { accepted++ }}, d)
	}, 4*time.Hour)
	h.signal(20*time.Hour, contract.SignalCancel, map[string]string{"reason": "stop", "by": "bob"})
	h.run()
	res, _ := h.result()
	require.Len(t, res.ResendKeys, 1)
	require.Error(t, updateErr)
	require.Equal(t, 1, accepted)
}

// An update refused for the run's state leaves no trace: the same id is
// accepted once the run awaits a decision (smsctl retried with --id).
func TestAnUpdateRefusedForStateCanBeRetriedWithItsID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.awaitsAfterTheWindow()
	d := contract.Decision{Action: contract.ActionCancel, Reason: "r", By: "alice", Key: key, ID: "T-1"}
	var early, late error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "u1", &updateCallbacks{reject: func(err error) { early = err }}, d)
	}, time.Hour)
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "u2", &updateCallbacks{reject: func(err error) { late = err }}, d)
	}, 4*time.Hour)
	h.run()
	res, _ := h.result()
	require.ErrorContains(t, early, "not awaiting a decision")
	require.NoError(t, late)
	require.Equal(t, contract.Cancelled, res.State)
}
