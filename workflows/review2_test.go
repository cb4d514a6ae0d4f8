package workflows

// Review 2: the takeover after a Temporal reset (version 6). Each test
// builds the reset run (B) with mocks: its first Prepare is the replayed
// fresh claim, its first send under a new key is fenced, and the second
// Prepare (the takeover) returns the keys the replaced run (A) used after
// the reset point.

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

func review2Fence() error {
	return temporal.NewNonRetryableApplicationError("ledger: the event is held by another run", activities.ErrFenced, nil)
}

// review2Prepare mocks Prepare: the first call is the fresh claim the
// reset run replays, every later one the takeover's answer.
func (h *harness) review2Prepare(takeover activities.PrepareOutput) *int {
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
	// The ledger answers Recall from the same records: A's keys are there
	// from the moment B runs (A ended with the reset).
	h.recall = func(in activities.RecallInput) activities.RecallOutput {
		out := activities.RecallOutput{SendKeys: takeover.SendKeys, LastUncertainAt: takeover.LastUncertainAt}
		for _, k := range takeover.SendKeys {
			if k.Key == in.SendKey {
				out.FirstAttemptAt, out.Attempts = k.FirstAttemptAt, 1
			}
		}
		return out
	}
	return &n
}

// review2StatusByID mocks Status with a status per message id.
func (h *harness) review2StatusByID(by map[string]provider.Status) {
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		s, ok := by[in.MessageID]
		if !ok {
			s = provider.StatusDelivered
		}
		return provider.Message{ID: in.MessageID, Status: s}, nil
	})
}

// A: m-0 under the event key failed delivery; A (the replaced run) had
// resent under ~resend-2 (its ~resend-1 never left the task queue), and
// m-A under ~resend-2 is alive. B, reset to before that, gets a resend:
// it picks ~resend-1, is fenced, takes over and learns ~resend-2 (else
// branch of takeOver), then sends ~resend-1 without ever searching
// ~resend-2. Two live messages, and no look at ~resend-2 ever happens:
// the duplicate is not reported.
func TestReview2TakeoverSendsNewKeyWithoutSearchingALearntKeyAtTheSameProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.review2Prepare(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: r2, FirstAttemptAt: h.start.Add(2 * time.Minute)}}})
	h.planResends()
	var mu sync.Mutex
	fenced := false
	var acceptedR1 bool
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case in.Request.Key == key:
			return accepted("m-0", attempt, provider.Accepted), nil
		case in.Request.Key != key && !fenced: // the reset run's first new send: the ledger names A
			fenced = true
			return activities.SendOutput{}, review2Fence()
		}
		if in.Request.Key == r1 {
			acceptedR1 = true
		}
		return accepted("m-B", attempt, provider.Accepted), nil
	})
	h.review2StatusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-B": provider.StatusDelivered})
	calls := h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		out := activities.ReconcileOutput{Searched: true, ByKey: true}
		for _, k := range in.Keys {
			if k == r2 {
				out.Messages = append(out.Messages, provider.Message{ID: "m-A", Reference: r2, Status: provider.StatusDelivered})
			}
		}
		return out, nil
	})
	h.signal(10*time.Minute, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	// B meets A's keys: at the fence (a takeover), or from the ledger
	// before its resend, which since the review's fix comes first.
	require.True(t, timelineHas(h.query(), "took the event over") || timelineHas(h.query(), "the ledger holds keys of the event this run did not know"), "%s", timelineTexts(h.query()))
	searchedR2 := false
	calls.mu.Lock()
	for _, c := range calls.calls {
		for _, k := range c.Keys {
			searchedR2 = searchedR2 || k == r2
		}
	}
	calls.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if acceptedR1 {
		require.True(t, res.DuplicateSend || res.PossibleDuplicate,
			"m-A (alive under %s, learnt at the takeover) and m-B (sent under %s after it) are two SMS, unreported: state %s, messages %v, %s searched: %v; timeline: %s",
			r2, r1, res.State, res.MessageIDs, r2, searchedR2, timelineTexts(h.query()))
	}
}

// B: A's ~resend-1 (m-A) failed delivery. B, reset to before A's resend,
// is asked to resend: nextKey picks ~resend-1 again (B never knew it),
// the send is fenced, the takeover finds ~resend-1 in the ledger and
// "carries on" with it: the provider replays A's failed m-A, and the run
// awaits a decision again. The acknowledged resend never made a new SMS.
func TestReview2AResendAfterATakeoverReusesTheOldRunsResendNumber(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.review2Prepare(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{{Key: key, FirstAttemptAt: h.start}, {Key: r1, FirstAttemptAt: h.start.Add(5 * time.Minute)}}})
	h.planResends()
	var mu sync.Mutex
	fenced := false
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case in.Request.Key == key:
			return accepted("m-0", attempt, provider.Accepted), nil
		case in.Request.Key != key && !fenced: // the reset run's first new send: the ledger names A
			fenced = true
			return activities.SendOutput{}, review2Fence()
		case in.Request.Key == r1:
			// The key's first request was A's: the provider replays it.
			return accepted("m-A", attempt, provider.Replayed), nil
		}
		return accepted("m-new", attempt, provider.Accepted), nil
	})
	h.review2StatusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-A": provider.StatusFailed, "m-new": provider.StatusDelivered})
	h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		out := activities.ReconcileOutput{Searched: true, ByKey: true}
		for _, k := range in.Keys {
			switch k {
			case key:
				out.Messages = append(out.Messages, provider.Message{ID: "m-0", Reference: key, Status: provider.StatusFailed})
			case r1:
				out.Messages = append(out.Messages, provider.Message{ID: "m-A", Reference: r1, Status: provider.StatusFailed})
			}
		}
		return out, nil
	})
	h.signal(10*time.Minute, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	// B meets A's keys: at the fence (a takeover), or from the ledger
	// before its resend, which since the review's fix comes first.
	require.True(t, timelineHas(h.query(), "took the event over") || timelineHas(h.query(), "the ledger holds keys of the event this run did not know"), "%s", timelineTexts(h.query()))
	h.mu.Lock()
	var sentKeys []string
	for _, s := range h.sends {
		sentKeys = append(sentKeys, s.Request.Key)
	}
	h.mu.Unlock()
	require.Contains(t, sentKeys, r2, "the acknowledged resend must make a new message under a key never used; sends: %v; ended %s: %s; timeline: %s",
		sentKeys, res.State, res.Reason, timelineTexts(h.query()))
	require.Equal(t, contract.Delivered, res.State, "%s; timeline: %s", res.Reason, timelineTexts(h.query()))
}

// C: the ledger holds A's ~via-sendy (an uncertain attempt at sendy) and
// then A's ~resend-1 at bird. B, on ~resend-1 after a resend decision, is
// fenced; the takeover's first branch (the run's key is in the ledger and
// is the last) returns from resume before leaveOthers, so sendy, where
// the event had an uncertain attempt, never gets its late look: a live
// sendy message beside the bird one is an unreported duplicate.
func TestReview2TakeoverOwesALookToTheProviderOfALearntKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, via := key+"~resend-1", key+"~via-sendy"
	h.review2Prepare(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
		SendKeys: []activities.SendKey{
			{Key: key, FirstAttemptAt: h.start},
			{Key: via, FirstAttemptAt: h.start.Add(2 * time.Minute)},
			{Key: r1, FirstAttemptAt: h.start.Add(5 * time.Minute)},
		},
		LastUncertainAt: h.start.Add(2 * time.Minute)})
	h.planResends()
	h.planned()
	var mu sync.Mutex
	fenced := false
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case in.Request.Key == key:
			return accepted("m-0", attempt, provider.Accepted), nil
		case in.Request.Key != key && !fenced: // the reset run's first new send: the ledger names A
			fenced = true
			return activities.SendOutput{}, review2Fence()
		}
		return accepted("m-A", attempt, provider.Replayed), nil
	})
	h.review2StatusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-A": provider.StatusDelivered})
	calls := h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		if canonical(in.Provider) == "sendy" {
			return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{{ID: "s-1", Reference: via, Status: provider.StatusDelivered}}}, nil
		}
		out := activities.ReconcileOutput{Searched: true, ByKey: true}
		for _, k := range in.Keys {
			switch k {
			case key:
				out.Messages = append(out.Messages, provider.Message{ID: "m-0", Reference: key, Status: provider.StatusFailed})
			case r1:
				out.Messages = append(out.Messages, provider.Message{ID: "m-A", Reference: r1, Status: provider.StatusDelivered})
			}
		}
		return out, nil
	})
	h.signal(10*time.Minute, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	// B meets A's keys: at the fence (a takeover), or from the ledger
	// before its resend, which since the review's fix comes first.
	require.True(t, timelineHas(h.query(), "took the event over") || timelineHas(h.query(), "the ledger holds keys of the event this run did not know"), "%s", timelineTexts(h.query()))
	sendyLooks := 0
	calls.mu.Lock()
	for _, c := range calls.calls {
		if canonical(c.Provider) == "sendy" {
			sendyLooks++
		}
	}
	calls.mu.Unlock()
	require.Contains(t, res.KeysUsed, via)
	require.Positive(t, sendyLooks, "sendy, where the event had an uncertain attempt under %s, gets no look; state %s, messages %v; timeline: %s",
		via, res.State, res.MessageIDs, timelineTexts(h.query()))
	require.True(t, res.DuplicateSend, "s-1 at sendy and m-A at bird are two live messages of the event")
}

// B, past the old key's window: as B, but A's ~resend-1 was first tried
// more than a replay window before B's decision. The Send activity checks
// the window before it begins the attempt, so B's ~resend-1 is refused
// as ErrWindowClosed, not fenced: there is no takeover at all, the
// search finds A's failed m-A under the key B thought new, and the run
// awaits a decision again. The acknowledged resend made no SMS.
func TestReview2AResendOntoTheOldRunsClosedKeyIsDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1, r2 := key+"~resend-1", key+"~resend-2"
	h.review2Prepare(activities.PrepareOutput{Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start,
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
	h.review2StatusByID(map[string]provider.Status{"m-0": provider.StatusFailed, "m-new": provider.StatusDelivered})
	h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		out := activities.ReconcileOutput{Searched: true, ByKey: true}
		for _, k := range in.Keys {
			switch k {
			case key:
				out.Messages = append(out.Messages, provider.Message{ID: "m-0", Reference: key, Status: provider.StatusFailed})
			case r1:
				out.Messages = append(out.Messages, provider.Message{ID: "m-A", Reference: r1, Status: provider.StatusFailed})
			}
		}
		return out, nil
	})
	// m-0 failed at 10 s, inside its window; the decision comes 4 h later.
	h.signal(4*time.Hour, contract.SignalResend, map[string]string{"reason": "customer called", "by": "olga"})
	h.run()
	res, _ := h.result()
	h.mu.Lock()
	var sentKeys []string
	for _, s := range h.sends {
		sentKeys = append(sentKeys, s.Request.Key)
	}
	h.mu.Unlock()
	require.Contains(t, sentKeys, r2, "the acknowledged resend must make a new message under a key never used; sends: %v; ended %s: %s; timeline: %s",
		sentKeys, res.State, res.Reason, timelineTexts(h.query()))
	require.Equal(t, contract.Delivered, res.State, res.Reason)
}
