package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/provider"
)

// send runs the send activity until the message is accepted, the request
// is rejected, or the key's replay window (minus margin) runs out. The
// retries end early enough to leave one last attempt with the same key and bytes as late as the window allows, so an
// answer the provider stored meanwhile is always collected.
func (r *run) send() (contract.State, bool) {
	now := workflow.Now(r.ctx)
	if r.sending.start.IsZero() {
		r.sending.start = now
	}
	if r.sending.eventStart.IsZero() {
		r.sending.eventStart = r.sending.start
	}
	deadline := r.sending.start.Add(r.policy.SendBudget())
	remaining := deadline.Sub(now)
	if remaining <= 0 {
		r.note(contract.KindSendUnknown, "the replay window of %s has closed: reconciling before anything is sent", r.sending.req.Key)
		return contract.Reconciling, false
	}
	r.note(contract.KindSending, "sending with key %s (retries until %s)", r.sending.req.Key, now.Add(remaining).Format(time.RFC3339))
	lastAt := deadline.Add(-r.policy.LastAttemptLead())
	var out activities.SendOutput
	var err error
	if budget := lastAt.Sub(now); budget > 0 {
		out, err = r.sendAttempts(budget, int32(budget/r.policy.InitialBackoff)+1, false)
		if err == nil || !windowRanOut(err) {
			return r.sent(out, err)
		}
		r.countFailed(err)
		r.sending.last = errorMessage(err)
		r.note(contract.KindSending, "retries of %s ended without an answer that settles it (last: %s); one last attempt with the same key and bytes at %s collects any answer the provider stored meanwhile",
			r.sending.req.Key, r.sending.last, lastAt.UTC().Format(time.RFC3339))
	}
	if wait := lastAt.Sub(workflow.Now(r.ctx)); wait > 0 {
		_ = workflow.Sleep(r.ctx, wait)
	}
	// A worker that was down when the timer fired may take this step up
	// only after the window closed: then there is no last attempt.
	left := deadline.Sub(workflow.Now(r.ctx))
	if left <= 0 {
		r.note(contract.KindSendUnknown, "the replay window of %s (minus margin) ran out with the outcome unknown before its last attempt could start (no worker ran the run in time); last answer: %s", r.sending.req.Key, r.sending.last)
		return contract.Reconciling, false
	}
	return r.sent(r.sendAttempts(left+r.policy.AttemptTimeout+activities.AttemptSlack, 1, true))
}

// sendAttempts runs the Send activity with the key's request under a
// retry policy by outcome class, bounded by budget and maxAttempts; last
// marks the last attempt after the retries.
func (r *run) sendAttempts(budget time.Duration, maxAttempts int32, last bool) (activities.SendOutput, error) {
	look := r.firstLook()
	ctx := workflow.WithActivityOptions(r.ctx, r.onQueue(workflow.ActivityOptions{
		StartToCloseTimeout:    r.policy.AttemptTimeout + activities.AttemptSlack + activities.FirstLookTime(look),
		ScheduleToCloseTimeout: budget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    r.policy.InitialBackoff,
			BackoffCoefficient: 2,
			MaximumInterval:    r.policy.MaxBackoff,
			// The window (ScheduleToClose) ends the retries. This bound can
			// never bind first; it is explicit because 0 means "unlimited"
			// on a server but 10 in the SDK's test environment.
			MaximumAttempts:        maxAttempts,
			NonRetryableErrorTypes: activities.NonRetryable,
		},
	}, contract.PrioritySend))
	// A run may send a key again in a new activity (its send never left
	// the queue, or its window turned out to be open): that activity's
	// attempts restart at 1, and their rows must come after the ones the
	// run already holds for the key.
	after := last || r.sending.sentUnder[r.sending.req.Key]
	if r.sending.sentUnder == nil {
		r.sending.sentUnder = map[string]bool{}
	}
	r.sending.sentUnder[r.sending.req.Key] = true
	var out activities.SendOutput
	err := workflow.ExecuteActivity(ctx, a.Send, activities.SendInput{
		EventKey: r.in.Key, Request: r.sending.req, Budget: r.policy.SendBudget(), InProgressDelay: r.policy.InProgressDelay, LedgerID: r.held.ledgerID,
		AfterRetries: after, Look: look,
	}).Get(ctx, &out)
	return out, err
}

// maxFirstLookWait bounds the wait a Send makes for its first status
// lookup: a longer first interval (--status-poll) is a timer's, not an
// activity's, to wait.
const maxFirstLookWait = 30 * time.Second

// firstLook is what a Send does beside the send (activities.FirstLook):
// the first status lookup, where the provider's lookups are not held to
// its rate limit and the tracking schedule's first wait is short, and
// the settle of a delivered message, where the run's own settle would
// be the plain one (settlesPlainly).
func (r *run) firstLook() *activities.FirstLook {
	if r.policy.LookupsPaced || r.policy.StatusPollInitial > maxFirstLookWait {
		return nil
	}
	l := &activities.FirstLook{After: r.policy.StatusPollInitial, SendWithin: r.policy.AttemptTimeout + activities.AttemptSlack, Timeout: r.policy.AttemptTimeout}
	if r.settlesPlainly() {
		l.Settle = &activities.SettleInput{LedgerID: r.held.ledgerID, KnownKeys: r.st.KeysUsed}
		r.held.sendSettles = true
	}
	return l
}

// settlesPlainly reports a run whose settle, were its message delivered
// now, would be the event's first, with nothing to look behind or report
// first: its first send of the event, no attempt without a certain
// answer, no provider left, no message known and nothing found. A Send
// may make that settle; every other run settles itself (finish.go).
func (r *run) settlesPlainly() bool {
	switch {
	case !r.held.claimed || r.held.takeovers > 0:
		return false // the claim is another run's, or was
	case !r.look.lateAt.IsZero() || len(r.look.left) > 0 || r.look.unresolved():
		return false // a look is owed before the settle
	case r.dec.resends > 0 || r.dec.applying != nil:
		return false // a person decided: the run settles what it did
	}
	return len(r.st.MessageIDs) == 0 && len(r.findings()) == 0
}

// sent reads the send's end: accepted, rejected, or the outcome unknown.
func (r *run) sent(out activities.SendOutput, err error) (contract.State, bool) {
	if err == nil {
		res := out.Result
		r.st.Attempts += int(out.Attempt)
		if len(r.st.MessageIDs) == 0 {
			// The event's first accepted message: how long after the
			// event's start a provider took it (a one-time code's SLO),
			// by the worker's clock when the Send looked first.
			// Through the SDK's handler: not recorded again on replay.
			at := workflow.Now(r.ctx)
			if !out.AcceptedAt.IsZero() && out.AcceptedAt.Before(at) {
				at = out.AcceptedAt
			}
			workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"provider": string(r.sending.req.Provider)}).
				Timer(name.AcceptLatency).Record(max(at.Sub(workflow.GetInfo(r.ctx).WorkflowStartTime), 0))
		}
		if res.Outcome == provider.Replayed {
			r.st.Replays++
			r.note(contract.KindAccepted, "replay: %s answered attempt %d from its replay store with message %s; nothing was sent again", r.st.Provider, out.Attempt, res.MessageID)
		} else {
			r.note(contract.KindAccepted, "accepted as message %s on attempt %d", res.MessageID, out.Attempt)
		}
		r.msgs.primary = res.MessageID
		r.st.DeliveryStatus = string(res.Status)
		r.addMessageAt(res.MessageID, r.st.Provider)
		r.seen(res.MessageID, res.Status)
		if other := r.ledgerAnswered(); len(other) > 0 {
			// The ledger holds another accepted answer under the key (the
			// run a reset replaced got it): the provider took the key twice.
			r.note(contract.KindFound, "the ledger holds %s's accepted answer %s under %s too, from another run of this workflow", r.st.Provider, strings.Join(other, ", "), r.sending.req.Key)
			for _, id := range other {
				r.seen(id, provider.StatusAccepted)
			}
		}
		// What the Send's first look found came before any search below:
		// a search may find fresher news, or another message to follow.
		r.lookedFirst(res.MessageID, out.Looked)
		if out.Uncertain {
			r.note(contract.KindSearching, "an earlier attempt of %s ended without a certain answer: looking for a second message under the key", r.sending.req.Key)
			byKey, _, _ := r.lookForDuplicates([]string{r.sending.req.Key})
			r.uncertainSince(out.UncertainSince)
			if !byKey && res.Outcome == provider.Accepted {
				r.possibleDuplicate(fmt.Sprintf("%s answered attempt %d with a new message (not a replay) after an attempt of %s without a certain answer; had that attempt taken effect without %s storing its answer, the phone got two messages, and %s cannot be searched by key to tell",
					r.st.Provider, out.Attempt, r.sending.req.Key, r.st.Provider, r.st.Provider))
			}
		}
		r.held.settled = out.Settled
		if next, final := r.finalStatus(r.msgs.primary, provider.Status(r.st.DeliveryStatus)); final {
			// A final status ends the tracking before it begins: a
			// delivered run goes from Sending to Delivered.
			return next, false
		}
		return contract.Accepted, false
	}

	r.countFailed(err)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.ErrRejected, activities.ErrKeyConflict, activities.ErrInvalidRequest:
			r.st.Reason = appErr.Message()
			r.note(contract.KindRejected, "rejected, not retried: %s", appErr.Message())
			return r.rejected(appErr.Message()), false
		case activities.ErrWindowClosed:
			r.note(contract.KindSendUnknown, "%s", appErr.Message())
			// The ledger's clock closed the window: no further send, but
			// its uncertain attempts still arm the late look.
			r.uncertainSince(r.recall(r.sending.req.Key).LastUncertainAt)
			return contract.Reconciling, false
		case activities.ErrFenced:
			// What this run's own attempts left uncertain stands.
			r.uncertainSince(r.recall(r.sending.req.Key).LastUncertainAt)
			return r.takeOver(appErr.Message()), false
		}
	}
	r.sending.last = errorMessage(err)
	return r.unsettled(), false
}

// lookedFirst reads the status the Send's first look found for message
// id (activities.FirstLook; empty when it made none): tracking it starts
// from the schedule's second interval.
func (r *run) lookedFirst(id string, looked provider.Status) {
	r.msgs.firstLooked = ""
	if looked == "" {
		return
	}
	r.msgs.firstLooked = id
	if string(looked) != r.st.DeliveryStatus {
		r.st.DeliveryStatus = string(looked)
		r.note(contract.KindStatus, "message %s is %s", id, looked)
	}
	r.seen(id, looked)
}

// maxNotSentWindows bounds the windows a run spends on a key whose send
// never began (it waited in the task queue every time) before it asks a
// person.
const maxNotSentWindows = 3

// unsettled reads a send that ended without an answer that settles it
// (the retries ran out of the window, the activity timed out, or waited
// in the task queue until its budget ended) from the ledger, which holds
// every attempt that began: none means nothing reached the provider, and
// the key's replay window starts with its first attempt, not with the
// run's; an attempt that may still take effect arms the late look, so
// the run looks for its message before it settles, whatever else fails.
func (r *run) unsettled() contract.State {
	rec := r.recall(r.sending.req.Key)
	r.uncertainSince(rec.LastUncertainAt)
	if rec.Attempts == 0 {
		r.sending.notSentWindows++
		r.sending.start = time.Time{}
		if r.sending.notSentWindows >= maxNotSentWindows {
			r.look.last = searchSpoke
			r.st.Reason = fmt.Sprintf("not sent: no attempt under %s ever began in %d tries of its window (the send waited in the task queue: %s); nothing reached %s, so a plain resend is safe, or cancel",
				r.sending.req.Key, r.sending.notSentWindows, r.sending.last, r.st.Provider)
			r.note(contract.KindNotSent, "%s", r.st.Reason)
			return contract.AwaitingDecision
		}
		r.note(contract.KindNotSent, "no attempt under %s began (last: %s): the send never left the task queue, so nothing reached %s; sending again, its replay window counted from its first attempt",
			r.sending.req.Key, r.sending.last, r.st.Provider)
		return contract.Sending
	}
	r.sending.notSentWindows = 0
	if rec.FirstAttemptAt.After(r.sending.start) {
		// The provider's window for the key began with its first attempt,
		// not when the run first asked for one.
		r.sending.start = rec.FirstAttemptAt
	}
	if left := r.sending.start.Add(r.policy.SendBudget()).Sub(workflow.Now(r.ctx)); left > r.policy.AttemptTimeout+activities.AttemptSlack {
		r.note(contract.KindSending, "the send of %s ended with the outcome unknown (%s), but its replay window, counted from its first attempt at %s, is open until %s: trying again with the same key and bytes",
			r.sending.req.Key, r.sending.last, r.sending.start.UTC().Format(time.RFC3339), r.sending.start.Add(r.policy.SendBudget()).UTC().Format(time.RFC3339))
		return contract.Sending
	}
	r.note(contract.KindSendUnknown, "the replay window of %s (minus margin) ran out with the outcome unknown; last answer: %s", r.sending.req.Key, r.sending.last)
	return contract.Reconciling
}

// rejected ends a send the provider refused. Where an earlier attempt of
// the event ended without a certain answer, the refusal says nothing
// about it: the run searches once that attempt can no longer take
// effect, follows a message it finds, and where no search can tell,
// awaits a decision with the outcome unknown instead of ending Failed.
//
// A message id the ledger holds for the event makes the run search too:
// another run of its workflow (the one a reset replaced) may have been
// accepted where this one is refused.
func (r *run) rejected(reason string) contract.State {
	rec := r.recall(r.sending.req.Key)
	r.uncertainSince(rec.LastUncertainAt)
	r.learnMessages(rec.Messages)
	held := 0 // ids the ledger holds whose status the run never saw
	if len(r.msgs.live) == 0 {
		for _, m := range rec.Messages {
			if !r.msgs.observed[m.ID] {
				held++
			}
		}
	}
	if !r.recheckPending() && held == 0 {
		return contract.Failed
	}
	r.setState(contract.Reconciling)
	if r.recheckPending() {
		r.note(contract.KindSearching, "an earlier attempt of the event ended without a certain answer and may have sent the SMS: searching %s's records once it can no longer take effect, before the run ends", r.st.Provider)
	} else {
		r.note(contract.KindSearching, "the ledger holds %d message id(s) of the event whose status this run never saw (another run's attempts): searching %s's records for a live one before the run ends", held, r.st.Provider)
	}
	out, err := r.lateLook()
	switch {
	case err != nil:
		r.look.failed()
		if r.followLedgerAnswer(err) {
			return contract.Accepted
		}
		r.st.Reason = fmt.Sprintf("the outcome is unknown: %s; an earlier attempt ended without a certain answer, and the search of %s's records failed (%s); the run searches again every %s",
			reason, r.st.Provider, errorMessage(err), r.policy.ReconcileRetry)
		r.note(contract.KindSearchFailed, "%s", r.st.Reason)
		return contract.AwaitingDecision
	case r.adopt(out):
		r.note(contract.KindFound, "a message of the event is alive after all: following it")
		return contract.Accepted
	case r.look.mute():
		r.st.Reason = fmt.Sprintf("the outcome is unknown: %s; an earlier attempt ended without a certain answer, and %s", reason, out.How)
		r.note(contract.KindOutcomeUnknown, "%s", r.st.Reason)
		return contract.AwaitingDecision
	case len(out.Messages) > 0:
		r.st.Reason = fmt.Sprintf("%s; a search of %s's records after every attempt could take effect found only failed messages of the event (%s)", reason, r.st.Provider, r.st.DeliveryStatus)
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return contract.Failed
	}
	r.st.Reason = fmt.Sprintf("%s; a search of %s's records after every attempt could take effect found no message of the event", reason, r.st.Provider)
	r.note(contract.KindEnded, "%s", r.st.Reason)
	return contract.Failed
}

// lateLook waits until every uncertain attempt can no longer take effect,
// then searches the provider's records for every key: the look that
// counts as the late one.
func (r *run) lateLook() (activities.ReconcileOutput, error) {
	if wait := r.look.lateAt.Sub(workflow.Now(r.ctx)); wait > 0 {
		r.note(contract.KindWaiting, "waiting until %s: an attempt without a certain answer could take effect until then", r.look.lateAt.UTC().Format(time.RFC3339))
		_ = workflow.Sleep(r.ctx, wait)
	}
	lateAt := r.look.lateAt
	out, err := r.lookup(r.provKeys())
	if err == nil {
		r.note(contract.KindSearched, "reconciled: %s", out.How)
		r.searched(out)
		r.lateLookMade(lateAt)
	}
	return out, err
}

// countFailed adds the attempts of a send that failed to the count.
func (r *run) countFailed(err error) {
	var failure activities.SendFailure
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() && appErr.Details(&failure) == nil {
		r.st.Attempts += int(failure.Attempt)
	}
}

// possibleDuplicate records that a second message may exist that no
// search can confirm or rule out.
func (r *run) possibleDuplicate(why string) {
	r.st.PossibleDuplicate = true
	r.note(contract.KindDuplicate, "possible duplicate: %s", why)
}
