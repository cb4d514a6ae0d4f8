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
	"github.com/acme/smsorch/provider"
)

// reconcile compares our records with the provider's for every key used.
func (r *run) reconcile() (contract.State, bool) {
	out, err := r.lookup(r.provKeys())
	if err != nil {
		r.look.failed()
		if r.since(versionLedgerAnswer) {
			// The run a reset replaced may have got an answer after the
			// point this run was reset to.
			r.learnMessages(r.recall(r.sending.req.Key).Messages)
		}
		if r.followLedgerAnswer(err) {
			return contract.Accepted, false
		}
		r.st.Reason = fmt.Sprintf("the outcome is unknown: the provider's records could not be searched (%s); the run searches again every %s, and a resend waits for a search that succeeds unless forced",
			errorMessage(err), r.policy.ReconcileRetry)
		r.note(contract.KindSearchFailed, "%s", r.st.Reason)
		return contract.AwaitingDecision, false
	}
	r.note(contract.KindSearched, "reconciled: %s", out.How)
	r.searched(out)
	if r.adopt(out) {
		return contract.Accepted, false
	}
	r.explainNotFound(out)
	if r.in.Fallback != "" && sameProvider(r.st.Provider, r.in.Provider) {
		return r.failover(out), false
	}
	return contract.AwaitingDecision, false
}

// ledgerAnswered are the messages the provider accepted under the run's
// current key, by the ledger's record of another run's attempts, whose
// status the run never saw: none if the run is older than
// versionLedgerAnswer, or if a search could not speak for the event (a
// message of ours vanished).
func (r *run) ledgerAnswered() []string {
	var ids []string
	for _, id := range r.st.MessageIDs {
		if r.msgs.ledgerKey[id] == r.sending.req.Key && !r.msgs.observed[id] {
			ids = append(ids, id)
		}
	}
	// The version is read only where the branch can change something:
	// a run with no such answer records no marker here (a failed
	// reconcile() reads it before its Recall, to find such answers).
	if len(ids) == 0 || r.look.mute() || !r.since(versionLedgerAnswer) {
		return nil
	}
	return ids
}

// followLedgerAnswer is what a search that failed (err) leaves where the
// ledger holds the provider's accepted answer under the run's key
// (ledgerAnswered): the SMS was taken, as if the run's own Send had got
// that answer, so the run follows the first such message and tracking
// reads its status; more than one is a proven duplicate (the provider
// accepted the key twice). It reports whether there was one.
func (r *run) followLedgerAnswer(err error) bool {
	ids := r.ledgerAnswered()
	if len(ids) == 0 {
		return false
	}
	r.msgs.primary = ids[0]
	r.st.DeliveryStatus = string(provider.StatusAccepted)
	r.note(contract.KindAccepted, "the search of %s's records failed (%s), but the ledger holds %s's accepted answer to an attempt under %s: message %s, which another run of this workflow got; the SMS was taken, so the run follows it",
		r.st.Provider, errorMessage(err), r.st.Provider, r.sending.req.Key, strings.Join(ids, ", "))
	for _, id := range ids {
		r.seen(id, provider.StatusAccepted)
	}
	// The ledger's other accepted answers, under the event's other keys,
	// that no search ruled out: each may have gone out beside it.
	var others []string
	for _, id := range r.st.MessageIDs {
		if k, ok := r.msgs.ledgerKey[id]; ok && k != r.sending.req.Key && !r.msgs.observed[id] {
			others = append(others, id)
		}
	}
	if len(others) > 0 && !r.st.PossibleDuplicate && !r.st.DuplicateSend {
		r.possibleDuplicate(fmt.Sprintf("the ledger also holds message %s of the event, under an earlier key, whose status no search could read: it may have gone out beside %s", strings.Join(others, ", "), ids[0]))
	}
	return true
}

// dropDeferredFor drops a resend that waits for a search, saying why it
// is not needed.
func (r *run) dropDeferredFor(why string) {
	if r.dec.deferred != nil {
		r.note(contract.KindResendHeld, "the resend decided by %s is not needed: %s", r.dec.deferred.By, why)
		r.dropDeferred()
	}
}

// searched records what a search that succeeded says about searching.
func (r *run) searched(out activities.ReconcileOutput) {
	// Nothing to find where nothing can have been sent; a message of
	// ours the provider cannot find is one whose fate is unknown.
	r.look.last = searchSpoke
	if cannotSpeak(out) {
		r.look.last = searchMute
	}
	for _, id := range out.Vanished {
		r.addMessageAt(id, r.st.Provider)
	}
	r.uncertainSince(out.LastUncertainAt)
	for _, u := range out.Unsearchable {
		if u.Uncertain > 1 && !r.st.PossibleDuplicate {
			r.possibleDuplicate(fmt.Sprintf("%d attempts of %s ended without a certain answer at %s, which cannot be searched by key: each may have sent a message",
				u.Uncertain, u.Key, r.st.Provider))
		}
	}
}

// cannotSpeak reports a search that succeeded but cannot rule out a
// message of the keys: the provider's records could not be searched for
// them while an attempt may have sent, or a message of ours vanished.
func cannotSpeak(out activities.ReconcileOutput) bool {
	return (!out.Searched && !out.NotSent) || len(out.Vanished) > 0
}

// explainNotFound sets the reason of a run that found no live message.
func (r *run) explainNotFound(out activities.ReconcileOutput) {
	var kind contract.EntryKind
	switch {
	case len(out.Vanished) > 0:
		kind = contract.KindOutcomeUnknown
		r.st.Reason = fmt.Sprintf("the outcome is unknown: %s accepted message %s of the event but can no longer find it, so whether it went out cannot be told", r.st.Provider, strings.Join(out.Vanished, ", "))
	case len(out.Messages) > 0:
		kind = contract.KindNotFound // only failed messages
		r.st.Reason = fmt.Sprintf("the message failed (%s): a resend is a new message under a new key", r.st.DeliveryStatus)
	case !out.Searched && out.NotSent:
		kind = contract.KindNotSent
		r.st.Reason = fmt.Sprintf("not sent: no attempt under %s can have reached %s (none began, or each was answered without being executed)", strings.Join(r.provKeys(), ", "), r.st.Provider)
	case out.Searched:
		kind = contract.KindNotFound
		r.st.Reason = fmt.Sprintf("not found: no message under %s in our ledger or in %s's records", strings.Join(r.provKeys(), ", "), r.st.Provider)
	default:
		kind = contract.KindOutcomeUnknown
		r.st.Reason = fmt.Sprintf("the outcome is unknown: %s cannot be searched without a message id", r.st.Provider)
	}
	if r.sending.last != "" {
		r.st.Reason += "; last answer: " + r.sending.last
	}
	r.note(kind, "%s", r.st.Reason)
}

// adopt records the messages found and reports whether one of them is
// alive (not failed), which makes the event accepted.
func (r *run) adopt(out activities.ReconcileOutput) bool {
	firstAlive := ""
	status := map[string]provider.Status{}
	perKey := map[string]int{}
	for _, m := range out.Messages {
		r.addMessage(m.ID)
		r.note(contract.KindFound, "found message %s (status %s)", m.ID, m.Status)
		status[m.ID] = m.Status
		if m.Reference != "" {
			perKey[m.Reference]++
		}
		if firstAlive == "" && !m.Status.Failed() {
			firstAlive = m.ID
		}
	}
	if s, ok := status[r.msgs.primary]; firstAlive != "" && (!ok || s.Failed()) {
		r.msgs.primary = firstAlive // follow a live message, not a failed one
	}
	if s, ok := status[r.msgs.primary]; ok {
		r.st.DeliveryStatus = string(s)
	} else if len(out.Messages) > 0 {
		r.st.DeliveryStatus = string(out.Messages[0].Status)
	}
	alive := firstAlive != ""
	for _, k := range r.st.KeysUsed { // in order: deterministic
		if n := perKey[k]; n > 1 {
			r.st.DuplicateSend = true
			r.note(contract.KindDuplicate, "proven duplicate send: %d accepted message ids for key %s (%s); the key could not prevent it (the provider did not store its answer, or its lock expired mid-send)", n, k, strings.Join(r.st.MessageIDs, ", "))
		}
	}
	for _, m := range out.Messages {
		r.seen(m.ID, m.Status)
	}
	return alive
}

// addMessageAt records a message id and the provider that gave it.
func (r *run) addMessageAt(id, p string) {
	r.addMessage(id)
	if r.msgs.idAt == nil {
		r.msgs.idAt = map[string]string{}
	}
	if _, ok := r.msgs.idAt[id]; !ok {
		r.msgs.idAt[id] = canonical(p)
	}
}

// knownIDs are the message ids provider p gave the run, in order.
func (r *run) knownIDs(p string) []string {
	var out []string
	for _, id := range r.st.MessageIDs {
		if at, ok := r.msgs.idAt[id]; !ok || at == canonical(p) {
			out = append(out, id)
		}
	}
	return out
}

// seen records a message's status as a provider reported it: a message
// that is not failed is live. More than one live message of the event,
// under any of its keys and at any provider, means the phone may get
// the SMS twice: a proven duplicate, reported as such.
func (r *run) seen(id string, s provider.Status) {
	if r.msgs.observed == nil {
		r.msgs.observed = map[string]bool{}
	}
	r.msgs.observed[id] = true
	i := slices.Index(r.msgs.live, id)
	switch {
	case s.Failed() && i >= 0:
		r.msgs.live = slices.Delete(r.msgs.live, i, i+1)
	case !s.Failed() && i < 0:
		r.msgs.live = append(r.msgs.live, id)
	}
	if len(r.msgs.live) > 1 && !r.st.DuplicateSend {
		r.st.DuplicateSend = true
		r.note(contract.KindDuplicate, "proven duplicate send: %d messages of the event are alive (%s) under the keys %s; a person decides whether to tell the customer",
			len(r.msgs.live), strings.Join(r.msgs.live, ", "), strings.Join(r.st.KeysUsed, ", "))
	}
}

// lookForDuplicates searches the provider's records for the given keys
// after an uncertain attempt, where the provider can be searched. It
// reports whether the search went by key (a list endpoint), and whether
// it succeeded (ok).
func (r *run) lookForDuplicates(keys []string) (byKey, alive, ok bool) {
	out, err := r.lookup(keys)
	if err != nil {
		r.note(contract.KindSearchFailed, "could not search %s's records for a second message: %s", r.st.Provider, errorMessage(err))
		r.look.failed() // the look is owed: the result says so if it stays so
		return false, false, false
	}
	r.searched(out)
	alive = r.adopt(out)
	return out.ByKey, alive, true
}

// recheck looks for a second message under every key once the
// uncertain attempts can no longer take effect. The late look counts as
// made only when the search succeeded: a failed one stays owed.
func (r *run) recheck(why string) (alive bool) {
	lateAt := r.look.lateAt
	r.note(contract.KindSearching, "%s: an attempt without a certain answer could take effect until %s; looking for a second message under %s",
		why, lateAt.UTC().Format(time.RFC3339), strings.Join(r.provKeys(), ", "))
	_, alive, ok := r.lookForDuplicates(r.provKeys())
	if ok {
		r.lateLookMade(lateAt)
	}
	return alive
}

// lateLookMade records that a search that succeeded came after every
// attempt known when it began (those until lateAt) could take effect;
// one it reported as later (lateAt moved) is still owed its look.
func (r *run) lateLookMade(lateAt time.Time) {
	if r.look.lateAt.Equal(lateAt) {
		r.look.lateDone = true
	}
}

// recheckPending reports a late look that is still due.
func (r *run) recheckPending() bool {
	return !r.look.lateAt.IsZero() && !r.look.lateDone
}

// lookup searches the provider in use for keys.
func (r *run) lookup(keys []string) (activities.ReconcileOutput, error) {
	return r.lookupAt(r.st.Provider, keys)
}

// lookupAt searches provider p's records for keys, with the ids p gave
// the run.
func (r *run) lookupAt(p string, keys []string) (activities.ReconcileOutput, error) {
	opts := r.onQueueOf(workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: r.policy.ReconcileBudget,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	}, p, contract.PrioritySearch)
	ctx := workflow.WithActivityOptions(r.ctx, opts)
	var out activities.ReconcileOutput
	err := workflow.ExecuteActivity(ctx, a.Reconcile, activities.ReconcileInput{
		EventKey: r.in.Key, Provider: p, Keys: keys, KnownIDs: r.knownIDs(p), Since: r.sending.eventStart, LedgerID: r.held.ledgerID,
	}).Get(ctx, &out)
	if err == nil {
		for _, m := range out.Messages {
			r.addMessageAt(m.ID, p)
		}
	}
	return out, err
}

// retryReconcile searches the provider's records again for a run that
// awaits a decision because its last search failed. It reports whether a
// live message of the event was found.
func (r *run) retryReconcile() (found bool) {
	// A search that begins once every uncertain attempt can no longer
	// take effect is the late look too, when it succeeds.
	late, lateAt := r.recheckPending() && !workflow.Now(r.ctx).Before(r.look.lateAt), r.look.lateAt
	out, err := r.lookup(r.provKeys())
	if err == nil && late {
		defer r.lateLookMade(lateAt)
	}
	if err != nil {
		if r.followLedgerAnswer(err) {
			r.dropDeferredFor("the ledger holds the provider's accepted answer under the key")
			return true
		}
		r.note(contract.KindSearchFailed, "the search of %s's records failed again (%s); trying again in %s", r.st.Provider, errorMessage(err), r.policy.ReconcileRetry)
		return false
	}
	r.note(contract.KindSearched, "reconciled on retry: %s", out.How)
	r.searched(out)
	if r.adopt(out) {
		r.note(contract.KindFound, "a message of the event is alive: following it")
		r.dropDeferredFor("a message of the event is alive")
		return true
	}
	r.explainNotFound(out)
	r.publish()
	return false
}
