package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/provider"
)

// prepare claims the event and plans the request. It reports whether the
// run has ended: Failed (invalid event, key conflict) or Duplicate (the
// ledger says the event was settled before; nothing is sent).
func (r *run) prepare() (ended bool) {
	var out activities.PrepareOutput
	err := r.ledgerStep("Prepare", planOptions(), a.Prepare, r.prepareInput(), &out)
	if err != nil {
		r.st.State, r.st.Reason = contract.Failed, "the event cannot be sent as given: "+errorMessage(err)
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return true
	}
	r.policy, r.sending.req, r.held.ledgerID = out.Policy, out.Request, out.LedgerID
	r.st.Warnings = out.Warnings
	for _, w := range out.Warnings {
		r.note(contract.KindWarning, "warning: %s", w)
	}
	switch {
	case out.Conflict != "":
		r.st.State, r.st.Reason = contract.Failed, out.Conflict
		r.note(contract.KindEnded, "%s", out.Conflict)
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
		r.note(contract.KindEnded, "%s", r.st.Reason)
		r.learnSettled(out)
		return true
	}
	r.held.claimed = true
	r.sending.start, r.sending.eventStart = out.FirstAttemptAt, out.FirstAttemptAt
	r.st.KeysUsed = append(r.st.KeysUsed, r.sending.req.Key)
	if !out.Created {
		r.note(contract.KindLedger, "the event was claimed by an earlier run that did not settle it; continuing with its key")
	}
	r.policy = r.policy.WithDefaults()
	r.sending.firstPolicy = r.policy
	r.uncertainSince(out.LastUncertainAt)
	r.learnMessages(out.Messages)
	return r.resume(out.SendKeys)
}

// learnMessages adds the message ids the ledger holds for the event that
// the run does not know to its messages, each at the provider its key
// names.
func (r *run) learnMessages(ms []activities.SentMessage) {
	for _, m := range ms {
		if slices.Contains(r.st.MessageIDs, m.ID) {
			continue
		}
		r.addMessageAt(m.ID, r.providerOf(m.Key))
		if r.msgs.ledgerKey == nil {
			r.msgs.ledgerKey = map[string]string{}
		}
		r.msgs.ledgerKey[m.ID] = m.Key
		r.note(contract.KindLedger, "the ledger holds message %s of the event (key %s), from an attempt this run did not make", m.ID, m.Key)
	}
}

// learnSettled takes what the ledger holds of an event that another run
// settled: every key and message of its attempts, and what the settling
// runs recorded.
func (r *run) learnSettled(out activities.PrepareOutput) {
	r.learnKeys(out.SendKeys)
	r.learnMessages(out.Messages)
	r.takeRecord(out.Settled.MessageIDs, out.Settled.Findings)
}

// prepareInput is the event as Prepare checks and claims it.
func (r *run) prepareInput() activities.PrepareInput {
	return activities.PrepareInput{Key: r.in.Key, Provider: r.in.Provider, To: r.in.To, From: r.in.From, Text: r.in.Text, Fallback: r.in.Fallback}
}

// resume carries on from every key an earlier run of the event used:
// resend keys join KeysUsed (so reconciliation searches them all and the
// next resend takes a number never used), and the last key is the one
// the run goes on with, its window counted from its own first attempt.
// Keys the run already knows are skipped, so a run that takes the event
// over from another run (takeOver) uses it too.
func (r *run) resume(used []activities.SendKey) (ended bool) {
	if len(used) == 0 {
		return false
	}
	if r.sending.eventStart.IsZero() || used[0].FirstAttemptAt.Before(r.sending.eventStart) {
		r.sending.eventStart = used[0].FirstAttemptAt
	}
	r.learnKeys(used)
	last := used[len(used)-1]
	if last.Key == r.st.CurrentKey {
		return false
	}
	// The key names its provider (keys.Via): an earlier run may have
	// moved the event to another, whose policy then applies.
	p := r.providerOf(last.Key)
	var req provider.Request
	var err error
	if sameProvider(p, r.in.Provider) {
		err = r.ledgerStep("Plan", planOptions(), a.Plan, activities.PlanInput{
			EventKey: r.in.Key, SendKey: last.Key, Provider: p, To: r.sending.req.To, From: r.sending.req.From, Text: r.sending.req.Text,
		}, &req)
		r.policy = r.sending.firstPolicy // back at the first provider: its window
	} else {
		var out activities.MoveOutput
		if out, err = r.planMove(p, keys.Key(last.Key), nil); err == nil {
			req, r.policy = out.Request, out.Policy.WithDefaults()
		}
	}
	if err != nil {
		r.st.State, r.st.Reason = contract.Failed, "cannot plan the request of "+last.Key+" again: "+errorMessage(err)
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return true
	}
	r.sending.req, r.sending.start = req, last.FirstAttemptAt
	r.leaveOthers(p)
	// The message the run followed was another key's.
	r.msgs.primary, r.sending.last, r.msgs.primaryFailed = "", "", false
	r.st.Provider = p
	r.st.CurrentKey = last.Key
	r.upsertSearch() // the provider may have changed
	r.note(contract.KindLedger, "an earlier run of the event used the keys %s; carrying on with %s", strings.Join(r.st.KeysUsed, ", "), last.Key)
	return false
}

// leaveOthers owes one late look to every provider other than p that
// the event has keys at, as a move to p does.
func (r *run) leaveOthers(p string) {
	for _, k := range r.st.KeysUsed {
		if q := r.providerOf(k); !sameProvider(q, p) {
			r.oweLook(q, k)
		}
	}
}

// oweLook owes provider p one late look for key, once the run's
// uncertain attempts can no longer take effect.
func (r *run) oweLook(p, key string) {
	p = canonical(p)
	i := slices.IndexFunc(r.look.left, func(l leftLook) bool { return l.Provider == p })
	if i < 0 {
		r.look.left = append(r.look.left, leftLook{Provider: p})
		i = len(r.look.left) - 1
	}
	l := &r.look.left[i]
	if !slices.Contains(l.Keys, key) {
		l.Keys = append(l.Keys, key)
	}
	if r.look.lateAt.After(l.At) {
		l.At = r.look.lateAt
	}
}

// learnKeys adds the keys of used that the run does not know to
// KeysUsed (and ResendKeys), so searches cover them and the next resend
// takes a number never used. It reports whether there were any.
func (r *run) learnKeys(used []activities.SendKey) (learnt bool) {
	for _, k := range used {
		if slices.Contains(r.st.KeysUsed, k.Key) {
			continue
		}
		learnt = true
		if _, n, ok := keys.SplitResend(keys.Key(k.Key)); ok {
			r.dec.resends = max(r.dec.resends, n)
			r.st.ResendKeys = append(r.st.ResendKeys, k.Key)
		}
		r.st.KeysUsed = append(r.st.KeysUsed, k.Key)
	}
	return learnt
}

// learnFromLedger learns the keys the ledger holds for the event that
// the run does not know, which another run of its workflow used (the run
// a Temporal reset replaced), owing a look to their providers. It
// reports whether there were any.
func (r *run) learnFromLedger() bool {
	rec := r.recall(r.sending.req.Key)
	r.learnMessages(rec.Messages)
	if !r.learnKeys(rec.SendKeys) {
		return false
	}
	r.note(contract.KindLedger, "the ledger holds keys of the event this run did not know (another run of its workflow used them): %s", strings.Join(r.st.KeysUsed, ", "))
	r.uncertainSince(rec.LastUncertainAt)
	r.leaveOthers(r.st.Provider)
	return true
}

// recall asks the ledger what it holds of the event and of key (a
// ledger step, retried until the ledger answers).
func (r *run) recall(key string) activities.RecallOutput {
	var out activities.RecallOutput
	if err := r.ledgerStep("Recall", planOptions(), a.Recall, activities.RecallInput{
		EventKey: r.in.Key, SendKey: key, LedgerID: r.held.ledgerID,
	}, &out); err != nil {
		// Only an invalid input ends the retries, and this one is built
		// by the run: take the worst case, an attempt that began now.
		r.note(contract.KindLedger, "could not read the event's attempts from the ledger (%s): taking the last attempt as uncertain", errorMessage(err))
		out.LastUncertainAt, out.FirstAttemptAt, out.Attempts = workflow.Now(r.ctx), r.sending.start, 1
	}
	return out
}

// takeOver makes this run the event's holder in the ledger when another
// run of its workflow holds it: the run was reset (Temporal starts a new
// run of the same workflow id, which replays the earlier run's claim) or
// continues another. Only one run of a workflow id is open at a time, and
// this one is, so the holder has ended. The claim is made again in this
// run's name, and the run carries on with every key and attempt the event
// already had. It returns the next state.
func (r *run) takeOver(why string) contract.State {
	r.held.takeovers++
	if r.held.takeovers > 3 {
		r.held.claimed = false
		r.st.Reason = "the event's holder in the ledger changed again after this run took it over three times: " + why + "; check the event with smsctl audit before starting it again"
		r.mayHaveSent(!r.look.lateAt.IsZero()) // it ends without a look or a settle
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return contract.Failed
	}
	r.note(contract.KindLedger, "another run of this workflow holds the event in the ledger (%s): this run was reset or continues that run, which has ended; taking the event over with every key and attempt it already had", why)
	var out activities.PrepareOutput
	err := r.ledgerStep("Prepare", planOptions(), a.Prepare, r.prepareInput(), &out)
	failed := ""
	switch {
	case err != nil:
		failed = "the event cannot be taken over: " + errorMessage(err)
	case out.Conflict != "":
		failed = out.Conflict
	case out.Settled != nil:
		// The earlier run settled the event: whatever it sent stands.
		e := out.Settled
		r.held.claimed = false
		if e.MessageID != "" {
			r.addMessage(e.MessageID)
		}
		r.learnSettled(out)
		r.st.Reason = fmt.Sprintf("duplicate: an earlier run of this workflow already settled the event as %s on %s (%s); nothing sent again",
			e.Outcome, e.SettledAt.UTC().Format(time.RFC3339), e.Reason)
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return contract.Duplicate
	}
	if failed != "" {
		r.held.claimed = false
		r.st.Reason = failed
		r.mayHaveSent(!r.look.lateAt.IsZero()) // it ends without a look or a settle
		r.note(contract.KindEnded, "%s", r.st.Reason)
		return contract.Failed
	}
	r.held.claimed = true
	r.sending.firstPolicy = out.Policy.WithDefaults()
	r.learnMessages(out.Messages)
	if slices.ContainsFunc(out.SendKeys, func(k activities.SendKey) bool { return k.Key == r.st.CurrentKey }) {
		// The ledger's last key is at least as new as the run's.
		if ended := r.resume(out.SendKeys); ended {
			return contract.Failed
		}
	} else {
		// The run's own key was never tried (the fence stopped its first
		// attempt): it is newer than any the ledger holds, so the run
		// keeps it and only learns the others, owing a look to any
		// other provider among them.
		r.learnKeys(out.SendKeys)
	}
	// Under the policy of the provider the run goes on at; every other
	// provider the event has keys at is owed a look.
	r.uncertainSince(out.LastUncertainAt)
	r.leaveOthers(r.st.Provider)
	r.note(contract.KindLedger, "took the event over: keys %s, carrying on with %s", strings.Join(r.st.KeysUsed, ", "), r.st.CurrentKey)
	// The current key's window counts from its first attempt in any run.
	r.sending.start = time.Time{}
	for _, k := range out.SendKeys {
		if k.Key == r.st.CurrentKey {
			r.sending.start = k.FirstAttemptAt
		}
	}
	if !r.sending.start.IsZero() && !workflow.Now(r.ctx).Before(r.sending.start.Add(r.policy.SendBudget())) {
		return contract.Reconciling
	}
	return contract.Sending
}

// uncertainSince notes an attempt that ended without a certain answer and
// began at since: it may take effect until the late-effect horizon has
// passed, so the run looks for a second message again then.
func (r *run) uncertainSince(since time.Time) {
	if since.IsZero() {
		return
	}
	if at := since.Add(r.policy.LateEffectHorizon); at.After(r.look.lateAt) {
		r.look.lateAt, r.look.lateDone = at, false
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
// which call no provider, and decodes its result into out. It is first
// tried as a local activity, inside the workflow task that asks for it: one marker in the history instead of
// a task and three events. Each step is safe to run again (a claim finds
// its own claim, a plan is the same bytes, the first settle wins). The
// local tries end within a workflow task's timeout; when they fail with
// an error a retry could fix (the ledger is down, this worker holds
// another ledger), the step runs as an activity under opts, retried as
// long as before and open to every worker of the queue.
func (r *run) ledgerStep(name string, opts workflow.ActivityOptions, fn, arg, out any) error {
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
	r.note(contract.KindLedger, "%s did not complete in the run's workflow task (%s): running it as an activity that any worker can take", name, errorMessage(err))
	ctx := workflow.WithActivityOptions(r.ctx, opts)
	return workflow.ExecuteActivity(ctx, fn, arg).Get(ctx, out)
}

// localStepBudget bounds a ledger step's local tries: under the workflow
// task's timeout (10 s), so they never need the task to be extended.
const localStepBudget = 8 * time.Second
