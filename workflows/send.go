// Package workflows holds SendSMS, the workflow of one business event's SMS,
// and its contract (contract.go).
package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/logging"
	"github.com/acme/smsorch/provider"
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
func SendSMS(ctx workflow.Context, in Input) (Result, error) {
	r := &run{in: in}
	r.setup(ctx)
	return r.run()
}

type run struct {
	// ctx is disconnected from cancellation: a cancellation request is a
	// decision to weigh, not an abort in the middle of a send.
	ctx    workflow.Context
	in     Input
	st     Status
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
	pending *Decision
	resends int
}

// setup registers the handlers a run answers from its first moment.
func (r *run) setup(ctx workflow.Context) {
	r.ctx, _ = workflow.NewDisconnectedContext(ctx)
	r.log = workflow.GetLogger(ctx)
	r.st = Status{
		Result:     Result{Key: r.in.Key, State: Sending, MessageIDs: []string{}, KeysUsed: []string{}},
		Provider:   r.in.Provider,
		To:         logging.MaskPhone(r.in.To),
		CurrentKey: r.in.Key,
		Timeline:   []Entry{},
	}
	_ = workflow.SetQueryHandler(ctx, QueryState, func() (Status, error) { return r.snapshot(), nil })
	_ = workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide,
		func(ctx workflow.Context, d Decision) (DecisionAck, error) {
			if err := r.decide(d); err != nil {
				return DecisionAck{}, err
			}
			return DecisionAck{State: r.st.State, Message: r.ackMessage(d)}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, d Decision) error { return r.check(d) }},
	)
	workflow.Go(r.ctx, r.receiveSignals)
	workflow.Go(ctx, func(ctx workflow.Context) {
		ctx.Done().Receive(ctx, nil)
		d := Decision{Action: ActionCancel, By: "Temporal cancellation request", Reason: "the run was asked to cancel"}
		if err := r.decide(d); err != nil {
			r.refuse(d, "cancellation request", err)
		}
	})
}

// receiveSignals applies resend and cancel signals, or records why not.
func (r *run) receiveSignals(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	for _, action := range []string{ActionResend, ActionCancel} {
		sel.AddReceive(workflow.GetSignalChannel(ctx, action), func(c workflow.ReceiveChannel, _ bool) {
			// RawValue never fails to decode, so a malformed payload is
			// refused visibly here instead of dropped by the SDK.
			var raw converter.RawValue
			c.Receive(ctx, &raw)
			var body json.RawMessage
			var d Decision
			err := converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &body)
			if err == nil {
				d, err = ParseSignal(action, body)
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
func (r *run) check(d Decision) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if r.st.State != AwaitingDecision {
		return fmt.Errorf("refused: the run is %s, not awaiting a decision; a %s applies only to a run in state AwaitingDecision", r.st.State, d.Action)
	}
	if r.pending != nil {
		return fmt.Errorf("refused: a %s decided by %s is already being applied", r.pending.Action, r.pending.By)
	}
	return nil
}

// decide applies a decision for the main loop to act on.
func (r *run) decide(d Decision) error {
	if err := r.check(d); err != nil {
		return err
	}
	r.pending = &d
	r.note("%s decided by %s: %s", d.Action, d.By, d.Reason)
	return nil
}

func (r *run) refuse(d Decision, via string, err error) {
	by := d.By
	if by == "" {
		by = "someone"
	}
	r.note("refused a %s from %s: %v", via, by, err)
	r.log.Warn("decision refused", "via", via, "by", by, "error", err.Error())
}

func (r *run) ackMessage(d Decision) string {
	if d.Action == ActionCancel {
		return "cancel accepted: the run ends as Cancelled and nothing more is sent"
	}
	return "resend accepted: the run reconciles first if the replay window has closed, then sends under the next resend key unless the message is found"
}

// step is one state's work; it returns the next state, or done to end the
// run in the current state.
type step func() (next State, done bool)

func (r *run) run() (Result, error) {
	if id := workflow.GetInfo(r.ctx).WorkflowExecution.ID; id != r.in.Key {
		return r.fail(fmt.Sprintf("the workflow id %q is not the event key %q: start the run with the key as its id, so a second start of the event finds this run", id, r.in.Key))
	}
	r.upsertSearch()
	if ended := r.prepare(); ended {
		return r.finish()
	}
	steps := map[State]step{
		Sending:          r.send,
		Reconciling:      r.reconcile,
		Accepted:         r.track,
		AwaitingDecision: r.await,
	}
	next := Sending
	if !r.sendStart.IsZero() && !workflow.Now(r.ctx).Before(r.sendStart.Add(r.policy.SendBudget())) {
		r.note("an earlier run first tried %s at %s and its replay window has closed: reconciling before anything is sent", r.req.Key, r.sendStart.Format(time.RFC3339))
		next = Reconciling
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
	ctx := r.planOptions()
	var out activities.PrepareOutput
	err := workflow.ExecuteActivity(ctx, a.Prepare, activities.PrepareInput{
		Key: r.in.Key, Provider: r.in.Provider, To: r.in.To, From: r.in.From, Text: r.in.Text,
	}).Get(ctx, &out)
	if err != nil {
		r.st.State, r.st.Reason = Failed, "the event cannot be sent as given: "+errorMessage(err)
		r.note("%s", r.st.Reason)
		return true
	}
	r.policy, r.req = out.Policy, out.Request
	r.st.Warnings = out.Warnings
	for _, w := range out.Warnings {
		r.note("warning: %s", w)
	}
	switch {
	case out.Conflict != "":
		r.st.State, r.st.Reason = Failed, out.Conflict
		r.note("%s", out.Conflict)
		return true
	case out.Settled != nil:
		e := out.Settled
		r.st.State = Duplicate
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
	return false
}

// planOptions are for Prepare and Plan: retried until the worker can do
// them (a ledger or a provider setting may be missing for a while), except
// an event that is invalid as given.
func (r *run) planOptions() workflow.Context {
	return workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrInvalidRequest},
		},
	})
}

// send runs the send activity until the message is accepted, the request
// is rejected, or the key's replay window (minus margin) runs out.
func (r *run) send() (State, bool) {
	now := workflow.Now(r.ctx)
	if r.sendStart.IsZero() {
		r.sendStart = now
	}
	if r.eventStart.IsZero() {
		r.eventStart = r.sendStart
	}
	remaining := r.sendStart.Add(r.policy.SendBudget()).Sub(now)
	if remaining <= 0 {
		r.note("the replay window of %s has closed: reconciling before anything is sent", r.req.Key)
		return Reconciling, false
	}
	r.note("sending with key %s (retries until %s)", r.req.Key, now.Add(remaining).Format(time.RFC3339))
	ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    r.policy.AttemptTimeout + activities.AttemptSlack,
		ScheduleToCloseTimeout: remaining,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    r.policy.InitialBackoff,
			BackoffCoefficient: 2,
			MaximumInterval:    r.policy.MaxBackoff,
			// The window (ScheduleToClose) ends the retries. This bound can
			// never bind first; it is explicit because 0 means "unlimited"
			// on a server but 10 in the SDK's test environment.
			MaximumAttempts:        int32(remaining/r.policy.InitialBackoff) + 1,
			NonRetryableErrorTypes: activities.NonRetryable,
		},
	})
	var out activities.SendOutput
	err := workflow.ExecuteActivity(ctx, a.Send, activities.SendInput{
		EventKey: r.in.Key, Request: r.req, Budget: r.policy.SendBudget(), InProgressDelay: r.policy.InProgressDelay,
	}).Get(ctx, &out)
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
			r.lookForDuplicates()
		}
		return Accepted, false
	}

	var failure activities.SendFailure
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		_ = appErr.Details(&failure)
		r.st.Attempts += int(failure.Attempt)
	}
	if appErr != nil {
		switch appErr.Type() {
		case activities.ErrRejected, activities.ErrKeyConflict, activities.ErrInvalidRequest:
			r.st.Reason = appErr.Message()
			r.note("rejected, not retried: %s", appErr.Message())
			return Failed, false
		case activities.ErrWindowClosed:
			r.note("%s", appErr.Message())
			return Reconciling, false
		}
	}
	r.lastSend = errorMessage(err)
	if windowRanOut(err) {
		r.note("the replay window of %s (minus margin) ran out with the outcome unknown; last answer: %s", r.req.Key, r.lastSend)
	} else {
		r.note("the send ended with the outcome unknown (%s): reconciling", r.lastSend)
	}
	return Reconciling, false
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
func (r *run) reconcile() (State, bool) {
	out, err := r.lookup(r.st.KeysUsed)
	if err != nil {
		r.st.Reason = "the outcome is unknown: the provider's records could not be searched (" + errorMessage(err) + ")"
		r.note("%s", r.st.Reason)
		return AwaitingDecision, false
	}
	r.note("reconciled: %s", out.How)
	if r.adopt(out) {
		return Accepted, false
	}
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
	return AwaitingDecision, false
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

// lookForDuplicates searches the provider's records for the current key
// after an uncertain attempt, where the provider can be searched.
func (r *run) lookForDuplicates() {
	out, err := r.lookup([]string{r.req.Key})
	if err != nil {
		r.note("could not search %s's records for a second message: %s", r.in.Provider, errorMessage(err))
		return
	}
	r.adopt(out)
}

func (r *run) lookup(keys []string) (activities.ReconcileOutput, error) {
	ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: r.policy.ReconcileBudget,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	var out activities.ReconcileOutput
	err := workflow.ExecuteActivity(ctx, a.Reconcile, activities.ReconcileInput{
		EventKey: r.in.Key, Provider: r.in.Provider, Keys: keys, KnownIDs: r.st.MessageIDs, Since: r.eventStart,
	}).Get(ctx, &out)
	return out, err
}

// track follows the delivery status of the accepted message until it is
// final or the tracking limit passes.
func (r *run) track() (State, bool) {
	id := r.primary
	ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	limit := workflow.Now(r.ctx).Add(r.policy.TrackingLimit)
	interval := r.policy.StatusPollInitial
	for {
		left := limit.Sub(workflow.Now(r.ctx))
		if left <= 0 {
			r.st.Reason = fmt.Sprintf("accepted as message %s; delivery not confirmed within %s (last status %s)", id, r.policy.TrackingLimit, r.st.DeliveryStatus)
			r.note("%s", r.st.Reason)
			return Accepted, true
		}
		_ = workflow.Sleep(r.ctx, min(interval, left))
		interval = min(2*interval, r.policy.StatusPollMax)
		var m provider.Message
		if err := workflow.ExecuteActivity(ctx, a.Status, activities.StatusInput{Provider: r.in.Provider, MessageID: id}).Get(ctx, &m); err != nil {
			r.note("status lookup of %s failed, trying again later: %s", id, errorMessage(err))
			continue
		}
		if string(m.Status) != r.st.DeliveryStatus {
			r.st.DeliveryStatus = string(m.Status)
			r.note("message %s is %s", id, m.Status)
		}
		switch {
		case m.Status == provider.StatusDelivered:
			r.st.Reason = fmt.Sprintf("delivered as message %s", id)
			return Delivered, false
		case m.Status.Failed():
			r.st.Reason = fmt.Sprintf("message %s ended %s: a resend is a new message under a new key", id, m.Status)
			return AwaitingDecision, false
		}
	}
}

// await waits for a person's decision until the decision deadline.
func (r *run) await() (State, bool) {
	r.st.DecisionDeadline = workflow.Now(r.ctx).Add(r.policy.DecisionDeadline)
	r.note("awaiting a decision until %s: signal %q or %q with {\"reason\": \"...\", \"by\": \"...\"}",
		r.st.DecisionDeadline.Format(time.RFC3339), SignalResend, SignalCancel)
	ok, _ := workflow.AwaitWithTimeout(r.ctx, r.policy.DecisionDeadline, func() bool { return r.pending != nil })
	r.st.DecisionDeadline = time.Time{}
	if !ok {
		r.st.Reason = fmt.Sprintf("no decision within %s; was: %s", r.policy.DecisionDeadline, r.st.Reason)
		r.note("no decision within %s", r.policy.DecisionDeadline)
		return Failed, false
	}
	d := *r.pending
	r.pending = nil
	if d.Action == ActionCancel {
		r.st.Reason = fmt.Sprintf("cancelled by %s: %s", d.By, d.Reason)
		return Cancelled, false
	}
	return r.resend(d)
}

// resend sends under the next resend key, after reconciling again when the
// current key's replay window has closed: the message may have arrived.
func (r *run) resend(d Decision) (State, bool) {
	if !workflow.Now(r.ctx).Before(r.sendStart.Add(r.policy.SendBudget())) {
		r.setState(Reconciling)
		out, err := r.lookup(r.st.KeysUsed)
		if err == nil {
			r.note("reconciled before the resend: %s", out.How)
			if r.adopt(out) {
				r.note("resend not needed: a message of this event is alive; following it instead")
				return Accepted, false
			}
		} else {
			r.note("could not search the provider's records before the resend (%s); sending as %s decided", errorMessage(err), d.By)
		}
	}
	key, err := keys.Resend(keys.Key(r.in.Key), r.resends+1)
	if err != nil {
		r.st.Reason = "cannot derive the resend key: " + err.Error()
		return Failed, false
	}
	ctx := r.planOptions()
	var req provider.Request
	if err := workflow.ExecuteActivity(ctx, a.Plan, activities.PlanInput{
		EventKey: r.in.Key, SendKey: string(key), Provider: r.in.Provider, To: r.req.To, From: r.req.From, Text: r.req.Text,
	}).Get(ctx, &req); err != nil {
		r.st.Reason = "cannot plan the resend: " + errorMessage(err)
		return Failed, false
	}
	r.resends++
	r.req, r.sendStart, r.lastSend, r.primary = req, time.Time{}, "", ""
	r.st.CurrentKey = string(key)
	r.st.KeysUsed = append(r.st.KeysUsed, string(key))
	r.st.ResendKeys = append(r.st.ResendKeys, string(key))
	r.st.DeliveryStatus = ""
	return Sending, false
}

func (r *run) fail(reason string) (Result, error) {
	r.st.State, r.st.Reason = Failed, reason
	r.note("%s", reason)
	return r.finish()
}

// finish settles the event in the ledger and ends the run: Completed for
// Delivered, Accepted and Duplicate, Canceled for Cancelled, Failed for
// Failed, each carrying the Result.
func (r *run) finish() (Result, error) {
	r.upsertSearch()
	if r.claimed {
		ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    30 * time.Second,
			ScheduleToCloseTimeout: 24 * time.Hour,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
		})
		if err := workflow.ExecuteActivity(ctx, a.Settle, activities.SettleInput{
			Key: r.in.Key, Outcome: string(r.st.State), Reason: r.st.Reason, MessageID: r.primary,
		}).Get(ctx, nil); err != nil {
			r.note("could not settle the event in the ledger: %s", errorMessage(err))
		}
	}
	res := r.st.Result
	r.log.Info("sms run ended", "key", r.in.Key, "state", string(res.State), "reason", logging.MaskPhones(res.Reason),
		"messages", strings.Join(res.MessageIDs, ","), "attempts", res.Attempts, "replays", res.Replays)
	switch res.State {
	case Cancelled:
		return res, temporal.NewCanceledError(res)
	case Failed:
		return res, temporal.NewNonRetryableApplicationError(res.Reason, FailureType, nil, res)
	}
	return res, nil
}

func (r *run) setState(s State) {
	if r.st.State == s {
		return
	}
	r.st.State = s
	r.upsertSearch()
	r.log.Info("sms state", "key", r.in.Key, "state", string(s))
	r.publish()
}

func (r *run) upsertSearch() {
	_ = workflow.UpsertTypedSearchAttributes(r.ctx,
		StateAttribute.ValueSet(string(r.st.State)),
		ProviderAttribute.ValueSet(r.in.Provider),
		KeyAttribute.ValueSet(r.in.Key),
	)
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
	r.st.Timeline = append(r.st.Timeline, Entry{At: workflow.Now(r.ctx), Text: fmt.Sprintf(format, args...)})
	if len(r.st.Timeline) > maxTimeline {
		r.st.Timeline = append(r.st.Timeline[:1], r.st.Timeline[len(r.st.Timeline)-maxTimeline+1:]...)
	}
	r.publish()
}

// publish sets the current details the Temporal UI shows: the state, the
// facts, and the timeline.
func (r *run) publish() {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** — SMS `%s` to %s via %s\n\n", r.st.State, r.in.Key, r.st.To, r.in.Provider)
	if r.st.Reason != "" {
		fmt.Fprintf(&b, "%s\n\n", r.st.Reason)
	}
	fmt.Fprintf(&b, "- messages: %s\n- attempts: %d, replays: %d\n- keys: %s\n",
		orNone(strings.Join(r.st.MessageIDs, ", ")), r.st.Attempts, r.st.Replays, strings.Join(r.st.KeysUsed, ", "))
	if r.st.State == AwaitingDecision {
		fmt.Fprintf(&b, "- **decide**: signal `%s` or `%s` with `{\"reason\": \"...\", \"by\": \"...\"}` before %s\n",
			SignalResend, SignalCancel, r.st.DecisionDeadline.Format(time.RFC3339))
	}
	b.WriteString("\n**Timeline**\n\n")
	for _, e := range r.st.Timeline {
		fmt.Fprintf(&b, "- %s %s\n", e.At.UTC().Format("2006-01-02 15:04:05"), logging.MaskPhones(e.Text))
	}
	workflow.SetCurrentDetails(r.ctx, b.String())
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func (r *run) snapshot() Status {
	s := r.st
	s.MessageIDs = append([]string(nil), s.MessageIDs...)
	s.KeysUsed = append([]string(nil), s.KeysUsed...)
	s.ResendKeys = append([]string(nil), s.ResendKeys...)
	s.Timeline = append([]Entry(nil), s.Timeline...)
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
	return err.Error()
}
