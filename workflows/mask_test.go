package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// A person's reason ("customer called from ...") goes masked into the
// timeline the state query returns (the intake's GET, smsctl status), the
// Result, and the Settle reason the ledger keeps past the purge.
func TestADecisionReasonIsMaskedWhereItIsKept(t *testing.T) {
	t.Parallel()
	const number = "31687654321"
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true})
	h.signal(4*time.Hour, contract.SignalCancel, map[string]string{"reason": "customer called from +" + number + " and asked to stop", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.NotContains(t, res.Reason, number)
	require.NotNil(t, h.settled)
	require.NotContains(t, h.settled.Reason, number, "the ledger's outcome_reason")
	for _, e := range h.query().Timeline {
		require.NotContains(t, e.Text, number, "timeline")
	}
}
