package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// send runs the send activity until the message is accepted, the request
// is rejected, or the key's replay window (minus margin) runs out. Since
// versionNoSilentDuplicates the retries end early enough to leave one last
// attempt with the same key and bytes as late as the window allows, so an
// answer the provider stored meanwhile is always collected.
func (r *run) send() (contract.State, bool) {
	now := workflow.Now(r.ctx)
	if r.sendStart.IsZero() {
		r.sendStart = now
	}
	if r.eventStart.IsZero() {
		r.eventStart = r.sendStart
	}
	deadline := r.sendStart.Add(r.policy.SendBudget())
	remaining := deadline.Sub(now)
	if remaining <= 0 {
		r.note("the replay window of %s has closed: reconciling before anything is sent", r.req.Key)
		return contract.Reconciling, false
	}
	r.note("sending with key %s (retries until %s)", r.req.Key, now.Add(remaining).Format(time.RFC3339))
	if !r.fixed() {
		return r.sent(r.sendAttempts(remaining, int32(remaining/r.policy.InitialBackoff)+1, false))
	}
	lastAt := deadline.Add(-r.policy.LastAttemptLead())
	var out activities.SendOutput
	var err error
	if budget := lastAt.Sub(now); budget > 0 {
		out, err = r.sendAttempts(budget, int32(budget/r.policy.InitialBackoff)+1, false)
		if err == nil || !windowRanOut(err) {
			return r.sent(out, err)
		}
		r.countFailed(err)
		r.lastSend = errorMessage(err)
		r.note("retries of %s ended without an answer that settles it (last: %s); one last attempt with the same key and bytes at %s collects any answer the provider stored meanwhile",
			r.req.Key, r.lastSend, lastAt.UTC().Format(time.RFC3339))
	}
	if wait := lastAt.Sub(workflow.Now(r.ctx)); wait > 0 {
		_ = workflow.Sleep(r.ctx, wait)
	}
	// A worker that was down when the timer fired may take this step up
	// only after the window closed: then there is no last attempt.
	left := deadline.Sub(workflow.Now(r.ctx))
	if left <= 0 {
		r.note("the replay window of %s (minus margin) ran out with the outcome unknown before its last attempt could start (no worker ran the run in time); last answer: %s", r.req.Key, r.lastSend)
		return contract.Reconciling, false
	}
	return r.sent(r.sendAttempts(left+r.policy.AttemptTimeout+activities.AttemptSlack, 1, true))
}

// sendAttempts runs the Send activity with the key's request under a
// retry policy by outcome class, bounded by budget and maxAttempts; last
// marks the last attempt after the retries.
func (r *run) sendAttempts(budget time.Duration, maxAttempts int32, last bool) (activities.SendOutput, error) {
	ctx := workflow.WithActivityOptions(r.ctx, r.onQueue(workflow.ActivityOptions{
		StartToCloseTimeout:    r.policy.AttemptTimeout + activities.AttemptSlack,
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
	}, contract.PurposeSend))
	var out activities.SendOutput
	err := workflow.ExecuteActivity(ctx, a.Send, activities.SendInput{
		EventKey: r.in.Key, Request: r.req, Budget: r.policy.SendBudget(), InProgressDelay: r.policy.InProgressDelay, LedgerID: r.ledgerID,
		AfterRetries: last,
	}).Get(ctx, &out)
	return out, err
}

// sent reads the send's end: accepted, rejected, or the outcome unknown.
func (r *run) sent(out activities.SendOutput, err error) (contract.State, bool) {
	if err == nil {
		res := out.Result
		r.st.Attempts += int(out.Attempt)
		if res.Outcome == provider.Replayed {
			r.st.Replays++
			r.note("replay: %s answered attempt %d from its replay store with message %s; nothing was sent again", r.st.Provider, out.Attempt, res.MessageID)
		} else {
			r.note("accepted as message %s on attempt %d", res.MessageID, out.Attempt)
		}
		r.addMessage(res.MessageID)
		r.primary = res.MessageID
		r.st.DeliveryStatus = string(res.Status)
		if out.Uncertain {
			r.note("an earlier attempt of %s ended without a certain answer: looking for a second message under the key", r.req.Key)
			byKey, _ := r.lookForDuplicates([]string{r.req.Key})
			if r.fixed() {
				r.uncertainSince(out.UncertainSince)
				if !byKey && res.Outcome == provider.Accepted {
					r.possibleDuplicate(fmt.Sprintf("%s answered attempt %d with a new message (not a replay) after an attempt of %s without a certain answer; had that attempt taken effect without %s storing its answer, the phone got two messages, and %s cannot be searched by key to tell",
						r.st.Provider, out.Attempt, r.req.Key, r.st.Provider, r.st.Provider))
				}
			}
		}
		return contract.Accepted, false
	}

	r.countFailed(err)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.ErrRejected, activities.ErrKeyConflict, activities.ErrInvalidRequest:
			r.st.Reason = appErr.Message()
			r.note("rejected, not retried: %s", appErr.Message())
			return contract.Failed, false
		case activities.ErrWindowClosed:
			r.note("%s", appErr.Message())
			return contract.Reconciling, false
		case activities.ErrFenced:
			// A later run holds the event: this one sends nothing more,
			// and leaves the settle to that run.
			r.claimed = false
			r.st.Reason = appErr.Message()
			r.note("%s", appErr.Message())
			return contract.Failed, false
		}
	}
	r.lastSend = errorMessage(err)
	if windowRanOut(err) {
		r.note("the replay window of %s (minus margin) ran out with the outcome unknown; last answer: %s", r.req.Key, r.lastSend)
	} else {
		r.note("the send ended with the outcome unknown (%s): reconciling", r.lastSend)
	}
	return contract.Reconciling, false
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
	r.note("possible duplicate: %s", why)
}
