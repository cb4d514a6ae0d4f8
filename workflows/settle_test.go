package workflows

// The settle: what a run records in the ledger as the event's outcome,
// and what it takes from the ledger when another run of the workflow
// (the one a reset replaced) settled first.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// keptLedger is a ledger that keeps what the ledger keeps of an event:
// the outcome (rank rule) and the union of every settling run's message
// ids and findings, which it returns as the Settle activity does
// (SettleOutput.MessageIDs, Findings). newHarness's Settle returns
// neither.
type keptLedger struct {
	mu      sync.Mutex
	event   ledger.Event
	settles []activities.SettleInput
}

// newKeptLedgerHarness is a harness whose Settle is l's, and whose
// ledger holds two attempts of the event key, begun at the start and
// uncertain, unless h.recall is set again.
func newKeptLedgerHarness(t *testing.T, l *keptLedger) *harness {
	t.Helper()
	h := newBareHarness(t, quiet)
	h.env.OnActivity(a.Settle, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SettleInput) (activities.SettleOutput, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.settles = append(l.settles, in)
		e := &l.event
		if e.Outcome == "" || (in.MessageID != "" && ledger.Rank(in.Outcome) > ledger.Rank(e.Outcome)) {
			e.Outcome, e.Reason, e.MessageID = in.Outcome, in.Reason, in.MessageID
		}
		for _, id := range in.MessageIDs {
			if !slices.Contains(e.MessageIDs, id) {
				e.MessageIDs = append(e.MessageIDs, id)
			}
		}
		for _, f := range in.Findings {
			if !slices.Contains(e.Findings, f) {
				e.Findings = append(e.Findings, f)
			}
		}
		return activities.SettleOutput{Outcome: e.Outcome, Reason: e.Reason, MessageID: e.MessageID, SettledAt: e.SettledAt,
			MessageIDs: slices.Clone(e.MessageIDs), Findings: slices.Clone(e.Findings)}, nil
	}).Maybe()
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 2, LastUncertainAt: h.start}
	}
	h.recallTheSends()
	return h
}

// settled() takes the ledger's outcome when another run of the workflow
// settled first, but not the ledger's message.
//
// Path: run A found message m-A (its search succeeded) and settled the
// event Delivered with m-A. An operator reset the workflow to a point
// where the send of the event key had ended with the outcome unknown;
// the new run B sends nothing more (so it is never fenced and never
// takes over, which is where the ledger's Settled would be read), every
// search B makes fails, and a person cancels. B settles: the ledger
// answers Delivered, m-A. The run turns B into Delivered, but its
// messageIds stay empty: a Delivered result with no message, whose
// outcomeUnknown is still true, and without the ledger's message (the
// simulation's check "the ledger's message ... is not among the run's"
// is exactly this disagreement).
func TestTheLedgersOutcomeIsTakenWithTheLedgersMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.settled = &activities.SettleInput{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-A", MessageID: "m-A"}
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.recall = func(activities.RecallInput) activities.RecallOutput {
		return activities.RecallOutput{FirstAttemptAt: h.start, Attempts: 3, LastUncertainAt: h.start}
	}
	h.searchesFail(searchDown())
	h.signal(h.policy.SendBudget()+time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Delivered, res.State, "the run takes the ledger's outcome: %s", res.Reason)
	require.Contains(t, res.MessageIDs, "m-A",
		"the result takes the ledger's outcome Delivered but not its message: messageIds %v, outcomeUnknown %v", res.MessageIDs, res.OutcomeUnknown)
}

// settled() takes what the ledger keeps of the event (takeRecord) only
// when the ledger's outcome differs from the run's. A run whose outcome
// is the same as the one another run settled ignores the messages and
// the proven duplicate that run recorded, and the Settle activity has
// just returned them.
//
// Path: run A is on the path of
// TestADeliveredRunWhoseLateLookFailsDoesNotHideTheHungAttempt, but its
// late look succeeds: it finds m-1 (the hung attempt) beside m-2, proves
// the duplicate and settles Delivered m-2, recording [m-2, m-1] and
// duplicateSend. An operator resets the workflow to a point while A was
// tracking m-2 (before its late look). The new run B replays to there,
// m-2 is delivered, and B's late look fails. B settles Delivered m-2:
// the ledger keeps A's Delivered m-2 (same rank) and answers with
// [m-2, m-1] and duplicateSend. B's outcome is the ledger's, so the
// branch of settled() that takes the ledger's record does not run: B
// ends Delivered with messageIds [m-2] and no duplicateSend, while the
// ledger it just read says the phone got two SMS; a second start
// afterwards (Duplicate) would report the duplicate that the run's own
// result hides.
func TestASettleThatMeetsTheSameOutcomeTakesWhatTheLedgerKeeps(t *testing.T) {
	t.Parallel()
	l := &keptLedger{event: ledger.Event{Key: key, Outcome: string(contract.Delivered), Reason: "delivered as message m-2", MessageID: "m-2",
		MessageIDs: []string{"m-2", "m-1"}, Findings: []string{ledger.FindingDuplicateSend}}}
	h := newKeptLedgerHarness(t, l)
	h.prepared()
	h.hungThenDelivered()
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	require.NotEmpty(t, l.settles)
	require.Equal(t, []string{"m-2", "m-1"}, l.event.MessageIDs, "the ledger keeps A's messages")
	require.True(t, res.DuplicateSend && slices.Contains(res.MessageIDs, "m-1"),
		"the ledger answered the settle with messages [m-2 m-1] and duplicateSend; the run ends with messageIds %v, duplicateSend %v", res.MessageIDs, res.DuplicateSend)
}

// The rank rule lets a run that merely could not see a message's status
// replace the outcome of a run that saw it fail: Unconfirmed with a
// message id outranks Cancelled even when the Cancelled record names
// that very message.
//
// Path: run A's message m-1 was accepted, then ended undelivered; A
// awaited a decision, a person cancelled, and A settled Cancelled with
// m-1 (its primary) — right: the provider holds m-1 failed and nothing
// else. An operator resets the workflow to a point while A tracked m-1.
// The new run B follows m-1, but every status lookup fails (the
// simulation's lookup outage) until the tracking limit, so B ends
// Unconfirmed with m-1 (no uncertain attempt, so no late look that
// might have seen m-1 failed); the cancel that Temporal's reset
// reapplies meets a run that is not awaiting a decision and is refused.
// B's settle, Unconfirmed m-1, ranks above Cancelled and replaces it: the
// ledger and the result now say an SMS was accepted and may have
// reached the phone, for a message the provider holds failed, and the
// person's cancel is only a parenthesis in the reason. B learnt nothing
// of a message that went out that the record lacked (it names m-1);
// before the rank rule, and with it for a message id the record already
// holds, B would end in the ledger's Cancelled (the branch of settled()
// that takes the ledger's record). ledger/review7b_test.go shows the
// same at the ledger.
func TestAnUnconfirmedThatKnowsNothingNewDoesNotReplaceACancelOfTheSameMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.policy.TrackingLimit = 3 * time.Minute
	h.settled = &activities.SettleInput{Key: key, Outcome: string(contract.Cancelled), MessageID: "m-1",
		Reason: "cancelled by dave: message m-1 ended undelivered"}
	h.prepared()
	h.acceptsAs("m-1")
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		return provider.Message{}, errors.New("bird: 503 on the message endpoint")
	})
	h.run()
	res, _ := h.result()
	require.Equal(t, "m-1", h.settled.MessageID)
	require.Equal(t, string(contract.Cancelled), h.settled.Outcome,
		"a settle that names no message the record lacks replaced the cancelled outcome: ledger %s (%s)", h.settled.Outcome, h.settled.Reason)
	require.Equal(t, contract.Cancelled, res.State, res.Reason)
}

// A key another run sent under, at the settle, with every search
// failing: the run delivered m-1, but the ledger holds a resend key
// another run of the workflow (the one a reset replaced) sent under,
// with an uncertain attempt. The search of that key fails: a second
// message cannot be ruled out, and the result must say so (a possible
// duplicate, or the outcome unknown).
func TestAnUnknownKeyWhoseSearchFailsIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.acceptsAs("m-1")
	h.statuses(provider.StatusDelivered)
	calls := h.searchesFail(temporal.NewNonRetryableApplicationError("bird: 503 on the list endpoint", "ProviderDown", nil))
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

// The settle record of a message at a provider the run left: the run
// moved to sendy, sendy refused (401), and the last look at bird found a
// live message: the run ends Unconfirmed with that message, and the
// ledger's record names it, so a later start of the event is told which
// message went out.
func TestAMessageThatTurnsUpAtTheProviderLeftIsSettledWithItsID(t *testing.T) {
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
	h.runWithFallback("sendy")
	res, _ := h.result()
	require.Equal(t, contract.Unconfirmed, res.State, res.Reason)
	require.Contains(t, res.MessageIDs, "b-1")
	require.NotNil(t, h.settled)
	require.Equal(t, "b-1", h.settled.MessageID, "the ledger's record of the event names the message that went out")
}
