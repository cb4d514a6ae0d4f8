package workflows

// Decisions: bound to their event and applied once, and never lost to
// the run's own work they meet: a ledger step, a search, a deadline.

import (
	"fmt"
	"sync"
	"testing"
	"time"

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
	h.planResends()
}

// newLedgerDownHarness is newHarness with a ledger whose Recall fails
// (with an error a retry could fix) while down says so. A ledger step
// made slow that way has its local tries fail, so it becomes an
// activity retried with backoff, on the workflow clock.
func newLedgerDownHarness(t *testing.T, down func(since time.Duration) bool) *harness {
	t.Helper()
	h := newBareHarness(t, quiet)
	h.ledgerDown = down
	h.settleByRank()
	h.recallTheSends()
	return h
}

// decideByUpdate sends d by the decide update after a while and records
// the answer: the acknowledgement, or the refusal.
type decideByUpdate struct {
	mu  sync.Mutex
	ack *contract.DecisionAck
	err error
}

func (h *harness) decideByUpdate(after time.Duration, id string, d contract.Decision) *decideByUpdate {
	u := &decideByUpdate{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, id, &updateCallbacks{
			reject: func(err error) {
				u.mu.Lock()
				defer u.mu.Unlock()
				u.err = err
			},
			complete: func(v any, err error) {
				u.mu.Lock()
				defer u.mu.Unlock()
				if err != nil {
					u.err = err
					return
				}
				ack := v.(contract.DecisionAck)
				u.ack = &ack
			},
		}, bound(d))
	}, after)
	return u
}

// A second decision is acknowledged and then not carried out.
//
// Path: the window closes with the outcome unknown, the search finds
// nothing, the run awaits a decision. Alice resends (update): await()
// sets pending to nil and calls resend(), whose resendSearches() reads
// the ledger first (learnFromLedger -> recall, a ledger step) before any
// setState. The ledger is down for three minutes: the local tries fail
// and Recall runs as an activity retried with backoff. All that time the
// run shows AwaitingDecision with nothing pending, so Bob's cancel by
// update passes the validator and is acknowledged ("cancel accepted: the
// run ends as Cancelled and nothing more is sent"). The ledger answers,
// the resend goes out under ~resend-1 and the run ends Delivered; Bob's
// cancel stays pending. docs/decisions.md: "The run leaves
// AwaitingDecision the moment it takes a decision, so a second one ... is
// refused with the reason."
func TestASecondDecisionWhileOneIsAppliedIsRefused(t *testing.T) {
	t.Parallel()
	decided := activities.DefaultPolicy().SendBudget() + time.Hour
	h := newLedgerDownHarness(t, func(since time.Duration) bool {
		return since >= decided && since < decided+3*time.Minute
	})
	downThenAwaiting(h)
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, ByKey: true})
	resend := h.decideByUpdate(decided, "alice", contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "alice"})
	var during contract.Status
	h.env.RegisterDelayedCallback(func() { during = h.query() }, decided+30*time.Second)
	cancel := h.decideByUpdate(decided+time.Minute, "bob", contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "bob"})
	h.run()
	res, _ := h.result()
	require.NoError(t, resend.err)
	require.NotNil(t, resend.ack, "alice's resend is acknowledged")
	require.True(t, timelineHas(h.query(), "Recall did not complete in the run's workflow task"), "the ledger step fell back to an activity")
	var ackMsg string
	if cancel.ack != nil {
		ackMsg = cancel.ack.Message
	}
	require.Error(t, cancel.err,
		"bob's cancel, sent while alice's resend was being applied, was acknowledged (%q); the run then ended %s with resend keys %v",
		ackMsg, res.State, res.ResendKeys)
	require.Contains(t, cancel.err.Error(), "refused: the run is applying the resend decided by alice", "the refusal names the decision being applied")
	require.NotEqual(t, contract.AwaitingDecision, during.State, "the run took alice's resend: it no longer awaits a decision")
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
}

// A decision made during the last retried search is dropped at the
// deadline.
//
// Path: the window closes and every search fails; the run awaits a
// decision and searches again every 10 minutes. The last retry starts
// with 10 minutes left and, the provider hanging, runs 25 minutes (its
// budget is 30): past the deadline. Five minutes before the deadline, a
// person cancels by update; the run is AwaitingDecision, so the cancel is
// acknowledged. When the search returns, await()'s loop finds no time
// left and calls AwaitWithTimeout with a timeout <= 0, which returns
// false before it looks at the condition (the SDK's
// SDKFlagCancelAwaitTimerOnCondition is off): the run ends Failed, "no
// decision within 72h0m0s", with the acknowledged cancel still pending.
func TestADecisionDuringTheLastSearchBeforeTheDeadlineIsCarriedOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	// The deadline is 72h after the search at the window (just before
	// SendBudget); the searches retry at 10-minute steps, so the last one
	// starts 10 minutes before it and the one before 20 minutes before it.
	deadline := h.policy.SendBudget() + h.policy.DecisionDeadline
	h.reconcileSlow(func(_ int, since time.Duration) time.Duration {
		if since >= deadline-15*time.Minute {
			return 25 * time.Minute // the provider hangs; the search runs most of its budget
		}
		return 0
	}, func(int, time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, searchDown()
	})
	cancel := h.decideByUpdate(deadline-6*time.Minute, "dave", contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "dave"})
	h.run()
	res, _ := h.result()
	require.NoError(t, cancel.err)
	require.NotNil(t, cancel.ack)
	require.Contains(t, cancel.ack.Message, "cancel accepted")
	require.Equal(t, contract.Cancelled, res.State,
		"the cancel acknowledged before the deadline (%q) was dropped: %s", cancel.ack.Message, res.Reason)
	require.Equal(t, "Cancelled", h.settled.Outcome)
}

// A cancel taken during a retried search that finds the message, then
// a failed last look, ends Cancelled with possibleDuplicate.
//
// Path: every attempt ends without a certain answer and the search at the
// window fails; the run awaits a decision and searches again 10 minutes
// later. That search takes 5 minutes and finds m-1, alive. Meanwhile
// (the run is AwaitingDecision) a person cancels by update and is
// acknowledged. retryReconcile() reports the live message, but with a
// decision pending await() takes the cancel: the run ends Cancelled. Its
// last look (after the uncertain attempts) fails, and settleKnown()
// adds possibleDuplicate ("it may have sent one beside the message the
// run follows"). The result says Cancelled — nothing sent — with a
// live message of the event in messageIds and a possible second one: the
// message that was sent stands (as turnedUp() says for a message found in
// the last look), so the run should end with it (Unconfirmed, or follow
// it), not Cancelled.
func TestACancelDuringASearchThatFindsTheMessageEndsWithTheMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: h.start.Add(h.policy.SendBudget() - time.Minute)}
	}
	h.reconcileSlow(func(n int, _ time.Duration) time.Duration {
		if n == 2 {
			return 5 * time.Minute // the retried search
		}
		return 0
	}, func(n int, _ time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if n == 2 {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusSent}}}, nil
		}
		return activities.ReconcileOutput{}, searchDown()
	})
	h.statuses(provider.StatusDelivered)
	cancel := h.decideByUpdate(h.policy.SendBudget()+12*time.Minute, "dave", contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "dave"})
	h.run()
	res, _ := h.result()
	require.NoError(t, cancel.err)
	require.True(t, timelineHas(h.query(), "found message m-1"), "the retried search found m-1")
	require.Contains(t, res.MessageIDs, "m-1")
	require.NotEqual(t, contract.Cancelled, res.State,
		"a live message of the event was found, yet the run ended Cancelled (possibleDuplicate %v): %s", res.PossibleDuplicate, res.Reason)
	require.Contains(t, []contract.State{contract.Unconfirmed, contract.Delivered}, res.State, res.Reason)
	require.Equal(t, "m-1", h.settled.MessageID)
}
