package workflows

// The takeover after a Temporal reset. A reset starts a new run (B) of
// an event that the ledger holds for the run it replaced (A): B's send is
// fenced, and B takes the event over, learning from the ledger the keys
// A used after the reset point. Each test builds B with mocks: its first
// Prepare is the replayed fresh claim, a send of it is fenced, and a
// later Prepare (the takeover) returns what A left in the ledger.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// fence is the ledger's refusal of a send by a run that no longer holds
// the event.
func fence() error {
	return temporal.NewNonRetryableApplicationError("ledger: the event is held by another run", activities.ErrFenced, nil)
}

// sendFencedOnce mocks Send: the first send that fenced picks is refused
// by the ledger (B's first send the ledger checks against A), every other
// is answered by f. f is called one send at a time.
func (h *harness) sendFencedOnce(fenced func(in activities.SendInput) bool, f func(attempt int32, in activities.SendInput) (activities.SendOutput, error)) {
	var mu sync.Mutex
	done := false
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if !done && fenced(in) {
			done = true
			return activities.SendOutput{}, fence()
		}
		return f(attempt, in)
	})
}

// anySend fences the run's first send.
func anySend(activities.SendInput) bool { return true }

// underANewKey fences the run's first send under a key other than the
// event key: the reset run's first new send, where the ledger names A.
func underANewKey(in activities.SendInput) bool { return in.Request.Key != key }

// claimedThenTakenOver mocks Prepare: the first call is the fresh claim
// the reset run replays, every later one the takeover's answer.
func (h *harness) claimedThenTakenOver(takeover activities.PrepareOutput) {
	var mu sync.Mutex
	n := 0
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(func(context.Context, activities.PrepareInput) (activities.PrepareOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, Created: true}, nil
		}
		return takeover, nil
	})
}

// preparedAfterReset is claimedThenTakenOver with a ledger that answers
// Recall from the same records: A's keys are there from the moment B
// runs (A ended with the reset).
func (h *harness) preparedAfterReset(takeover activities.PrepareOutput) {
	h.claimedThenTakenOver(takeover)
	h.recall = func(in activities.RecallInput) activities.RecallOutput {
		out := activities.RecallOutput{SendKeys: takeover.SendKeys, LastUncertainAt: takeover.LastUncertainAt}
		for _, k := range takeover.SendKeys {
			if k.Key == in.SendKey {
				out.FirstAttemptAt, out.Attempts = k.FirstAttemptAt, 1
			}
		}
		return out
	}
}

// metTheReplacedRunsKeys: B met A's keys at the fence (a takeover), or
// from the ledger before its resend, which it reads first.
func metTheReplacedRunsKeys(s contract.Status) bool {
	return timelineHas(s, "took the event over") || timelineHas(s, "the ledger holds keys of the event this run did not know")
}

// m-0 under the event key failed delivery; A (the replaced run) had
// resent under ~resend-2 (its ~resend-1 never left the task queue), and
// m-A under ~resend-2 is alive. B, reset to before that, gets a resend:
// it picks ~resend-1, is fenced, takes over and learns ~resend-2 (else
// branch of takeOver), then sends ~resend-1 without ever searching
// ~resend-2. Two live messages, and no look at ~resend-2 ever happens:
// the duplicate is not reported.
func TestATakeoverSendsANewKeyWithoutSearchingALearntKeyAtTheSameProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.preparedAfterReset(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: r2, FirstAttemptAt: h.start.Add(2 * time.Minute)}}})
	h.planResends()
	var acceptedR1 atomic.Bool
	h.sendFencedOnce(underANewKey, func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		switch in.Request.Key {
		case key:
			return accepted("m-0", attempt, provider.Accepted), nil
		case r1:
			acceptedR1.Store(true)
		}
		return accepted("m-B", attempt, provider.Accepted), nil
	})
	h.statusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-B": provider.StatusDelivered})
	calls := h.reconcileByKey(map[string]provider.Message{r2: {ID: "m-A", Status: provider.StatusDelivered}})
	h.signal(10*time.Minute, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	require.True(t, metTheReplacedRunsKeys(h.query()), "%s", timelineTexts(h.query()))
	searchedR2 := false
	calls.mu.Lock()
	for _, c := range calls.calls {
		for _, k := range c.Keys {
			searchedR2 = searchedR2 || k == r2
		}
	}
	calls.mu.Unlock()
	if acceptedR1.Load() {
		require.True(t, res.DuplicateSend || res.PossibleDuplicate,
			"m-A (alive under %s, learnt at the takeover) and m-B (sent under %s after it) are two SMS, unreported: state %s, messages %v, %s searched: %v; timeline: %s",
			r2, r1, res.State, res.MessageIDs, r2, searchedR2, timelineTexts(h.query()))
	}
}

// A's ~resend-1 (m-A) failed delivery. B, reset to before A's resend,
// is asked to resend: nextKey picks ~resend-1 again (B never knew it),
// the send is fenced, the takeover finds ~resend-1 in the ledger and
// "carries on" with it: the provider replays A's failed m-A, and the run
// awaits a decision again. The acknowledged resend never made a new SMS.
func TestAResendAfterATakeoverDoesNotReuseTheOldRunsResendNumber(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.preparedAfterReset(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: r1, FirstAttemptAt: h.start.Add(5 * time.Minute)}}})
	h.planResends()
	h.sendFencedOnce(underANewKey, func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		switch in.Request.Key {
		case key:
			return accepted("m-0", attempt, provider.Accepted), nil
		case r1:
			// The key's first request was A's: the provider replays it.
			return accepted("m-A", attempt, provider.Replayed), nil
		}
		return accepted("m-new", attempt, provider.Accepted), nil
	})
	h.statusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-A": provider.StatusFailed, "m-new": provider.StatusDelivered})
	h.reconcileByKey(map[string]provider.Message{
		key: {ID: "m-0", Status: provider.StatusFailed},
		r1:  {ID: "m-A", Status: provider.StatusFailed},
	})
	h.signal(10*time.Minute, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	require.True(t, metTheReplacedRunsKeys(h.query()), "%s", timelineTexts(h.query()))
	sentKeys := h.sentKeys()
	require.Contains(t, sentKeys, r2, "the acknowledged resend must make a new message under a key never used; sends: %v; ended %s: %s; timeline: %s",
		sentKeys, res.State, res.Reason, timelineTexts(h.query()))
	require.Equal(t, contract.Delivered, res.State, "%s; timeline: %s", res.Reason, timelineTexts(h.query()))
}

// The ledger holds A's ~via-sendy (an uncertain attempt at sendy) and
// then A's ~resend-1 at bird. B, on ~resend-1 after a resend decision, is
// fenced; the takeover's first branch (the run's key is in the ledger and
// is the last) returns from resume before leaveOthers, so sendy, where
// the event had an uncertain attempt, never gets its late look: a live
// sendy message beside the bird one is an unreported duplicate.
func TestATakeoverOwesALookToTheProviderOfALearntKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, via := key+"~resend-1", key+"~via-sendy"
	h.preparedAfterReset(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{
			{Key: key, FirstAttemptAt: h.start},
			{Key: via, FirstAttemptAt: h.start.Add(2 * time.Minute)},
			{Key: r1, FirstAttemptAt: h.start.Add(5 * time.Minute)},
		},
		LastUncertainAt: h.start.Add(2 * time.Minute)})
	h.planResends()
	h.planned()
	h.sendFencedOnce(underANewKey, func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return accepted("m-0", attempt, provider.Accepted), nil
		}
		return accepted("m-A", attempt, provider.Replayed), nil
	})
	h.statusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-A": provider.StatusDelivered})
	calls := h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if canonical(in.Provider) == "sendy" {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "s-1", Reference: via, Status: provider.StatusDelivered}}}, nil
		}
		return foundByKey(in, map[string]provider.Message{
			key: {ID: "m-0", Status: provider.StatusFailed},
			r1:  {ID: "m-A", Status: provider.StatusDelivered},
		}), nil
	})
	h.signal(10*time.Minute, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	require.True(t, metTheReplacedRunsKeys(h.query()), "%s", timelineTexts(h.query()))
	sendyLooks := calls.searchesAt("sendy")
	require.Contains(t, res.KeysUsed, via)
	require.Positive(t, sendyLooks, "sendy, where the event had an uncertain attempt under %s, gets no look; state %s, messages %v; timeline: %s",
		via, res.State, res.MessageIDs, timelineTexts(h.query()))
	require.True(t, res.DuplicateSend, "s-1 at sendy and m-A at bird are two live messages of the event")
}

// Past the old key's window: as in
// TestAResendAfterATakeoverDoesNotReuseTheOldRunsResendNumber, but A's
// ~resend-1 was first tried more than a replay window before B's
// decision. The Send activity checks the window before it begins the
// attempt, so B's ~resend-1 is refused as ErrWindowClosed, not fenced:
// there is no takeover at all, the search finds A's failed m-A under the
// key B thought new, and the run awaits a decision again. The
// acknowledged resend made no SMS.
func TestAResendOntoTheOldRunsClosedKeyGoesOutUnderANewKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.preparedAfterReset(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: r1, FirstAttemptAt: h.start.Add(5 * time.Minute)}}})
	h.planResends()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		switch in.Request.Key {
		case key:
			return accepted("m-0", attempt, provider.Accepted), nil
		case r1:
			// A tried ~resend-1 at start+5m: its window has closed.
			return activities.SendOutput{}, temporal.NewNonRetryableApplicationError("the replay window of "+r1+" closed", activities.ErrWindowClosed, nil)
		}
		return accepted("m-new", attempt, provider.Accepted), nil
	})
	ledgerKeys := []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: r1, FirstAttemptAt: h.start.Add(5 * time.Minute)}}
	h.recall = func(in activities.RecallInput) activities.RecallOutput {
		if in.SendKey == r1 {
			return activities.RecallOutput{FirstAttemptAt: h.start.Add(5 * time.Minute), Attempts: 1, SendKeys: ledgerKeys}
		}
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 1, SendKeys: ledgerKeys}
	}
	h.statusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-new": provider.StatusDelivered})
	h.reconcileByKey(map[string]provider.Message{
		key: {ID: "m-0", Status: provider.StatusFailed},
		r1:  {ID: "m-A", Status: provider.StatusFailed},
	})
	// m-0 failed at 10 s, inside its window; the decision comes 4 h later.
	h.signal(4*time.Hour, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	sentKeys := h.sentKeys()
	require.Contains(t, sentKeys, r2, "the acknowledged resend must make a new message under a key never used; sends: %v; ended %s: %s; timeline: %s",
		sentKeys, res.State, res.Reason, timelineTexts(h.query()))
	require.Equal(t, contract.Delivered, res.State, res.Reason)
}

// A takeover into an event that moved: a reset run is fenced at its
// first send and takes the event over; the run it replaced had an
// uncertain attempt at bird and then moved to sendy (keys.Via). This run
// carries on at sendy, so bird is a provider the event left: it is due
// one last look, and a late bird message beside the sendy one is a
// duplicate.
func TestATakeoverIntoAMovedEventLooksAtTheProviderLeft(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	via := key + "~via-sendy"
	h.claimedThenTakenOver(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys:        []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: via, FirstAttemptAt: h.start}},
		LastUncertainAt: h.start})
	h.sendFencedOnce(anySend, func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
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
	h.runWithFallback("sendy")
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.True(t, timelineHas(h.query(), "taking the event over"))
	require.Equal(t, "sendy", canonical(h.query().Provider))
	birdLooks := calls.searchesAt("bird")
	require.Positive(t, birdLooks, "bird, where the event had an uncertain attempt before it moved, gets a last look; timeline: %v", h.query().Timeline)
	require.True(t, res.DuplicateSend, "b-1 at bird and s-1 at sendy are two live messages of the event")
}

// The takeover's limit: a ledger that fences the run again after every
// takeover ends it Failed. An attempt of the run ended without a certain
// answer and nothing ever searched for it: the Failed result must say
// that an SMS may have gone out.
func TestATakeoverThatGivesUpStillSaysTheOutcomeIsUnknown(t *testing.T) {
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
		return activities.SendOutput{}, fence()
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 1, LastUncertainAt: h.start}
	}
	searches := h.searchesFail(errors.New("bird: 503"))
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

// A takeover after a failover: the run moved to sendy (whose policy
// keeps answers 24 h), its first send there is fenced (a reset), and the
// ledger's last key of the event is the event key at bird. The run takes
// the event over and goes back to bird under that key: bird's own policy
// (a 3 h replay window) must apply again, so nothing goes out under the
// key past bird's window.
func TestATakeoverBackToTheFirstProviderUsesItsPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	via := key + "~via-sendy"
	h.claimedThenTakenOver(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}}})
	h.env.OnActivity(a.PlanMove, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.MoveOutput, error) {
		req := h.request(in.SendKey)
		req.Provider = provider.Name(in.Provider)
		pol := h.policy
		pol.ReplayWindow = 24 * time.Hour
		return activities.MoveOutput{Request: req, Policy: pol}, nil
	}).Maybe()
	h.planResends()
	var mu sync.Mutex
	taken := false
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if in.Request.Key == via {
			taken = true
			return activities.SendOutput{}, fence()
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
	h.runWithFallback("sendy")
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
