// Package workflows holds SendSMS, the workflow of one business event's SMS,
// and its contract (contract.go).
package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/metrics/name"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// a references the activities; Temporal only reads the method names.
var a *activities.Activities

// maxTimeline bounds the timeline kept in the run's state.
const maxTimeline = 100

// SendSMS is the life of one business event's SMS (DESIGN.md, "The life of
// one event"): claim the key, send with the same key and bytes under a
// retry policy that retries only what is safe, track delivery, reconcile
// when the replay window closes with the outcome unknown, and wait for a
// person's resend or cancel where it stays unknown.
func SendSMS(ctx workflow.Context, in contract.Input) (contract.Result, error) {
	r := &run{in: in}
	r.setup(ctx)
	return r.run()
}

type run struct {
	// ctx is disconnected from cancellation: a cancellation request is a
	// decision to weigh, not an abort in the middle of a send.
	ctx    workflow.Context
	in     contract.Input
	st     contract.Status
	log    log.Logger
	policy activities.Policy
	// req is the send in progress (or last made); sendStart is when its
	// key was first tried, from which its replay window counts.
	req       provider.Request
	sendStart time.Time
	// eventStart is the first send start of the event, under any key: the
	// provider's records are searched from it.
	eventStart time.Time
	// claimed is true once this run holds the event in the ledger; only
	// then may it settle it (a conflicting claim belongs to another message).
	claimed bool
	// lastSend explains the last attempt that did not succeed.
	lastSend string
	// primary is the message the run follows: the one its own accepted
	// attempt returned, or the first live one reconciliation found.
	primary string
	pending *contract.Decision
	resends int

	// v is the version of SendSMS this run follows (versions.go).
	v workflow.Version
	// recheckAt is when every attempt that ended without a certain answer
	// can no longer take effect; zero when there is none. rechecked is
	// true once the run looked for a second message after it.
	recheckAt time.Time
	rechecked bool
	// reconcileFailed is true while the last search of the provider's
	// records failed; unsearchable while the last one could not search
	// them at all (no list endpoint, no message id). Either makes a
	// resend past the window blind: it needs a forced decision.
	reconcileFailed bool
	unsearchable    bool
	// deliveryFailed is true when the message the run follows is known to
	// have failed: inside its window, a resend then needs no search.
	deliveryFailed bool
	// ledgerID is the ledger that claimed the event; every later activity
	// refuses to work against another.
	ledgerID string
}

// fixed reports whether the run follows versionNoSilentDuplicates.
func (r *run) fixed() bool { return r.v >= versionNoSilentDuplicates }

// reconcilePriority puts searches of the provider's records before
// status lookups (default priority 3) on the lookup queue.
const reconcilePriority = 1

// onQueue puts the provider's activities of one purpose on the
// provider's own task queue beside the run's (runs since
// versionProviderQueues); earlier runs keep them on the run's queue.
func (r *run) onQueue(o workflow.ActivityOptions, purpose string) workflow.ActivityOptions {
	if r.v >= versionProviderQueues {
		// The provider's name as Prepare made it canonical ("Sendy " is
		// sendy): the workers poll the queues of the canonical names.
		name := string(r.req.Provider)
		if name == "" {
			name = strings.ToLower(strings.TrimSpace(r.in.Provider))
		}
		o.TaskQueue = contract.ProviderTaskQueue(workflow.GetInfo(r.ctx).TaskQueueName, name, purpose)
	}
	return o
}

// setup registers the handlers a run answers from its first moment.
func (r *run) setup(ctx workflow.Context) {
	r.ctx, _ = workflow.NewDisconnectedContext(ctx)
	r.v = workflow.GetVersion(ctx, changeNoSilentDuplicates, workflow.DefaultVersion, latestVersion)
	r.log = workflow.GetLogger(ctx)
	r.st = contract.Status{
		Result:     contract.Result{Key: r.in.Key, State: contract.Sending, MessageIDs: []string{}, KeysUsed: []string{}},
		Provider:   r.in.Provider,
		To:         sms.MaskPhone(r.in.To),
		CurrentKey: r.in.Key,
		Timeline:   []contract.Entry{},
	}
	_ = workflow.SetQueryHandler(ctx, contract.QueryState, func() (contract.Status, error) { return r.snapshot(), nil })
	_ = workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateDecide,
		func(ctx workflow.Context, d contract.Decision) (contract.DecisionAck, error) {
			if err := r.decide(d); err != nil {
				return contract.DecisionAck{}, err
			}
			return contract.DecisionAck{State: r.st.State, Message: r.ackMessage(d)}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, d contract.Decision) error { return r.check(d) }},
	)
	workflow.Go(r.ctx, r.receiveSignals)
	workflow.Go(ctx, func(ctx workflow.Context) {
		ctx.Done().Receive(ctx, nil)
		d := contract.Decision{Action: contract.ActionCancel, By: "Temporal cancellation request", Reason: "the run was asked to cancel"}
		if err := r.decide(d); err != nil {
			r.refuse(d, "cancellation request", err)
		}
	})
}

// receiveSignals applies resend and cancel signals, or records why not.
func (r *run) receiveSignals(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	for _, action := range []string{contract.ActionResend, contract.ActionCancel} {
		sel.AddReceive(workflow.GetSignalChannel(ctx, action), func(c workflow.ReceiveChannel, _ bool) {
			// RawValue never fails to decode, so a malformed payload is
			// refused visibly here instead of dropped by the SDK.
			var raw converter.RawValue
			c.Receive(ctx, &raw)
			var body json.RawMessage
			var d contract.Decision
			err := converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &body)
			if err == nil {
				// json.Unmarshal into a struct is deterministic; workflowcheck
				// only sees reflect's panic path reading runtime frames.
				d, err = contract.ParseSignal(action, body) //workflowcheck:ignore
			} else {
				d.Action, err = action, fmt.Errorf("the payload is not JSON: %w", err)
			}
			if err == nil {
				err = r.decide(d)
			}
			if err != nil {
				r.refuse(d, action+" signal", err)
			}
		})
	}
	for {
		sel.Select(ctx)
	}
}

// check reports whether a decision can be applied now; the update's
// validator uses it, so a refused update leaves no trace in history.
func (r *run) check(d contract.Decision) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if r.st.State != contract.AwaitingDecision {
		return fmt.Errorf("refused: the run is %s, not awaiting a decision; a %s applies only to a run in state AwaitingDecision", r.st.State, d.Action)
	}
	if r.pending != nil {
		return fmt.Errorf("refused: a %s decided by %s is already being applied", r.pending.Action, r.pending.By)
	}
	if r.fixed() && d.Action == contract.ActionResend && !d.Force && r.unsearchable {
		return fmt.Errorf("refused: %s's records cannot be searched for this event (no list endpoint and no message id recorded), so whether an SMS went out is unknown and a resend could make a second one: resend with \"force\": true and a reason to send anyway, or cancel", r.in.Provider)
	}
	return nil
}

// decide applies a decision for the main loop to act on.
func (r *run) decide(d contract.Decision) error {
	if err := r.check(d); err != nil {
		return err
	}
	r.pending = &d
	r.note("%s decided by %s: %s", d.Action, d.By, d.Reason)
	// Metrics through the SDK's handler: not emitted again on replay.
	workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"action": string(d.Action), "forced": fmt.Sprint(d.Force)}).
		Counter(name.Decisions).Inc(1)
	return nil
}

func (r *run) refuse(d contract.Decision, via string, err error) {
	by := d.By
	if by == "" {
		by = "someone"
	}
	r.note("refused a %s from %s: %v", via, by, err)
	r.log.Warn("decision refused", "via", via, "by", by, "error", err.Error())
}

func (r *run) ackMessage(d contract.Decision) string {
	if d.Action == contract.ActionCancel {
		return "cancel accepted: the run ends as Cancelled and nothing more is sent"
	}
	if d.Force {
		return "forced resend accepted: the run tries the provider's records once more and sends under the next resend key unless the message is found, even if the search fails (a blind resend)"
	}
	return "resend accepted: the run reconciles first if the replay window has closed, then sends under the next resend key unless the message is found"
}

// step is one state's work; it returns the next state, or done to end the
// run in the current state.
type step func() (next contract.State, done bool)

func (r *run) run() (contract.Result, error) {
	if id := workflow.GetInfo(r.ctx).WorkflowExecution.ID; id != r.in.Key {
		return r.fail(fmt.Sprintf("the workflow id %q is not the event key %q: start the run with the key as its id, so a second start of the event finds this run", id, r.in.Key))
	}
	r.upsertSearch()
	if ended := r.prepare(); ended {
		return r.finish()
	}
	steps := map[contract.State]step{
		contract.Sending:          r.send,
		contract.Reconciling:      r.reconcile,
		contract.Accepted:         r.track,
		contract.AwaitingDecision: r.await,
	}
	next := contract.Sending
	if !r.sendStart.IsZero() && !workflow.Now(r.ctx).Before(r.sendStart.Add(r.policy.SendBudget())) {
		r.note("an earlier run first tried %s at %s and its replay window has closed: reconciling before anything is sent", r.req.Key, r.sendStart.Format(time.RFC3339))
		next = contract.Reconciling
	}
	for {
		r.setState(next)
		var done bool
		if next, done = steps[next](); done {
			return r.finish()
		}
		if next.Final() {
			r.setState(next)
			return r.finish()
		}
	}
}

// prepare claims the event and plans the request. It reports whether the
// run has ended: Failed (invalid event, key conflict) or Duplicate (the
// ledger says the event was settled before; nothing is sent).
func (r *run) prepare() (ended bool) {
	var out activities.PrepareOutput
	err := r.ledgerStep("Prepare", planOptions(), a.Prepare, activities.PrepareInput{
		Key: r.in.Key, Provider: r.in.Provider, To: r.in.To, From: r.in.From, Text: r.in.Text,
	}, &out)
	if err != nil {
		r.st.State, r.st.Reason = contract.Failed, "the event cannot be sent as given: "+errorMessage(err)
		r.note("%s", r.st.Reason)
		return true
	}
	r.policy, r.req, r.ledgerID = out.Policy, out.Request, out.LedgerID
	r.st.Warnings = out.Warnings
	for _, w := range out.Warnings {
		r.note("warning: %s", w)
	}
	switch {
	case out.Conflict != "":
		r.st.State, r.st.Reason = contract.Failed, out.Conflict
		r.note("%s", out.Conflict)
		return true
	case out.Settled != nil:
		e := out.Settled
		r.st.State = contract.Duplicate
		r.st.Reason = fmt.Sprintf("duplicate: the event was already settled as %s on %s", e.Outcome, e.SettledAt.UTC().Format(time.RFC3339))
		if e.MessageID != "" {
			r.st.Reason = fmt.Sprintf("duplicate: already sent as message %s (settled as %s on %s); nothing sent again",
				e.MessageID, e.Outcome, e.SettledAt.UTC().Format(time.RFC3339))
			r.st.MessageIDs = append(r.st.MessageIDs, e.MessageID)
		}
		r.note("%s", r.st.Reason)
		return true
	}
	r.claimed = true
	r.sendStart, r.eventStart = out.FirstAttemptAt, out.FirstAttemptAt
	r.st.KeysUsed = append(r.st.KeysUsed, r.req.Key)
	if !out.Created {
		r.note("the event was claimed by an earlier run that did not settle it; continuing with its key")
	}
	if r.fixed() {
		r.policy = r.policy.WithDefaults()
		r.uncertainSince(out.LastUncertainAt)
		return r.resume(out.SendKeys)
	}
	return false
}

// resume carries on from every key an earlier run of the event used:
// resend keys join KeysUsed (so reconciliation searches them all and the
// next resend takes a number never used), and the last key is the one
// the run goes on with, its window counted from its own first attempt.
func (r *run) resume(used []activities.SendKey) (ended bool) {
	if len(used) == 0 {
		return false
	}
	r.eventStart = used[0].FirstAttemptAt
	for _, k := range used {
		if k.Key == r.in.Key {
			continue
		}
		if _, n, ok := keys.SplitResend(keys.Key(k.Key)); ok {
			r.resends = max(r.resends, n)
			r.st.ResendKeys = append(r.st.ResendKeys, k.Key)
		}
		r.st.KeysUsed = append(r.st.KeysUsed, k.Key)
	}
	last := used[len(used)-1]
	if last.Key == r.in.Key {
		return false
	}
	var req provider.Request
	if err := r.ledgerStep("Plan", planOptions(), a.Plan, activities.PlanInput{
		EventKey: r.in.Key, SendKey: last.Key, Provider: r.in.Provider, To: r.req.To, From: r.req.From, Text: r.req.Text,
	}, &req); err != nil {
		r.st.State, r.st.Reason = contract.Failed, "cannot plan the request of "+last.Key+" again: "+errorMessage(err)
		r.note("%s", r.st.Reason)
		return true
	}
	r.req, r.sendStart = req, last.FirstAttemptAt
	r.st.CurrentKey = last.Key
	r.note("an earlier run of the event used the keys %s; carrying on with %s", strings.Join(r.st.KeysUsed, ", "), last.Key)
	return false
}

// uncertainSince notes an attempt that ended without a certain answer and
// began at since: it may take effect until the late-effect horizon has
// passed, so the run looks for a second message again then.
func (r *run) uncertainSince(since time.Time) {
	if since.IsZero() {
		return
	}
	if at := since.Add(r.policy.LateEffectHorizon); at.After(r.recheckAt) {
		r.recheckAt, r.rechecked = at, false
	}
}

// planOptions are for Prepare and Plan: retried until the worker can do
// them (a ledger or a provider setting may be missing for a while), except
// an event that is invalid as given.
func planOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrInvalidRequest},
		},
	}
}

// ledgerStep runs one of the worker's own steps (Prepare, Plan, Settle),
// which call no provider, and decodes its result into out. Since
// versionLeanHistory it is first tried as a local activity, inside the
// workflow task that asks for it: one marker in the history instead of
// a task and three events. Each step is safe to run again (a claim finds
// its own claim, a plan is the same bytes, the first settle wins). The
// local tries end within a workflow task's timeout; when they fail with
// an error a retry could fix (the ledger is down, this worker holds
// another ledger), the step runs as an activity under opts, retried as
// long as before and open to every worker of the queue.
func (r *run) ledgerStep(name string, opts workflow.ActivityOptions, fn, arg, out any) error {
	if r.v >= versionLeanHistory {
		lctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: localStepBudget,
			StartToCloseTimeout:    localStepBudget,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 2 * time.Second, MaximumAttempts: 3,
				NonRetryableErrorTypes: opts.RetryPolicy.NonRetryableErrorTypes,
			},
		})
		err := workflow.ExecuteLocalActivity(lctx, fn, arg).Get(r.ctx, out)
		if err == nil || !retryable(err, opts.RetryPolicy.NonRetryableErrorTypes) {
			return err
		}
		r.note("%s did not complete in the run's workflow task (%s): running it as an activity that any worker can take", name, errorMessage(err))
	}
	ctx := workflow.WithActivityOptions(r.ctx, opts)
	return workflow.ExecuteActivity(ctx, fn, arg).Get(ctx, out)
}

// localStepBudget bounds a ledger step's local tries: under the workflow
// task's timeout (10 s), so they never need the task to be extended.
const localStepBudget = 8 * time.Second

// retryable reports whether err leaves room for another try: not an
// application error marked non-retryable or of one of the given types.
func retryable(err error, nonRetryable []string) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return !appErr.NonRetryable() && !slices.Contains(nonRetryable, appErr.Type())
	}
	return true
}

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
			r.note("replay: %s answered attempt %d from its replay store with message %s; nothing was sent again", r.in.Provider, out.Attempt, res.MessageID)
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
						r.in.Provider, out.Attempt, r.req.Key, r.in.Provider, r.in.Provider))
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

// windowRanOut reports whether the send's schedule-to-close budget ended
// it: as a timeout, or because the next retry would have passed it (the
// server then returns the last failure). A retryable outcome class can only
// reach the workflow that way, since the attempt cap never binds first; the
// SDK's test environment leaves the retry state unset, so the class decides.
func windowRanOut(err error) bool {
	var timeout *temporal.TimeoutError
	var actErr *temporal.ActivityError
	var appErr *temporal.ApplicationError
	if errors.As(err, &timeout) || (errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_TIMEOUT) {
		return true
	}
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.ErrUnknownOutcome, activities.ErrNotExecuted, activities.ErrInProgress, activities.ErrRateLimited:
			return true
		}
	}
	return false
}

// reconcile compares our records with the provider's for every key used.
func (r *run) reconcile() (contract.State, bool) {
	out, err := r.lookup(r.st.KeysUsed)
	if err != nil {
		r.reconcileFailed = true
		r.st.Reason = "the outcome is unknown: the provider's records could not be searched (" + errorMessage(err) + ")"
		if r.fixed() {
			r.st.Reason += fmt.Sprintf("; the run searches again every %s, and a resend waits for a search that succeeds unless forced", r.policy.ReconcileRetry)
		}
		r.note("%s", r.st.Reason)
		return contract.AwaitingDecision, false
	}
	r.note("reconciled: %s", out.How)
	r.searched(out)
	if r.adopt(out) {
		return contract.Accepted, false
	}
	r.explainNotFound(out)
	return contract.AwaitingDecision, false
}

// searched records what a search that succeeded says about searching.
func (r *run) searched(out activities.ReconcileOutput) {
	if !r.fixed() {
		return
	}
	r.reconcileFailed, r.unsearchable = false, !out.Searched
	r.uncertainSince(out.LastUncertainAt)
	for _, u := range out.Unsearchable {
		if u.Uncertain > 1 && !r.st.PossibleDuplicate {
			r.possibleDuplicate(fmt.Sprintf("%d attempts of %s ended without a certain answer at %s, which cannot be searched by key: each may have sent a message",
				u.Uncertain, u.Key, r.in.Provider))
		}
	}
}

// explainNotFound sets the reason of a run that found no live message.
func (r *run) explainNotFound(out activities.ReconcileOutput) {
	switch {
	case len(out.Messages) > 0:
		r.st.Reason = fmt.Sprintf("the message failed (%s): a resend is a new message under a new key", r.st.DeliveryStatus)
	case out.Searched:
		r.st.Reason = fmt.Sprintf("not found: no message under %s in our ledger or in %s's records", strings.Join(r.st.KeysUsed, ", "), r.in.Provider)
	default:
		r.st.Reason = fmt.Sprintf("the outcome is unknown: %s cannot be searched without a message id", r.in.Provider)
	}
	if r.lastSend != "" {
		r.st.Reason += "; last answer: " + r.lastSend
	}
	r.note("%s", r.st.Reason)
}

// adopt records the messages found and reports whether one of them is
// alive (not failed), which makes the event accepted.
func (r *run) adopt(out activities.ReconcileOutput) bool {
	firstAlive := ""
	status := map[string]provider.Status{}
	perKey := map[string]int{}
	for _, m := range out.Messages {
		r.addMessage(m.ID)
		r.note("found message %s (status %s)", m.ID, m.Status)
		status[m.ID] = m.Status
		if m.Reference != "" {
			perKey[m.Reference]++
		}
		if firstAlive == "" && !m.Status.Failed() {
			firstAlive = m.ID
		}
	}
	if s, ok := status[r.primary]; firstAlive != "" && (!ok || s.Failed()) {
		r.primary = firstAlive // follow a live message, not a failed one
	}
	if s, ok := status[r.primary]; ok {
		r.st.DeliveryStatus = string(s)
	} else if len(out.Messages) > 0 {
		r.st.DeliveryStatus = string(out.Messages[0].Status)
	}
	alive := firstAlive != ""
	for _, k := range r.st.KeysUsed { // in order: deterministic
		if n := perKey[k]; n > 1 {
			r.st.DuplicateSend = true
			r.note("proven duplicate send: %d accepted message ids for key %s (%s); the key could not prevent it (the provider did not store its answer, or its lock expired mid-send)", n, k, strings.Join(r.st.MessageIDs, ", "))
		}
	}
	return alive
}

// lookForDuplicates searches the provider's records for the given keys
// after an uncertain attempt, where the provider can be searched. It
// reports whether the search went by key (a list endpoint).
func (r *run) lookForDuplicates(keys []string) (byKey, alive bool) {
	out, err := r.lookup(keys)
	if err != nil {
		r.note("could not search %s's records for a second message: %s", r.in.Provider, errorMessage(err))
		return false, false
	}
	alive = r.adopt(out)
	return out.ByKey, alive
}

// recheck looks for a second message under every key once the
// uncertain attempts can no longer take effect.
func (r *run) recheck(why string) (alive bool) {
	r.rechecked = true
	r.note("%s: an attempt without a certain answer could take effect until %s; looking for a second message under %s",
		why, r.recheckAt.UTC().Format(time.RFC3339), strings.Join(r.st.KeysUsed, ", "))
	_, alive = r.lookForDuplicates(r.st.KeysUsed)
	return alive
}

// recheckPending reports a late look that is still due.
func (r *run) recheckPending() bool {
	return r.fixed() && !r.recheckAt.IsZero() && !r.rechecked
}

func (r *run) lookup(keys []string) (activities.ReconcileOutput, error) {
	opts := r.onQueue(workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: r.policy.ReconcileBudget,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	}, contract.PurposeLookup)
	if r.v >= versionProviderQueues {
		// Ahead of the status lookups that share the lookup queue's
		// budget: a search decides whether anything is sent again, and its
		// budget runs while it waits.
		opts.Priority = temporal.Priority{PriorityKey: reconcilePriority}
	}
	ctx := workflow.WithActivityOptions(r.ctx, opts)
	var out activities.ReconcileOutput
	err := workflow.ExecuteActivity(ctx, a.Reconcile, activities.ReconcileInput{
		EventKey: r.in.Key, Provider: r.in.Provider, Keys: keys, KnownIDs: r.st.MessageIDs, Since: r.eventStart, LedgerID: r.ledgerID,
	}).Get(ctx, &out)
	return out, err
}

// track follows the delivery status of the accepted message until it is
// final or the tracking limit passes.
func (r *run) track() (contract.State, bool) {
	id := r.primary
	ctx := workflow.WithActivityOptions(r.ctx, r.onQueue(workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	}, contract.PurposeLookup))
	limit := workflow.Now(r.ctx).Add(r.policy.TrackingLimit)
	interval := r.policy.StatusPollInitial
	for {
		left := limit.Sub(workflow.Now(r.ctx))
		if left <= 0 {
			r.st.Reason = fmt.Sprintf("accepted as message %s; delivery not confirmed within %s (last status %s)", id, r.policy.TrackingLimit, r.st.DeliveryStatus)
			r.note("%s", r.st.Reason)
			return contract.Accepted, true
		}
		wait := min(interval, left)
		if r.recheckPending() {
			wait = max(min(wait, r.recheckAt.Sub(workflow.Now(r.ctx))), 0)
		}
		_ = workflow.Sleep(r.ctx, wait)
		if r.recheckPending() && !workflow.Now(r.ctx).Before(r.recheckAt) {
			r.recheck("while tracking delivery")
		}
		interval = min(2*interval, r.policy.StatusPollMax)
		var m provider.Message
		var err error
		if r.v >= versionLeanHistory {
			if limit.Sub(workflow.Now(r.ctx)) < time.Second {
				continue // the limit is reached: the loop's start ends the run
			}
			m, err = r.lookUntilFinal(id, limit, interval)
			r.lastStatus(err)
		} else {
			err = workflow.ExecuteActivity(ctx, a.Status, activities.StatusInput{Provider: r.in.Provider, MessageID: id}).Get(ctx, &m)
		}
		if err != nil {
			if !notFinalYet(err) {
				r.note("status lookup of %s failed, trying again later: %s", id, errorMessage(err))
			}
			continue
		}
		if string(m.Status) != r.st.DeliveryStatus {
			r.st.DeliveryStatus = string(m.Status)
			r.note("message %s is %s", id, m.Status)
		}
		switch {
		case m.Status == provider.StatusDelivered:
			r.st.Reason = fmt.Sprintf("delivered as message %s", id)
			return contract.Delivered, false
		case m.Status.Failed():
			r.deliveryFailed = true
			r.st.Reason = fmt.Sprintf("message %s ended %s: a resend is a new message under a new key", id, m.Status)
			return contract.AwaitingDecision, false
		}
	}
}

// lookUntilFinal looks the message up until its status is final, as one
// Status activity whose retries, first after interval and then doubling
// up to StatusPollMax, are the polling schedule: no workflow task for a
// lookup that finds nothing new. It ends at the tracking limit, or
// earlier when the late look for a second message is due.
func (r *run) lookUntilFinal(id string, limit time.Time, interval time.Duration) (provider.Message, error) {
	now := workflow.Now(r.ctx)
	budget := limit.Sub(now)
	if r.recheckPending() {
		if d := r.recheckAt.Sub(now); d > 0 && d < budget {
			budget = d
		}
	}
	ctx := workflow.WithActivityOptions(r.ctx, r.onQueue(workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: budget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: interval, BackoffCoefficient: 2, MaximumInterval: r.policy.StatusPollMax,
			// The budget ends the lookups; the cap is explicit because 0
			// means 10 in the SDK's test environment.
			MaximumAttempts: int32(min(int64(budget/interval)+2, math.MaxInt32)),
		},
	}, contract.PurposeLookup))
	var m provider.Message
	err := workflow.ExecuteActivity(ctx, a.Status, activities.StatusInput{Provider: r.in.Provider, MessageID: id, UntilFinal: true}).Get(ctx, &m)
	return m, err
}

// notFinalYet reports a lookUntilFinal that ran out of its budget with
// the status still not final: expected, not worth a line in the
// timeline. A budget that ran out on another failure (the message is
// not found, the credentials are refused) is not.
func notFinalYet(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type() == activities.ErrNotFinal
	}
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
}

// lastStatus records the status the last lookup of a lookUntilFinal
// that ended unfinished saw (ErrNotFinal carries it), so the run shows
// "sent" while it waits for "delivered".
func (r *run) lastStatus(err error) {
	var appErr *temporal.ApplicationError
	var m provider.Message
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrNotFinal || !appErr.HasDetails() || appErr.Details(&m) != nil {
		return
	}
	if m.Status != "" && string(m.Status) != r.st.DeliveryStatus {
		r.st.DeliveryStatus = string(m.Status)
		r.note("message %s is %s", m.ID, m.Status)
	}
}

// await waits for a person's decision until the decision deadline. Since
// versionNoSilentDuplicates a reconciliation that failed is tried again
// meanwhile, and the run leaves AwaitingDecision as soon as it takes a
// decision, before anything that yields, so a second one is refused.
func (r *run) await() (contract.State, bool) {
	r.st.DecisionDeadline = workflow.Now(r.ctx).Add(r.policy.DecisionDeadline)
	r.note("awaiting a decision until %s: signal %q or %q with {\"reason\": \"...\", \"by\": \"...\"}",
		r.st.DecisionDeadline.Format(time.RFC3339), contract.SignalResend, contract.SignalCancel)
	decided := func() bool { return r.pending != nil }
	for {
		left := r.st.DecisionDeadline.Sub(workflow.Now(r.ctx))
		retry := r.fixed() && r.reconcileFailed && left > r.policy.ReconcileRetry
		if retry {
			left = r.policy.ReconcileRetry
		}
		if ok, _ := workflow.AwaitWithTimeout(r.ctx, left, decided); ok {
			break
		}
		if !retry {
			r.st.DecisionDeadline = time.Time{}
			r.st.Reason = fmt.Sprintf("no decision within %s; was: %s", r.policy.DecisionDeadline, r.st.Reason)
			r.note("no decision within %s", r.policy.DecisionDeadline)
			return contract.Failed, false
		}
		if found := r.retryReconcile(); found && r.pending == nil {
			r.st.DecisionDeadline = time.Time{}
			return contract.Accepted, false
		}
	}
	r.st.DecisionDeadline = time.Time{}
	d := *r.pending
	r.pending = nil
	if d.Action == contract.ActionCancel {
		r.st.Reason = fmt.Sprintf("cancelled by %s: %s", d.By, d.Reason)
		return contract.Cancelled, false
	}
	return r.resend(d)
}

// retryReconcile searches the provider's records again for a run that
// awaits a decision because its last search failed. It reports whether a
// live message of the event was found.
func (r *run) retryReconcile() (found bool) {
	out, err := r.lookup(r.st.KeysUsed)
	if err != nil {
		r.note("the search of %s's records failed again (%s); trying again in %s", r.in.Provider, errorMessage(err), r.policy.ReconcileRetry)
		return false
	}
	r.note("reconciled on retry: %s", out.How)
	r.searched(out)
	if r.adopt(out) {
		r.note("a message of the event is alive: following it")
		return true
	}
	r.explainNotFound(out)
	r.publish()
	return false
}

// resend sends under the next resend key, after reconciling again when the
// current key's replay window has closed: the message may have arrived.
// Since versionNoSilentDuplicates nothing is sent past the window without
// a search that succeeded, unless the decision forces it (a blind resend).
func (r *run) resend(d contract.Decision) (contract.State, bool) {
	blind, basis := "", contract.BasisDeliveryFailed
	search := !workflow.Now(r.ctx).Before(r.sendStart.Add(r.policy.SendBudget()))
	if r.fixed() {
		// Only a message known to have failed lets a resend skip the
		// search; an unknown outcome ends a little before the window does
		// (the last attempt goes first), so the clock alone cannot tell.
		search = search || !r.deliveryFailed || (r.v >= versionLateEffectFirst && r.recheckPending())
	}
	if search {
		basis = contract.BasisReconciled
		r.setState(contract.Reconciling)
		if r.v >= versionLateEffectFirst && r.recheckPending() {
			// A hung attempt may still land: the search waits for it, and
			// is then the late look too.
			if wait := r.recheckAt.Sub(workflow.Now(r.ctx)); wait > 0 {
				r.note("waiting until %s before the resend: an attempt without a certain answer could still take effect", r.recheckAt.UTC().Format(time.RFC3339))
				_ = workflow.Sleep(r.ctx, wait)
			}
			r.rechecked = true
		}
		out, err := r.lookup(r.st.KeysUsed)
		switch {
		case err == nil:
			r.note("reconciled before the resend: %s", out.How)
			r.searched(out)
			if r.adopt(out) {
				r.note("resend not needed: a message of this event is alive; following it instead")
				return contract.Accepted, false
			}
			if r.fixed() && !out.Searched {
				if !d.Force {
					r.st.Reason = fmt.Sprintf("the resend decided by %s waits: %s's records cannot be searched for this event, so a resend would be blind; decide resend with \"force\": true to send anyway, or cancel", d.By, r.in.Provider)
					r.note("%s", r.st.Reason)
					return contract.AwaitingDecision, false
				}
				blind = fmt.Sprintf("%s's records cannot be searched for this event", r.in.Provider)
			}
		case !r.fixed():
			basis = contract.BasisUnreconciled
			r.note("could not search the provider's records before the resend (%s); sending as %s decided", errorMessage(err), d.By)
		case d.Force:
			r.reconcileFailed = true
			blind = "the search of " + r.in.Provider + "'s records failed (" + errorMessage(err) + ")"
		default:
			r.reconcileFailed = true
			r.st.Reason = fmt.Sprintf("the resend decided by %s waits: the provider's records could not be searched (%s), and nothing is sent without a search past the window. The run searches again every %s; decide again to retry now, resend with \"force\": true to send without a search, or cancel",
				d.By, errorMessage(err), r.policy.ReconcileRetry)
			r.note("%s", r.st.Reason)
			return contract.AwaitingDecision, false
		}
	} else if r.fixed() {
		r.setState(contract.Sending)
	}
	key, err := keys.Resend(keys.Key(r.in.Key), r.resends+1)
	if err != nil {
		r.st.Reason = "cannot derive the resend key: " + err.Error()
		return contract.Failed, false
	}
	var req provider.Request
	if err := r.ledgerStep("Plan", planOptions(), a.Plan, activities.PlanInput{
		EventKey: r.in.Key, SendKey: string(key), Provider: r.in.Provider, To: r.req.To, From: r.req.From, Text: r.req.Text,
	}, &req); err != nil {
		r.st.Reason = "cannot plan the resend: " + errorMessage(err)
		return contract.Failed, false
	}
	r.resends++
	r.req, r.sendStart, r.lastSend, r.primary, r.deliveryFailed = req, time.Time{}, "", "", false
	// What the last search said belongs to the decision just taken; the
	// new key's own outcome decides the next one.
	r.unsearchable, r.reconcileFailed = false, false
	r.st.CurrentKey = string(key)
	r.st.KeysUsed = append(r.st.KeysUsed, string(key))
	r.st.ResendKeys = append(r.st.ResendKeys, string(key))
	r.st.DeliveryStatus = ""
	if blind != "" {
		basis = contract.BasisBlind
		r.st.BlindResends = append(r.st.BlindResends, string(key))
		r.possibleDuplicate(fmt.Sprintf("blind resend under %s forced by %s (%s): %s", key, d.By, d.Reason, blind))
	}
	r.st.Resends = append(r.st.Resends, contract.Resend{Key: string(key), By: d.By, Reason: d.Reason, Basis: basis})
	return contract.Sending, false
}

func (r *run) fail(reason string) (contract.Result, error) {
	r.st.State, r.st.Reason = contract.Failed, reason
	r.note("%s", reason)
	return r.finish()
}

// finish settles the event in the ledger and ends the run: Completed for
// Delivered, Accepted and Duplicate, Canceled for Cancelled, Failed for
// Failed, each carrying the Result.
func (r *run) finish() (contract.Result, error) {
	r.upsertSearch()
	if r.claimed && r.fixed() {
		r.lastLook()
		r.settle()
	} else if r.claimed {
		ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    30 * time.Second,
			ScheduleToCloseTimeout: 24 * time.Hour,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
		})
		if err := workflow.ExecuteActivity(ctx, a.Settle, activities.SettleInput{
			Key: r.in.Key, Outcome: string(r.st.State), Reason: r.st.Reason, MessageID: r.primary, LedgerID: r.ledgerID,
		}).Get(ctx, nil); err != nil {
			r.note("could not settle the event in the ledger: %s", errorMessage(err))
		}
	}
	res := r.st.Result
	r.log.Info("sms run ended", "key", r.in.Key, "state", string(res.State), "reason", sms.MaskPhones(res.Reason),
		"messages", strings.Join(res.MessageIDs, ","), "attempts", res.Attempts, "replays", res.Replays)
	switch res.State {
	case contract.Cancelled:
		return res, temporal.NewCanceledError(res)
	case contract.Failed:
		return res, temporal.NewNonRetryableApplicationError(res.Reason, contract.FailureType, nil, res)
	}
	return res, nil
}

// lastLook waits, where an attempt ended without a certain answer, until
// it can no longer take effect, and looks for a second message once more
// before the run settles.
func (r *run) lastLook() {
	if r.recheckAt.IsZero() || len(r.st.KeysUsed) == 0 {
		return
	}
	if wait := r.recheckAt.Sub(workflow.Now(r.ctx)); wait > 0 {
		r.note("waiting until %s before settling: an attempt without a certain answer could still take effect", r.recheckAt.UTC().Format(time.RFC3339))
		_ = workflow.Sleep(r.ctx, wait)
	}
	alive := r.recheck("before settling")
	if alive && r.v >= versionLateEffectFirst && (r.st.State == contract.Cancelled || r.st.State == contract.Failed) {
		// What was sent stands, whatever was decided before it showed up.
		r.st.Reason = fmt.Sprintf("message %s of the event turned up after the run had ended %s (%s): the SMS was sent after all", r.primary, r.st.State, r.st.Reason)
		r.st.State = contract.Accepted
		r.note("%s", r.st.Reason)
	}
}

// settle records the outcome in the ledger, retried until it is written;
// a ledger that stays unwritable for a day fails the run visibly rather
// than let it end as if the outcome were recorded. The first settle of an
// event wins: a different outcome already stored is noted.
func (r *run) settle() {
	defer func() {
		mh := workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"provider": r.in.Provider})
		mh.WithTags(map[string]string{"state": string(r.st.State)}).Counter(name.Settled).Inc(1)
		switch {
		case r.st.DuplicateSend:
			mh.WithTags(map[string]string{"kind": "proven"}).Counter(name.Duplicates).Inc(1)
		case r.st.PossibleDuplicate:
			mh.WithTags(map[string]string{"kind": "possible"}).Counter(name.Duplicates).Inc(1)
		}
	}()
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute,
			MaximumAttempts: 24 * 12, // the day bounds it; explicit for the SDK's test environment
		},
	}
	var out activities.SettleOutput
	err := r.ledgerStep("Settle", opts, a.Settle, activities.SettleInput{
		Key: r.in.Key, Outcome: string(r.st.State), Reason: r.st.Reason, MessageID: r.primary, LedgerID: r.ledgerID,
	}, &out)
	switch {
	case err != nil:
		was := r.st.State
		r.st.State = contract.Failed
		r.st.Reason = fmt.Sprintf("the outcome %s (%s) could not be recorded in the ledger: %s. The ledger does not know the event settled: fix the ledger, then check the event with smsctl audit before starting it again",
			was, r.st.Reason, errorMessage(err))
		r.note("%s", r.st.Reason)
		r.upsertSearch()
	case out.Outcome != string(r.st.State):
		r.note("the ledger already held the outcome %s for the event (settled %s: %s); the first settle stands there",
			out.Outcome, out.SettledAt.UTC().Format(time.RFC3339), out.Reason)
	}
}

func (r *run) setState(s contract.State) {
	if r.st.State == s {
		return
	}
	r.st.State = s
	r.upsertSearch()
	r.log.Info("sms state", "key", r.in.Key, "state", string(s))
	r.publish()
}

func (r *run) upsertSearch() {
	if r.v >= versionLeanHistory && r.searchUpToDate() {
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(r.ctx,
		contract.StateAttribute.ValueSet(string(r.st.State)),
		contract.ProviderAttribute.ValueSet(r.in.Provider),
		contract.KeyAttribute.ValueSet(r.in.Key),
	)
}

// searchUpToDate reports whether the run's search attributes (as the
// start set them, or the last upsert) already hold its state, provider
// and key: an upsert would only add an event.
func (r *run) searchUpToDate() bool {
	sa := workflow.GetTypedSearchAttributes(r.ctx)
	for _, kv := range []struct {
		key  temporal.SearchAttributeKeyKeyword
		want string
	}{{contract.StateAttribute, string(r.st.State)}, {contract.ProviderAttribute, r.in.Provider}, {contract.KeyAttribute, r.in.Key}} {
		if got, ok := sa.GetKeyword(kv.key); !ok || got != kv.want {
			return false
		}
	}
	return true
}

func (r *run) addMessage(id string) {
	for _, have := range r.st.MessageIDs {
		if have == id {
			return
		}
	}
	r.st.MessageIDs = append(r.st.MessageIDs, id)
}

// note adds a line to the timeline and republishes the run's details.
func (r *run) note(format string, args ...any) {
	r.st.Timeline = append(r.st.Timeline, contract.Entry{At: workflow.Now(r.ctx), Text: fmt.Sprintf(format, args...)})
	if len(r.st.Timeline) > maxTimeline {
		r.st.Timeline = append(r.st.Timeline[:1], r.st.Timeline[len(r.st.Timeline)-maxTimeline+1:]...)
	}
	r.publish()
}

// publish sets the current details the Temporal UI shows: the state, the
// facts, and the timeline.
func (r *run) publish() {
	// fmt.Sprintf, not Fprintf: workflowcheck cannot tell that the writer
	// is a strings.Builder and flags Fprintf as a possible I/O call.
	var b strings.Builder
	put := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...)) }
	put("**%s** — SMS `%s` to %s via %s\n\n", r.st.State, r.in.Key, r.st.To, r.in.Provider)
	if r.st.Reason != "" {
		put("%s\n\n", r.st.Reason)
	}
	put("- messages: %s\n- attempts: %d, replays: %d\n- keys: %s\n",
		orNone(strings.Join(r.st.MessageIDs, ", ")), r.st.Attempts, r.st.Replays, strings.Join(r.st.KeysUsed, ", "))
	if r.st.DuplicateSend {
		put("- **duplicate send**: the provider holds more than one message for a key\n")
	} else if r.st.PossibleDuplicate {
		put("- **possible duplicate**: see the timeline\n")
	}
	if len(r.st.BlindResends) > 0 {
		put("- blind resends (forced, without a search that succeeded): %s\n", strings.Join(r.st.BlindResends, ", "))
	}
	if r.st.State == contract.AwaitingDecision {
		put("- **decide**: signal `%s` or `%s` with `{\"reason\": \"...\", \"by\": \"...\"}` (a resend may add `\"force\": true`) before %s\n",
			contract.SignalResend, contract.SignalCancel, r.st.DecisionDeadline.Format(time.RFC3339))
	}
	put("\n**Timeline**\n\n")
	for _, e := range r.st.Timeline {
		put("- %s %s\n", e.At.UTC().Format("2006-01-02 15:04:05"), sms.MaskPhones(e.Text))
	}
	workflow.SetCurrentDetails(r.ctx, b.String())
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func (r *run) snapshot() contract.Status {
	s := r.st
	s.MessageIDs = append([]string(nil), s.MessageIDs...)
	s.KeysUsed = append([]string(nil), s.KeysUsed...)
	s.ResendKeys = append([]string(nil), s.ResendKeys...)
	s.BlindResends = append([]string(nil), s.BlindResends...)
	s.Resends = append([]contract.Resend(nil), s.Resends...)
	s.Timeline = append([]contract.Entry(nil), s.Timeline...)
	return s
}

// errorMessage is the innermost message of an activity error, which is the
// one that says what happened.
func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "timed out (" + timeout.TimeoutType().String() + ")"
	}
	// An activity error with no application error inside (a local
	// activity's plain error, as the SDK's test environment returns it):
	// its own message, without the wrapper's ids.
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && errors.Unwrap(actErr) != nil {
		return errors.Unwrap(actErr).Error()
	}
	return err.Error()
}
