package workflows

// Review of versionNothingForgotten: combinations of fault, timing and
// decision that try to break the promise of SendSMS.

import (
	"context"
	"errors"
	"strings"
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

// Point 2, via the ledger's refusal: every attempt ends without an answer
// and the last attempt is refused by the Send activity because the
// ledger's clock says the key's window closed (ErrWindowClosed). Every
// search fails; a person cancels. The uncertain attempts must still arm
// the last look before the run settles.
func TestReviewWindowClosedRefusalStillArmsTheLastLook(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.AfterRetries {
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("the replay window of "+in.Request.Key+" closed", activities.ErrWindowClosed, nil)
		}
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	last := h.start.Add(h.policy.SendBudget() - 10*time.Minute)
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: last}
	}
	calls := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, temporal.NewNonRetryableApplicationError("bird: 503 on the list endpoint", "ProviderDown", nil)
	})
	cancelAt := h.policy.SendBudget() + 4*time.Hour + 5*time.Minute
	h.signal(cancelAt, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.True(t, res.OutcomeUnknown)
	calls.mu.Lock()
	defer calls.mu.Unlock()
	require.NotEmpty(t, calls.at)
	require.GreaterOrEqual(t, calls.at[len(calls.at)-1], cancelAt, "the uncertain attempts arm a last look after the cancel, before the run settles; timeline:\n%s", timelineTexts(h.query()))
}

// Points 4 and 5 together: a reset run is fenced at its first send and
// takes the event over; the run it replaced had an uncertain attempt at
// bird and then moved to sendy (keys.Via). This run carries on at sendy,
// so bird is a provider the event left: it is due one last look, and a
// late bird message beside the sendy one is a duplicate.
func TestReviewTakeoverIntoAMovedEventLooksAtTheProviderLeft(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	via := key + "~via-sendy"
	var mu sync.Mutex
	prepares := 0
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(func(context.Context, activities.PrepareInput) (activities.PrepareOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		prepares++
		if prepares == 1 { // the claim the reset run replays
			return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, Created: true}, nil
		}
		return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
			SendKeys:        []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: via, FirstAttemptAt: h.start}},
			LastUncertainAt: h.start}, nil
	})
	fenced := true
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if fenced {
			fenced = false
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("ledger: the event is held by another run", activities.ErrFenced, nil)
		}
		if in.Request.Key == via {
			return accepted("s-1", attempt, provider.Replayed), nil
		}
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.planned()
	calls := h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if canonical(in.Provider) == "bird" {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "b-1", Reference: key, Status: provider.StatusDelivered}}}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "s-1", Reference: via, Status: provider.StatusDelivered}}}, nil
	})
	h.statuses(provider.StatusDelivered)
	in := input
	in.Fallback = "sendy"
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.True(t, timelineHas(h.query(), "taking the event over"))
	require.Equal(t, "sendy", canonical(h.query().Provider))
	calls.mu.Lock()
	birdLooks := 0
	for _, c := range calls.calls {
		if canonical(c.Provider) == "bird" {
			birdLooks++
		}
	}
	calls.mu.Unlock()
	require.Positive(t, birdLooks, "bird, where the event had an uncertain attempt before it moved, gets a last look; timeline: %v", h.query().Timeline)
	require.True(t, res.DuplicateSend, "b-1 at bird and s-1 at sendy are two live messages of the event")
}

// Point 5 at the settle, with every search failing: the run delivered
// m-1, but the ledger holds a resend key another run of the workflow
// (the one a reset replaced) sent under, with an uncertain attempt. The
// search of that key fails: a second message cannot be ruled out, and
// the result must say so (a possible duplicate, or the outcome unknown).
func TestReviewUnknownKeyWhoseSearchFailsIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return accepted("m-1", attempt, provider.Accepted), nil
	})
	h.statuses(provider.StatusDelivered)
	calls := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, temporal.NewNonRetryableApplicationError("bird: 503 on the list endpoint", "ProviderDown", nil)
	})
	h.settleUnknown = &activities.SettleOutput{
		UnknownKeys:     []activities.SendKey{{Key: key + "~resend-1", FirstAttemptAt: h.start}},
		LastUncertainAt: h.start,
	}
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Contains(t, res.KeysUsed, key+"~resend-1")
	calls.mu.Lock()
	require.NotEmpty(t, calls.calls, "the unknown key is searched")
	calls.mu.Unlock()
	require.True(t, res.PossibleDuplicate || res.DuplicateSend || res.OutcomeUnknown,
		"an uncertain attempt under a key another run sent with, that no search could resolve, beside the delivered m-1: the result must say a second SMS may exist; got %+v", res)
}

// Point 3 with a flapping search: a resend acknowledged by the update
// waits because its search fails. Every search of the await loop
// succeeds (nothing found) and every search inside the resend fails. The
// run must not cycle for ever (each cycle resets the decision deadline):
// by the decision deadline the acknowledged resend is carried out or the
// run has ended.
func TestReviewADeferredResendDoesNotCycleForEverOnAFlappingSearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	var mu sync.Mutex
	n := 0
	stop := h.policy.SendBudget() + h.policy.DecisionDeadline + 2*time.Hour
	h.reconcileWith(func(since time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
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
	mu.Lock()
	searches := n
	mu.Unlock()
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

// Point 5's limit: a ledger that fences the run again after every
// takeover ends it Failed. An attempt of the run ended without a certain
// answer and nothing ever searched for it: the Failed result must say
// that an SMS may have gone out.
func TestReviewATakeoverThatGivesUpStillSaysTheOutcomeIsUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(func(context.Context, activities.PrepareInput) (activities.PrepareOutput, error) {
		return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, Created: true}, nil
	})
	var mu sync.Mutex
	calls := 0
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: timed out" })
		}
		return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("ledger: the event is held by another run", activities.ErrFenced, nil)
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 1, LastUncertainAt: h.start}
	}
	searches := h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, errors.New("bird: 503")
	})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Failed, res.State, res.Reason)
	require.Contains(t, res.Reason, "three times")
	searches.mu.Lock()
	n := len(searches.calls)
	searches.mu.Unlock()
	require.True(t, res.OutcomeUnknown,
		"attempt 1 ended without a certain answer and %d searches were made: a Failed run must say an SMS may have gone out; reason: %s", n, res.Reason)
}

// Point 4, settle record: the run moved to sendy, sendy refused (401),
// and the last look at bird found a live message: the run ends
// Unconfirmed with that message, and the ledger's record names it, so a
// later start of the event is told which message went out.
func TestReviewAMessageThatTurnsUpAtTheProviderLeftIsSettledWithItsID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	via := key + "~via-sendy"
	var mu sync.Mutex
	atSendy := false
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == via {
			mu.Lock()
			atSendy = true
			mu.Unlock()
			return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, func(r *provider.Result) { r.Reason = "sendy: 401 unauthorized" })
		}
		return activities.SendOutput{}, failAttempt(provider.NotExecuted, attempt)
	})
	h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if canonical(in.Provider) == "bird" && atSendy {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "b-1", Reference: key, Status: provider.StatusSent}}}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, NotExecutedOnly: true, NotSent: true}, nil
	})
	h.planned()
	in := input
	in.Fallback = "sendy"
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	res, _ := h.result()
	require.Equal(t, contract.Unconfirmed, res.State, res.Reason)
	require.Contains(t, res.MessageIDs, "b-1")
	require.NotNil(t, h.settled)
	require.Equal(t, "b-1", h.settled.MessageID, "the ledger's record of the event names the message that went out")
}

// Double click and cancel while a resend waits: a resend is acknowledged
// and deferred (search failed), a second resend and then a cancel come;
// the second replaces the first, the cancel wins over it, nothing is
// sent, and the Cancelled result says an SMS may have gone out.
func TestReviewCancelWhileADeferredResendWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	downThenAwaiting(h)
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 9, LastUncertainAt: h.start.Add(h.policy.SendBudget() - time.Minute)}
	}
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, errSearch
	})
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

// live bookkeeping: m-1 accepted (live), then failed; the resend's m-2 is
// delivered. A later look that sees m-1 failed and m-2 delivered is no
// duplicate.
func TestReviewAFailedThenResentMessageIsNoDuplicate(t *testing.T) {
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
	var mu sync.Mutex
	st := 0
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		st++
		if in.MessageID == "m-1" {
			return provider.Message{ID: in.MessageID, Status: provider.StatusFailed}, nil
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
			{ID: "m-1", Reference: key, Status: provider.StatusFailed},
			{ID: "m-2", Reference: key + "~resend-1", Status: provider.StatusDelivered},
		}}, nil
	})
	h.signal(time.Hour, contract.SignalResend, map[string]string{"reason": "failed", "by": "alice"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.False(t, res.DuplicateSend, "%v", timelineTexts(h.query()))
}

func timelineTexts(s contract.Status) string {
	var out []string
	for _, e := range s.Timeline {
		out = append(out, e.Text)
	}
	return strings.Join(out, "\n")
}

// Points 5 and failover: the run moved to sendy (whose policy keeps
// answers 24 h), its first send there is fenced (a reset), and the
// ledger's last key of the event is the event key at bird. The run takes
// the event over and goes back to bird under that key: bird's own policy
// (a 3 h replay window) must apply again, so nothing goes out under the
// key past bird's window.
func TestReviewATakeoverBackToTheFirstProviderUsesItsPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	via := key + "~via-sendy"
	var mu sync.Mutex
	prepares := 0
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(func(context.Context, activities.PrepareInput) (activities.PrepareOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		prepares++
		if prepares == 1 {
			return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, Created: true}, nil
		}
		return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
			SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}}, nil
	})
	h.env.OnActivity(a.PlanMove, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.MoveOutput, error) {
		req := h.request(in.SendKey)
		req.Provider = provider.Name(in.Provider)
		pol := h.policy
		pol.ReplayWindow = 24 * time.Hour
		return activities.MoveOutput{Request: req, Policy: pol}, nil
	}).Maybe()
	h.planResends()
	taken := false
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if in.Request.Key == via {
			taken = true
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("ledger: the event is held by another run", activities.ErrFenced, nil)
		}
		if taken {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		}
		return activities.SendOutput{}, failAttempt(provider.NotExecuted, attempt)
	})
	h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if taken {
			return activities.ReconcileOutput{Searched: true, ByKey: true}, nil
		}
		return activities.ReconcileOutput{Searched: true, ByKey: true, NotExecutedOnly: true, NotSent: true}, nil
	})
	h.signal(3*24*time.Hour, contract.SignalCancel, map[string]string{"reason": "end of test", "by": "reviewer"})
	in := input
	in.Fallback = "sendy"
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	require.True(t, timelineHas(h.query(), "taking the event over"), "%s", timelineTexts(h.query()))
	h.mu.Lock()
	defer h.mu.Unlock()
	var late []time.Duration
	var budgets []time.Duration
	for i, s := range h.sends {
		if s.Request.Key != key {
			continue
		}
		if h.sendAt[i] >= h.policy.SendBudget() {
			late = append(late, h.sendAt[i])
		}
		if s.Budget != h.policy.SendBudget() {
			budgets = append(budgets, s.Budget)
		}
	}
	if len(late) > 0 {
		t.Fatalf("%d attempts under %s at bird after bird's replay window (minus margin, %s) closed, from %s to %s after its first attempt (budget of those sends: %v)",
			len(late), key, h.policy.SendBudget(), late[0], late[len(late)-1], budgets[:1])
	}
	require.Empty(t, budgets, "sends at bird under sendy's window instead of bird's")
}
