package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// setup registers the handlers a run answers from its first moment.
func (r *run) setup(ctx workflow.Context) {
	r.ctx, _ = workflow.NewDisconnectedContext(ctx)
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
		if err := r.apply(d); err != nil {
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
			if d.CheckBinding(r.in.Key) == nil {
				// A signal stays in the history whether it was applied or
				// refused: its id is spent either way, so a copy of a
				// signal refused then cannot apply later, in a state its
				// author never saw.
				r.spend(d.ID)
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
	if err := d.CheckBinding(r.in.Key); err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	if r.dec.ids[d.ID] {
		return fmt.Errorf("refused: decision %s reached this run before; a copy of it applies nothing (a new decision takes a new id)", sms.MaskPhones(d.ID))
	}
	return r.checkState(d)
}

// checkState reports whether the run's state admits a decision.
func (r *run) checkState(d contract.Decision) error {
	if r.st.State != contract.AwaitingDecision && r.dec.applying != nil {
		return fmt.Errorf("refused: the run is applying the %s decided by %s and is %s, not awaiting a decision; it takes one decision at a time", r.dec.applying.Action, r.dec.applying.By, r.st.State)
	}
	if r.st.State != contract.AwaitingDecision {
		return fmt.Errorf("refused: the run is %s, not awaiting a decision; a %s applies only to a run in state AwaitingDecision", r.st.State, d.Action)
	}
	if r.dec.pending != nil {
		return fmt.Errorf("refused: a %s decided by %s is already being applied; the run takes one decision at a time", r.dec.pending.Action, r.dec.pending.By)
	}
	if deadline := r.st.DecisionDeadline.UTC().Format(time.RFC3339); !workflow.Now(r.ctx).Before(r.st.DecisionDeadline) {
		if w := r.dec.deferred; w != nil {
			return fmt.Errorf("refused: the decision deadline passed at %s, and no decision is taken after it; the resend decided by %s, which waits for a search, is still carried out if the search running now succeeds and finds no message of the event, else the run ends Failed", deadline, w.By)
		}
		return fmt.Errorf("refused: the decision deadline passed at %s; the run ends without a decision", deadline)
	}
	if err := r.checkMove(d); err != nil {
		return err
	}
	if unforcedResend(d) && r.look.mute() {
		return fmt.Errorf("refused: %s's records cannot be searched for this event (no list endpoint and no message id recorded), so whether an SMS went out is unknown and a resend could make a second one: resend with \"force\": true and a reason to send anyway, or cancel", r.st.Provider)
	}
	return nil
}

// decide applies a person's decision, by signal or update, for the main
// loop to act on.
func (r *run) decide(d contract.Decision) error {
	if err := r.check(d); err != nil {
		return err
	}
	r.spend(d.ID)
	return r.take(d)
}

// spend records a decision id the run has acted on: applied, or, for a
// signal, read and refused. An update its validator refused left no
// trace, so its id stays free for a retry.
func (r *run) spend(id string) {
	if r.dec.ids == nil {
		r.dec.ids = map[string]bool{}
	}
	r.dec.ids[id] = true
}

// apply applies the Temporal cancellation request: the server's, not a
// payload anyone could copy, so it names no event and carries no id.
func (r *run) apply(d contract.Decision) error {
	if err := errors.Join(d.Validate(), r.checkState(d)); err != nil {
		return err
	}
	return r.take(d)
}

// take hands a decision that passed its checks to the main loop.
func (r *run) take(d contract.Decision) error {
	// A person's reason ("customer called from …") is kept in the
	// timeline, the result and the ledger: masked.
	d.Reason, d.By = sms.MaskPhones(d.Reason), sms.MaskPhones(d.By)
	r.dec.pending = &d
	if d.ID != "" {
		r.note(contract.KindDecided, "%s decided by %s: %s (decision %s)", d.Action, d.By, d.Reason, sms.MaskPhones(d.ID))
	} else {
		r.note(contract.KindDecided, "%s decided by %s: %s", d.Action, d.By, d.Reason)
	}
	if r.dec.deferred != nil {
		r.note(contract.KindResendHeld, "this decision replaces the resend decided by %s, which was waiting for a search that succeeds", r.dec.deferred.By)
		r.dropDeferred()
	}
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
	r.note(contract.KindDecisionRefused, "refused a %s from %s: %v", via, by, err)
	r.log.Warn("decision refused", "via", via, "by", by, "error", err.Error())
}

func (r *run) ackMessage(d contract.Decision) string {
	if d.Action == contract.ActionCancel {
		return "cancel accepted: the run ends as Cancelled and nothing more is sent"
	}
	if d.Force {
		return "forced resend accepted: the run tries the provider's records once more and sends under the next resend key unless the message is found, even if the search fails (a blind resend)"
	}
	return "resend accepted: the run searches the provider's records first, then sends under the next resend key unless a message of the event is found; if the search fails, the resend waits and is carried out once a search succeeds (the timeline says so)"
}

// decisionForm is the payload a decision signal takes on this run.
func (r *run) decisionForm() string {
	return contract.DecisionForm(r.in.Key)
}

// await waits for a person's decision until the decision deadline. A
// search that failed is tried again meanwhile. A decision taken before
// the deadline is carried out, whatever the run was doing when it came
// (a retried search may run past the deadline); and the run leaves
// AwaitingDecision as soon as it takes one, before anything that
// yields, so a second one is refused while the first is applied.
func (r *run) await() (contract.State, bool) {
	r.startWait()
	decided := func() bool { return r.dec.pending != nil }
	for r.dec.pending == nil {
		left := r.st.DecisionDeadline.Sub(workflow.Now(r.ctx))
		if left <= 0 {
			return r.noDecision(), false
		}
		// While the last search failed the run searches again every
		// ReconcileRetry, and once more at the deadline: a resend that
		// waits for a search gets one before the wait ends.
		retry := r.look.retrying()
		if retry {
			left = min(left, r.policy.ReconcileRetry)
		}
		if ok, _ := workflow.AwaitWithTimeout(r.ctx, left, decided); ok {
			break
		}
		if !retry {
			return r.noDecision(), false
		}
		if next, done := r.searchWhileWaiting(); done {
			return next, false
		}
	}
	d := r.takePending()
	if d.Action == contract.ActionCancel {
		r.st.Reason = fmt.Sprintf("cancelled by %s: %s", d.By, d.Reason)
		return contract.Cancelled, false
	}
	next, done := r.resend(d)
	// Applied: a decision that comes later meets the run in the state the
	// resend left it in, and is refused or taken on that.
	r.dec.applying = nil
	return next, done
}

// startWait begins a wait for a decision, with its own deadline; a
// resend that waits for a search keeps the deadline it was decided
// before, as waiting for a search does not extend it.
func (r *run) startWait() {
	r.dec.applying = nil
	r.st.DecisionDeadline = workflow.Now(r.ctx).Add(r.policy.DecisionDeadline)
	if r.dec.deferred != nil && !r.dec.deferredUntil.IsZero() {
		r.st.DecisionDeadline = r.dec.deferredUntil
	}
	r.note(contract.KindAwaitingDecision, "awaiting a decision until %s: signal %q or %q with %s",
		r.st.DecisionDeadline.Format(time.RFC3339), contract.SignalResend, contract.SignalCancel, r.decisionForm())
}

// searchWhileWaiting searches the provider's records again while the
// run waits because its last search failed. A live message found ends
// the wait (done, with the next state), whatever was decided meanwhile;
// a search that succeeded carries out a resend that waited for one.
func (r *run) searchWhileWaiting() (next contract.State, done bool) {
	if found := r.retryReconcile(); found {
		r.st.DecisionDeadline = time.Time{}
		if r.dec.pending == nil {
			return contract.Accepted, true
		}
		return r.decidedWhileFound(), true
	}
	if r.look.retrying() {
		return "", false
	}
	if r.dec.pending == nil && r.dec.deferred != nil {
		// The search the acknowledged resend waited for succeeded and
		// found no live message: it is the resend's search.
		r.dec.pending, r.dec.deferred = r.dec.deferred, nil
		r.note(contract.KindDecided, "carrying out the resend decided by %s now that a search of %s's records succeeded", r.dec.pending.By, r.st.Provider)
	}
	if r.dec.pending != nil {
		// A decision taken while this search ran (or the resend that
		// waited for it) goes on from it: a resend needs no other.
		r.dec.freshSearch = !r.look.mute() && !r.recheckPending()
	}
	return "", false
}

// takePending takes the decision a person made for the run to apply:
// from here on it is no longer awaiting one, and says so in its state
// before anything yields (a cancel ends the run; a resend checks the
// ledger and the provider's records first), so a decision that comes
// while this one is applied is refused with the reason (checkState).
func (r *run) takePending() contract.Decision {
	r.dec.lastDeadline, r.st.DecisionDeadline = r.st.DecisionDeadline, time.Time{}
	d := *r.dec.pending
	r.dec.pending, r.dec.applying = nil, &d
	if d.Action == contract.ActionCancel {
		r.setState(contract.Cancelled)
	} else {
		r.setState(contract.Reconciling)
	}
	return d
}

// noDecision ends a wait whose deadline passed with no decision taken.
func (r *run) noDecision() contract.State {
	r.st.DecisionDeadline = time.Time{}
	if r.dec.deferred != nil {
		r.st.Reason = fmt.Sprintf("the resend decided by %s (%s) was never carried out: no search of %s's records that could rule out a message succeeded within %s; was: %s",
			r.dec.deferred.By, r.dec.deferred.Reason, r.st.Provider, r.policy.DecisionDeadline, r.st.Reason)
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return contract.Failed
	}
	r.st.Reason = fmt.Sprintf("no decision within %s; was: %s", r.policy.DecisionDeadline, r.st.Reason)
	r.note(contract.KindEnded, "no decision within %s", r.policy.DecisionDeadline)
	return contract.Failed
}

// decidedWhileFound applies a decision taken while a retried search was
// running that found a live message of the event: a resend is not
// needed, and a cancel sends nothing more but cannot unsend what the
// search found, so the run ends saying the SMS was sent.
func (r *run) decidedWhileFound() contract.State {
	d := r.takePending()
	if d.Action != contract.ActionCancel {
		r.note(contract.KindResendHeld, "the resend decided by %s is not needed: a message of the event is alive; following it", d.By)
		return contract.Accepted
	}
	r.st.State, r.st.Reason = contract.Cancelled, fmt.Sprintf("cancelled by %s: %s", d.By, d.Reason)
	r.turnedUp(r.msgs.primary)
	return r.st.State
}

// resend sends under the next resend key, after reconciling again when the
// current key's replay window has closed: the message may have arrived.
// Nothing is sent past the window without a search that succeeded, unless the decision forces it (a blind resend).
func (r *run) resend(d contract.Decision) (contract.State, bool) {
	search, fresh := r.resendSearches()
	basis, blind := contract.BasisDeliveryFailed, ""
	switch {
	case search && fresh:
		// A deferred resend carried out on the search that just
		// succeeded and found no live message of the event.
		basis = contract.BasisReconciled
		r.setState(contract.Sending)
	case search:
		var st contract.State
		var stop bool
		if basis, blind, st, stop = r.searchBeforeResend(d); stop {
			return st, false
		}
	default:
		r.setState(contract.Sending)
	}
	target := r.st.Provider
	if d.Provider != "" && !sameProvider(d.Provider, r.st.Provider) {
		target = d.Provider
	}
	key, moved, st, stop := r.planResend(d, target)
	if stop {
		return st, false
	}
	r.recordResend(d, key, moved, basis, blind)
	return contract.Sending, false
}

// resendSearches says whether a resend searches the provider's records
// first, and whether a search that just succeeded (a deferred resend
// carried out) already did.
func (r *run) resendSearches() (search, fresh bool) {
	// Only a message known to have failed lets a resend skip the search;
	// an unknown outcome ends a little before the window does (the last
	// attempt goes first), so the clock alone cannot tell.
	search = !workflow.Now(r.ctx).Before(r.sending.start.Add(r.policy.SendBudget())) || !r.msgs.primaryFailed || r.recheckPending()
	fresh = r.dec.freshSearch
	r.dec.freshSearch = false
	if r.learnFromLedger() {
		// Keys another run of the workflow used (before a reset): the
		// search covers them, and the next key is one no run has used.
		search, fresh = true, false
	}
	return search, fresh
}

// searchBeforeResend searches the provider's records before a resend.
// It returns the resend's basis and, for a forced resend without a
// search that could speak, why it is blind; or stop with the state the
// run is in when the resend is not carried out now (a live message
// found, a search that failed or cannot speak for the event).
func (r *run) searchBeforeResend(d contract.Decision) (basis string, blind string, st contract.State, stop bool) {
	basis = contract.BasisReconciled
	r.setState(contract.Reconciling)
	late, lateAt := r.recheckPending(), r.look.lateAt
	if late {
		// A hung attempt may still land: the search waits for it, and
		// is then the late look too.
		if wait := lateAt.Sub(workflow.Now(r.ctx)); wait > 0 {
			r.note(contract.KindWaiting, "waiting until %s before the resend: an attempt without a certain answer could still take effect", lateAt.UTC().Format(time.RFC3339))
			_ = workflow.Sleep(r.ctx, wait)
		}
	}
	out, err := r.lookup(r.provKeys())
	if err != nil {
		r.look.failed()
		// A forced resend is a person's choice to send without a search
		// that speaks: it is carried out, a blind resend, as acknowledged.
		if !d.Force && r.followLedgerAnswer(err) {
			r.note(contract.KindResendHeld, "resend not needed: the provider accepted a message of this event under its key; following it instead")
			return basis, "", contract.Accepted, true
		}
	}
	switch {
	case err == nil:
		r.note(contract.KindSearched, "reconciled before the resend: %s", out.How)
		r.searched(out)
		if late {
			r.lateLookMade(lateAt)
		}
		if r.adopt(out) {
			r.note(contract.KindResendHeld, "resend not needed: a message of this event is alive; following it instead")
			return basis, "", contract.Accepted, true
		}
		if r.look.mute() {
			if !d.Force {
				r.st.Reason = fmt.Sprintf("the resend decided by %s is not carried out: %s's records cannot speak for this event (%s), so a resend would be blind; decide resend with \"force\": true to send anyway, or cancel", d.By, r.st.Provider, out.How)
				r.note(contract.KindResendHeld, "%s", r.st.Reason)
				return basis, "", contract.AwaitingDecision, true
			}
			blind = fmt.Sprintf("%s's records cannot be searched for this event", r.st.Provider)
		}
	case d.Force:
		blind = "the search of " + r.st.Provider + "'s records failed (" + errorMessage(err) + ")"
	default:
		// Acknowledged, so kept: carried out once a search succeeds,
		// before the deadline of the wait it was taken in (for a resend
		// that waited already and is being carried out, that wait's
		// deadline was its own: waiting does not extend it).
		r.dec.deferred, r.dec.deferredUntil = &d, r.dec.lastDeadline
		r.st.Reason = fmt.Sprintf("the resend decided by %s waits: the provider's records could not be searched (%s), and nothing is sent without a search past the window. The run searches again every %s and then carries the resend out unless a message of the event is found; decide again to replace it, resend with \"force\": true to send without a search, or cancel",
			d.By, errorMessage(err), r.policy.ReconcileRetry)
		r.note(contract.KindResendHeld, "%s", r.st.Reason)
		return basis, "", contract.AwaitingDecision, true
	}
	return basis, blind, "", false
}

// planResend derives the resend's key at target and plans its request:
// at the run's provider, or, when the decision names another, by moving
// the event there. stop carries the state when it cannot.
func (r *run) planResend(d contract.Decision, target string) (key keys.Key, moved string, st contract.State, stop bool) {
	key, err := r.nextKey(target)
	if err != nil {
		r.st.Reason = "cannot derive the resend key: " + err.Error()
		return key, "", contract.Failed, true
	}
	if !sameProvider(target, r.st.Provider) {
		// The decision moves the event to another provider: planned there,
		// with the switch and its reason recorded in the ledger.
		if err := r.moveTo(target, key, d.By, d.Reason, failoverDecided); err != nil {
			r.st.Reason = fmt.Sprintf("the resend at %s decided by %s cannot be carried out: %s; decide again", target, d.By, err)
			r.note(contract.KindResendHeld, "%s", r.st.Reason)
			return key, "", contract.AwaitingDecision, true
		}
		return key, target, "", false
	}
	var req provider.Request
	if err := r.ledgerStep("Plan", planOptions(), a.Plan, activities.PlanInput{
		EventKey: r.in.Key, SendKey: string(key), Provider: r.st.Provider, To: r.sending.req.To, From: r.sending.req.From, Text: r.sending.req.Text,
	}, &req); err != nil {
		r.st.Reason = "cannot plan the resend: " + errorMessage(err)
		return key, "", contract.Failed, true
	}
	r.useKey(req, string(key))
	return key, "", "", false
}

// recordResend records a resend about to be sent under key.
func (r *run) recordResend(d contract.Decision, key keys.Key, moved string, basis string, blind string) {
	r.dec.resends++
	r.st.ResendKeys = append(r.st.ResendKeys, string(key))
	if blind != "" {
		basis = contract.BasisBlind
		r.st.BlindResends = append(r.st.BlindResends, string(key))
		r.possibleDuplicate(fmt.Sprintf("blind resend under %s forced by %s (%s): %s", key, d.By, d.Reason, blind))
	}
	r.st.Resends = append(r.st.Resends, contract.Resend{Key: string(key), Provider: moved, By: d.By, Reason: d.Reason, Basis: basis})
}

// useKey makes req, planned under key, the send the run goes on with.
// What the last search said belongs to the decision just taken; the new
// key's own window and outcome decide the next one.
func (r *run) useKey(req provider.Request, key string) {
	r.sending.req, r.sending.start, r.sending.last, r.msgs.primary, r.msgs.primaryFailed = req, time.Time{}, "", "", false
	r.look.last = searchSpoke
	r.sending.notSentWindows = 0 // the new key's windows count afresh
	r.st.CurrentKey = key
	r.st.KeysUsed = append(r.st.KeysUsed, key)
	r.st.DeliveryStatus = ""
}

// dropDeferred forgets a resend that waited for a search: replaced by
// another decision, or not needed. Its deadline goes with it.
func (r *run) dropDeferred() {
	r.dec.deferred, r.dec.deferredUntil = nil, time.Time{}
}

// unforcedResend reports a resend that does not force a send without a
// search that can speak for the event.
func unforcedResend(d contract.Decision) bool {
	return d.Action == contract.ActionResend && !d.Force
}
