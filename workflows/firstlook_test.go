package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// lookedAndSettled is a Send whose first look found message id delivered
// and settled the event, as activities.FirstLook does.
func lookedAndSettled(id string) activities.SendOutput {
	out := accepted(id, 1, provider.Accepted)
	out.Looked = provider.StatusDelivered
	out.Settled = &activities.SettleOutput{Outcome: activities.Delivered, Reason: activities.DeliveredReason(id), MessageID: id}
	return out
}

// statusCalls mocks Status, recording each lookup, with the statuses ss
// one a call (the last repeated).
func (h *harness) statusCalls(ss ...provider.Status) *[]activities.StatusInput {
	var mu sync.Mutex
	var calls []activities.StatusInput
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		mu.Lock()
		calls = append(calls, in)
		s := ss[min(len(calls)-1, len(ss)-1)]
		mu.Unlock()
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		return provider.Message{ID: in.MessageID, Status: s}, nil
	}).Maybe()
	return &calls
}

// A delivered run whose Send looked its message up and settled it: the
// run goes from Sending to Delivered, with no lookup, no Accepted state
// and no settle of its own.
func TestARunWhoseSendFoundItsMessageDeliveredEndsWithNothingMore(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(int32, activities.SendInput) (activities.SendOutput, error) { return lookedAndSettled("m-1"), nil })
	lookups := h.statusCalls(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, activities.DeliveredReason("m-1"), res.Reason)
	require.Equal(t, []string{"m-1"}, res.MessageIDs)
	require.Equal(t, "delivered", res.DeliveryStatus)
	require.Empty(t, *lookups, "the Send made the lookup")
	require.Empty(t, h.settles, "the Send settled")
	require.Equal(t, []string{string(contract.Sending), string(contract.Delivered)}, h.states, "no Accepted between")

	require.Len(t, h.sends, 1)
	look := h.sends[0].Look
	require.NotNil(t, look, "Bird's lookups are not paced: the Send looks first")
	require.Equal(t, h.policy.StatusPollInitial, look.After)
	require.NotNil(t, look.Settle, "a plain first send may settle")
	require.Equal(t, []string{key}, look.Settle.KnownKeys)
	s := h.query()
	require.True(t, timelineHasKind(s, contract.KindAccepted))
	require.True(t, timelineHas(s, "message m-1 is delivered"))
}

// A Send that looked and found the message not final yet hands over to
// the tracking schedule at its second interval; the run settles itself.
func TestAFirstLookWithoutAFinalStatusHandsOverToTracking(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(int32, activities.SendInput) (activities.SendOutput, error) {
		out := accepted("m-1", 1, provider.Accepted)
		out.Looked = provider.StatusSent
		return out, nil
	})
	lookups := h.statusCalls(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.NotEmpty(t, *lookups)
	require.Equal(t, 2*h.policy.StatusPollInitial, (*lookups)[0].FirstWait, "the Send made the first lookup: the next waits twice as long")
	require.WithinDuration(t, h.start.Add(2*h.policy.StatusPollInitial), h.env.Now(), time.Second)
	require.Len(t, h.settles, 1, "the run settles itself")
	require.Equal(t, "Delivered", h.settles[0].Outcome)
	require.Equal(t, []string{string(contract.Sending), string(contract.Accepted), string(contract.Delivered)}, h.states)
	require.True(t, timelineHas(h.query(), "message m-1 is sent"))
}

// A first look that finds the message failed asks for a decision at
// once, as tracking would have.
func TestAFirstLookThatFindsTheMessageFailedAwaitsADecision(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(int32, activities.SendInput) (activities.SendOutput, error) {
		out := accepted("m-1", 1, provider.Accepted)
		out.Looked = provider.StatusFailed
		return out, nil
	})
	lookups := h.statusCalls(provider.StatusDelivered)
	h.signal(time.Minute, contract.SignalCancel, map[string]string{"by": "alice", "reason": "customer called"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.Empty(t, *lookups)
	require.Equal(t, []string{string(contract.Sending), string(contract.AwaitingDecision), string(contract.Cancelled)}, h.states)
}

// Who may look first, and who may settle: the Send looks where the
// provider's lookups are not paced and the first wait is short; it
// settles only a run's first send with nothing owed before the settle.
func TestWhichSendsLookFirstAndWhichSettle(t *testing.T) {
	t.Parallel()
	t.Run("paced lookups", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.policy.LookupsPaced = true
		h.prepared()
		h.acceptsAs("m-1")
		h.statuses(provider.StatusDelivered)
		h.run()
		require.Nil(t, h.sends[0].Look, "a paced provider's lookup waits its turn on the queue, not in a Send")
	})
	t.Run("a long first wait", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.policy.StatusPollInitial = time.Minute
		h.policy.StatusPollMax = 10 * time.Minute
		h.prepared()
		h.acceptsAs("m-1")
		h.statuses(provider.StatusDelivered)
		h.run()
		require.Nil(t, h.sends[0].Look, "a minute is a timer's to wait, not an activity's")
	})
	t.Run("a resend", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.prepared()
		h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
			if in.Request.Key == key {
				return accepted("m-1", attempt, provider.Accepted), nil
			}
			return accepted("m-2", attempt, provider.Accepted), nil
		})
		h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed})
		h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(h.request(key+"~resend-1"), nil)
		h.signal(time.Minute, contract.SignalResend, map[string]string{"by": "alice", "reason": "customer did not get it"})
		h.run()
		res, err := h.result()
		require.NoError(t, err)
		require.Equal(t, contract.Delivered, res.State)
		require.Len(t, h.sends, 2)
		require.NotNil(t, h.sends[0].Look.Settle)
		require.NotNil(t, h.sends[1].Look, "the resend looks first too")
		require.Nil(t, h.sends[1].Look.Settle, "a person decided: the run settles what it did")
	})
	t.Run("an uncertain attempt", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.prepared()
		h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
			if attempt == 1 {
				return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
			}
			out := lookedAndSettled("m-1")
			out.Attempt = attempt
			out.Uncertain, out.UncertainSince = true, h.start
			out.Settled = nil // the activity does not settle after an uncertain attempt
			return out, nil
		})
		h.statuses(provider.StatusDelivered)
		h.reconcileByKey(map[string]provider.Message{key: {ID: "m-1", Status: provider.StatusDelivered}})
		h.run()
		res, err := h.result()
		require.NoError(t, err)
		require.Equal(t, contract.Delivered, res.State)
		require.NotEmpty(t, h.settles, "the run looked behind the uncertain attempt and settled itself")
	})
}

// After an uncertain attempt, the Send's answer (m-1) is followed by the
// run's search for a second message under the key. That search finds
// m-0 (the uncertain attempt's message, delivered) and m-1 (failed), so
// adopt makes m-0 the message the run follows. The look's status of m-1
// ("failed") must not be read as m-0's: that would ask a person for a
// resend of an event whose SMS was delivered. (Found by review: the look
// was read after the search, into the status of whichever message the
// run followed then.) Without the look the same run ends Delivered.
func TestAFirstLookIsReadBeforeASearchThatFollowsAnotherMessage(t *testing.T) {
	t.Parallel()
	for _, looked := range []provider.Status{"", provider.StatusFailed} {
		t.Run("looked="+string(looked), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.prepared()
			h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
				if attempt == 1 {
					return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
				}
				out := accepted("m-1", attempt, provider.Accepted)
				out.Uncertain, out.UncertainSince = true, h.start
				out.Looked = looked // the Send's look at m-1 (the activity makes it whether or not uncertain)
				return out, nil
			})
			h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed, "m-0": provider.StatusDelivered})
			h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
				return activities.ReconcileOutput{Searched: true, ByKey: true, Messages: []provider.Message{
					{ID: "m-0", Status: provider.StatusDelivered, Reference: key},
					{ID: "m-1", Status: provider.StatusFailed, Reference: key},
				}}, nil
			})
			h.run()
			res, _ := h.result()
			s := h.query()
			require.Equal(t, contract.Delivered, res.State, "m-0 was found delivered; reason: %s\ntimeline:\n%s", res.Reason, timelineTexts(s))
		})
	}
}

// A first Send whose look found its message failed never reaches
// tracking; the resend's Send makes no look (it failed, Looked == ""),
// so the new message's tracking starts at the schedule's first
// interval, not the doubled one. (Found by review: a flag of the first
// look stayed set.)
func TestOnlyTheMessageTheSendLookedUpIsTrackedFromTheSecondInterval(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	lookups := h.failedThenResent(func(attempt int32) activities.SendOutput {
		return accepted("m-2", attempt, provider.Accepted) // its look failed or had no time
	})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.NotEmpty(t, *lookups)
	require.Equal(t, "m-2", (*lookups)[0].MessageID)
	require.Equal(t, h.policy.StatusPollInitial, (*lookups)[0].FirstWait,
		"nobody looked at m-2: its tracking must start at the schedule's first interval")
}

// A resend (a person decided it) whose Send looks and finds the new
// message delivered: the Send was not asked to settle, so the run
// settles the event itself, with the message it delivered.
func TestAResendFoundDeliveredByItsLookIsSettledByTheRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	lookups := h.failedThenResent(func(attempt int32) activities.SendOutput {
		out := accepted("m-2", attempt, provider.Accepted)
		out.Looked = provider.StatusDelivered // Settle was not asked for: none made
		return out
	})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Len(t, h.sends, 2)
	require.Nil(t, h.sends[1].Look.Settle)
	require.Empty(t, *lookups)
	require.Len(t, h.settles, 1, "the run settles what the Send did not")
	require.Equal(t, "Delivered", h.settles[0].Outcome)
	require.Equal(t, "m-2", h.settles[0].MessageID)
	require.NotNil(t, h.settled)
	require.Equal(t, "m-2", h.settled.MessageID)
}

// A Temporal cancellation request that comes while the Send waits for
// its look: the Send finds the message delivered and settles it; the
// run ends Delivered (a sent SMS cannot be cancelled), agreeing with the
// ledger, and says it refused the request.
func TestATemporalCancellationDuringTheLookMeetsADeliveredSettledRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.env.OnActivity(a.Send, mock.Anything, mock.Anything).After(10 * time.Second).Return(func(ctx context.Context, in activities.SendInput) (activities.SendOutput, error) {
		h.mu.Lock()
		h.sends = append(h.sends, in)
		h.mu.Unlock()
		return lookedAndSettled("m-1"), nil
	})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 5*time.Second)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Empty(t, h.settles, "the Send settled")
	require.Equal(t, []string{string(contract.Sending), string(contract.Delivered)}, h.states)
	require.True(t, timelineHasKind(h.query(), contract.KindDecisionRefused), "the cancellation request was refused")
}

// The Send's start-to-close holds the look: the attempt's own time
// (AttemptTimeout + AttemptSlack, which the send keeps as SendWithin),
// the wait, the lookup's bound (the attempt timeout, at most
// FirstLookTimeout) and the settle's time; a Send that does not look
// (paced lookups) keeps the attempt's own time only.
func TestTheSendsStartToCloseHoldsTheLook(t *testing.T) {
	t.Parallel()
	for _, paced := range []bool{false, true} {
		h := newHarness(t)
		h.policy.LookupsPaced = paced
		h.prepared()
		var stc time.Duration
		h.env.OnActivity(a.Send, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SendInput) (activities.SendOutput, error) {
			h.mu.Lock()
			h.sends = append(h.sends, in)
			stc = activity.GetInfo(ctx).StartToCloseTimeout
			h.mu.Unlock()
			if in.Look == nil {
				return accepted("m-1", 1, provider.Accepted), nil
			}
			return lookedAndSettled("m-1"), nil
		})
		h.statuses(provider.StatusDelivered)
		h.run()
		_, err := h.result()
		require.NoError(t, err)
		own := h.policy.AttemptTimeout + activities.AttemptSlack
		if paced {
			require.Nil(t, h.sends[0].Look)
			require.Equal(t, own, stc)
			continue
		}
		require.NotNil(t, h.sends[0].Look)
		require.Equal(t, own, h.sends[0].Look.SendWithin)
		require.Equal(t, own+h.policy.StatusPollInitial+min(h.policy.AttemptTimeout, activities.FirstLookTimeout)+activities.FirstLookSettleTime, stc)
		require.Equal(t, 40*time.Second, stc, "with the default policy: 15 s + 5 s + the 10 s wait + 5 s for the lookup + 5 s for the settle")
	}
}

// A Send attempt that got the message accepted, looked, found it
// delivered and settled the event, but whose completion came after its
// start-to-close (the worker stalled after the settle): the server runs
// the attempt again, Bird replays the answer, and that attempt's look
// settles again (the ledger keeps the one settle). The run ends
// Delivered with the one message, agreeing with the ledger, and says the
// replay sent nothing again.
func TestASendRetriedAfterItsSettleEndsDeliveredWithTheOneMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.settlesThenStalls(func(attempt int32) activities.SendOutput {
		out := lookedAndSettled("m-1")
		out.Result.Outcome, out.Attempt = provider.Replayed, attempt
		return out
	})
	lookups := h.statusCalls(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	s := h.query()
	require.Equal(t, contract.Delivered, res.State, "timeline:\n%s", timelineTexts(s))
	require.Equal(t, []string{"m-1"}, res.MessageIDs)
	require.Equal(t, 1, res.Replays)
	require.False(t, res.PossibleDuplicate)
	require.False(t, res.DuplicateSend)
	require.Empty(t, *lookups)
	require.Equal(t, "m-1", h.settled.MessageID)
	require.Equal(t, []string{string(contract.Sending), string(contract.Delivered)}, h.states)
	t.Logf("sends: %d, attempts: %d\n%s", len(h.sends), res.Attempts, timelineTexts(s))
}

// A Send attempt that settled the event (its look found the message
// delivered) and then timed out; the retried attempt's look fails and
// no lookup answers until the tracking limit: the run would end
// Unconfirmed, and its settle meets the one its own stalled Send
// attempt made. The run takes
// the ledger's Delivered, and must not say another run of its workflow
// (one a reset replaced) settled it: no other run exists.
func TestARunWhoseOwnStalledSendSettledDoesNotBlameAnotherRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.policy.TrackingLimit = 2 * time.Minute
	h.prepared()
	h.settlesThenStalls(func(attempt int32) activities.SendOutput {
		return accepted("m-1", attempt, provider.Replayed) // its look failed
	})
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(provider.Message{}, temporal.NewApplicationError("bird: 503 service unavailable", "ProviderUnavailable"))
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	s := h.query()
	t.Logf("state %s, reason: %s\ntimeline:\n%s", res.State, res.Reason, timelineTexts(s))
	require.Equal(t, contract.Delivered, res.State, "the ledger holds Delivered, settled by this run's own Send")
	require.NotContains(t, res.Reason, "another run of this workflow", "no other run of the workflow exists")
}

// settlesThenStalls makes the Send's first attempt settle m-1 as
// delivered in the ledger and then time out (its completion came after
// its start-to-close, as when the worker stalls after the settle); later
// attempts answer what later gives.
func (h *harness) settlesThenStalls(later func(attempt int32) activities.SendOutput) {
	h.env.OnActivity(a.Send, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SendInput) (activities.SendOutput, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.sends = append(h.sends, in)
		attempt := activity.GetInfo(ctx).Attempt
		if attempt > 1 {
			return later(attempt), nil
		}
		h.settled = &activities.SettleInput{Key: key, Outcome: activities.Delivered, Reason: activities.DeliveredReason("m-1"), MessageID: "m-1"}
		return activities.SendOutput{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
	})
}

// failedThenResent: the first Send's look finds m-1 failed, alice resends
// a minute in, and the resend's Send answers resent(attempt). It returns
// the status lookups the run makes (each finds the message delivered).
func (h *harness) failedThenResent(resent func(attempt int32) activities.SendOutput) *[]activities.StatusInput {
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key != key {
			return resent(attempt), nil
		}
		out := accepted("m-1", attempt, provider.Accepted)
		out.Looked = provider.StatusFailed
		return out, nil
	})
	lookups := h.statusCalls(provider.StatusDelivered)
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(h.request(key+"~resend-1"), nil)
	h.signal(time.Minute, contract.SignalResend, map[string]string{"by": "alice", "reason": "customer did not get it"})
	return lookups
}
