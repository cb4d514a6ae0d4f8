package workflows

// Decisions that race the run's own work, deadlines a deferred resend
// inherits, and what a run reports after its last looks (issue "a second
// decision is acknowledged and then not carried out" and the lesser
// findings of the same review). Tests 1–7 fail on the code as it is; the
// comment of each says the path and what goes wrong. The last one pins a
// rule that had no test (it passes).
//
// Virtual time in the SDK's test environment: an activity is made slow
// with OnActivity(...).After(d) or .AfterFn(f) (d on the workflow clock,
// not real time); a ledger step is made slow by failing it with a
// retryable error, so its local tries become an activity retried with
// backoff (timers on the workflow clock). The search attributes a run
// upserts are read with env.OnUpsertTypedSearchAttributes(mock.Anything).

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// newLedgerDownHarness is newHarness with a ledger whose Recall fails
// (with an error a retry could fix) while down says so: testify answers
// with the first expectation registered, so newHarness's Recall cannot be
// replaced and this builds its own environment.
func newLedgerDownHarness(t *testing.T, down func(since time.Duration) bool) *harness {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(logging.SDK(zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel+1))))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(SendSMS, workflow.RegisterOptions{Name: contract.WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: key})
	h := &harness{t: t, env: env, start: env.Now(), policy: activities.DefaultPolicy()}
	observeStates(h)
	env.OnActivity(a.Settle, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SettleInput) (activities.SettleOutput, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.settles = append(h.settles, in)
		if h.settled == nil || ledger.Outranks(in.Outcome, in.MessageID, h.settled.Outcome, h.settled.MessageID) {
			h.settled = &in
		}
		return activities.SettleOutput{Outcome: h.settled.Outcome, Reason: h.settled.Reason, MessageID: h.settled.MessageID}, nil
	}).Maybe()
	env.OnActivity(a.Recall, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.RecallInput) (activities.RecallOutput, error) {
		if down(h.env.Now().Sub(h.start)) {
			return activities.RecallOutput{}, temporal.NewApplicationError("ledger: connection refused", "LedgerUnavailable")
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		var out activities.RecallOutput
		for i, s := range h.sends {
			if s.Request.Key == in.SendKey {
				if out.Attempts == 0 {
					out.FirstAttemptAt = h.start.Add(h.sendAt[i])
				}
				out.Attempts++
			}
		}
		return out, nil
	}).Maybe()
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

// smsStates returns the SmsState values the run upserted, in order
// (observeStates records them for every harness).
func (h *harness) smsStates() func() []string {
	return func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(h.states)
	}
}

// 1. A second decision is acknowledged and then not carried out.
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
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
	})
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
	require.Contains(t, cancel.err.Error(), "refused")
	require.NotEqual(t, contract.AwaitingDecision, during.State, "the run took alice's resend: it no longer awaits a decision")
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
}

// 2. A later deferred resend inherits an earlier one's deadline.
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
	h.review2StatusByID(map[string]provider.Status{"m-9": provider.StatusFailed, "m-10": provider.StatusDelivered})
	alice, bob := 74*time.Hour, 78*time.Hour
	calls := h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if (since >= alice && since < alice+5*time.Minute) || (since >= bob && since < bob+5*time.Minute) {
			return activities.ReconcileOutput{}, review7SearchDown()
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
	})
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

// 3. A decision made during the last retried search is dropped at the
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
	h.env.OnActivity(a.Reconcile, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		if h.env.Now().Sub(h.start) >= deadline-15*time.Minute {
			return 25 * time.Minute // the provider hangs; the search runs most of its budget
		}
		return 0
	}).Return(func(context.Context, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, review7SearchDown()
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

// movedThenCancelled runs an event with Sendy as its fallback: Bird's
// attempt 1 ends without an answer and every later one is answered not
// executed; the searches find nothing, so the run moves to Sendy, where
// s-1 is accepted and fails; a person cancels. The run's last look at
// Bird, which it moved away from, answers last.
func (h *harness) movedThenCancelled(last activities.ReconcileOutput) *lookups {
	h.t.Helper()
	h.prepared()
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
	calls := h.reconcileWith(func(since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if in.Provider == "bird" && since >= h.policy.SendBudget()+time.Hour {
			return last, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, LastUncertainAt: h.start}, nil
	})
	h.planned()
	h.statuses(provider.StatusFailed)
	h.signal(h.policy.SendBudget()+2*time.Hour, contract.SignalCancel, map[string]string{"reason": "will call the customer", "by": "dave"})
	in := input
	in.Fallback = "sendy"
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	return calls
}

// 4. SmsState says Cancelled for an SMS that was sent.
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

// 5. A resend key is reported as "N tries" of its window with no attempt
// begun, counting the windows of the key before it.
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
	var mu sync.Mutex
	sent := 0
	h.env.OnActivity(a.Send, mock.Anything, mock.Anything).After(4*time.Hour).Return(activities.SendOutput{}, errors.New("never reached")).Times(4)
	h.env.OnActivity(a.Send, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		sent++
		return accepted("m-1", activity.GetInfo(ctx).Attempt, provider.Accepted), nil
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		mu.Lock()
		defer mu.Unlock()
		if sent == 0 {
			return activities.RecallOutput{} // the ledger holds no attempt
		}
		return activities.RecallOutput{FirstAttemptAt: h.env.Now(), Attempts: sent}
	}
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

// 6. A cancel taken during a retried search that finds the message, then
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
	var mu sync.Mutex
	n := 0
	h.env.OnActivity(a.Reconcile, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 2 {
			return 5 * time.Minute // the retried search
		}
		return 0
	}).Return(func(context.Context, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if n == 2 {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusSent}}}, nil
		}
		return activities.ReconcileOutput{}, review7SearchDown()
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

// 7. When the followed message fails while another live message of the
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

// 8. A message id the provider gave us that it can no longer find is an
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
