// Package workflows holds SendSMS, the workflow of one business event's
// SMS, one concept per file: the run and its loop (send.go), the handlers of
// decisions (decisions.go), its steps (prepare.go, sending.go,
// reconcile.go, track.go, finish.go), the move to another provider
// (failover.go), its search attributes (search.go), the details the UI
// shows (details.go) and error helpers (errors.go).
// Its names and payload types are in package contract.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// a references the activities; Temporal only reads the method names.
var a *activities.Activities

// SendSMS is the life of one business event's SMS (docs/design.md, "The life of
// one event"): claim the key, send with the same key and bytes under a
// retry policy that retries only what is safe, track delivery, reconcile
// when the replay window closes with the outcome unknown, and wait for a
// person's resend or cancel where it stays unknown.
func SendSMS(ctx workflow.Context, in contract.Input) (contract.Result, error) {
	r := &run{in: in}
	r.setup(ctx)
	return r.run()
}

// since reports whether the run follows version v or a later one. The
// run's version is fixed at the first branch that asks (versions.go): a
// run that never meets a changed path records no version marker, and
// its history stays 1.0.0's. The SDK keeps the version it gave a change
// id for the rest of the run, so later calls read the same one.
func (r *run) since(v workflow.Version) bool {
	return workflow.GetVersion(r.ctx, changeID, minSupportedVersion, latestVersion) >= v
}

type run struct {
	// ctx is disconnected from cancellation: a cancellation request is a
	// decision to weigh, not an abort in the middle of a send.
	ctx    workflow.Context
	in     contract.Input
	st     contract.Status
	log    log.Logger
	policy activities.Policy

	// Each step changes the part of the state it owns; the others read
	// it. What the run reports is r.st.
	sending sendState     // the send in progress and its key's window: sending.go
	msgs    messageState  // what the run knows of the event's messages: reconcile.go, track.go
	look    lookState     // the searches of the providers' records: reconcile.go, finish.go
	dec     decisionState // people's decisions: decisions.go
	held    ledgerState   // the event's claim in the ledger: prepare.go
}

// sendState is the send in progress and its key's replay window.
type sendState struct {
	// req is the send in progress (or last made); start is when its key
	// was first tried, from which its replay window counts.
	req   provider.Request
	start time.Time
	// eventStart is the first send start of the event, under any key: the
	// provider's records are searched from it.
	eventStart time.Time
	// last explains the last attempt that did not succeed.
	last string
	// notSentWindows counts the windows of the key that ended with no
	// attempt begun (the send never left the task queue).
	notSentWindows int
	// sentUnder are the keys this run has run a Send activity for: a
	// later Send of the same key numbers its ledger rows after the ones
	// the run already holds, so no attempt's record is overwritten.
	sentUnder map[string]bool
	// firstPolicy is the policy of the event's first provider, for a run
	// that resumes a key there after another run moved the event.
	firstPolicy activities.Policy
}

// messageState is what the run knows of the event's messages.
type messageState struct {
	// primary is the message the run follows: the one its own accepted
	// attempt returned, or the first live one a search found.
	primary string
	// primaryFailed: the message the run follows is known to have
	// failed; inside its window, a resend then needs no search.
	primaryFailed bool
	// live are the ids of the event's messages last seen alive (accepted,
	// not failed), under any key at any provider, in the order found.
	live []string
	// idAt is the provider that gave each message id: a search gives a
	// provider only its own ids.
	idAt map[string]string
	// observed are the message ids whose status the run has seen (in an
	// answer, a lookup or a search).
	observed map[string]bool
	// ledgerKey is the key of each message id the run learned from the
	// ledger (an accepted answer to another run's attempt).
	ledgerKey map[string]string
	// firstLooked is the message the Send that got it accepted looked up
	// once (activities.FirstLook): tracking it starts at the schedule's
	// second interval.
	firstLooked string
}

// searchOutcome is what the last search of a provider's records said.
type searchOutcome int

const (
	// searchSpoke: it succeeded and can rule a message in or out (or
	// there was none yet).
	searchSpoke searchOutcome = iota
	// searchFailed: it failed; the run searches again while it waits.
	searchFailed
	// searchMute: it succeeded but cannot speak for the event (no list
	// endpoint and no message id, or a message of ours vanished): a
	// resend past the window would be blind and needs a forced decision.
	searchMute
	// searchMuteThenFailed: a search could not speak, and one after it
	// failed: both hold until a search speaks.
	searchMuteThenFailed
)

// lookState is what the run searched and still owes a search.
type lookState struct {
	// last is what the last search said; any but searchSpoke makes a
	// resend past the window blind.
	last searchOutcome
	// lateAt is when every attempt that ended without a certain answer
	// can no longer take effect (zero: there is none); lateDone is true
	// once the run looked for a second message after it.
	lateAt   time.Time
	lateDone bool
	// left are the providers the run moved away from, each due one late
	// look before the run settles.
	left []leftLook
}

// unresolved reports a last search that could not rule a message out.
func (l lookState) unresolved() bool { return l.last != searchSpoke }

// mute reports that the provider's records could not speak for the
// event and no search has spoken since: a resend needs force.
func (l lookState) mute() bool { return l.last == searchMute || l.last == searchMuteThenFailed }

// retrying reports that the last search failed: the run searches again.
func (l lookState) retrying() bool { return l.last == searchFailed || l.last == searchMuteThenFailed }

// failed records a search that failed; what an earlier one could not
// speak for stays.
func (l *lookState) failed() {
	if l.mute() {
		l.last = searchMuteThenFailed
		return
	}
	l.last = searchFailed
}

// cannotSpeak records a search that succeeded but cannot speak for the
// event (at a provider the run left: it adds to what the last search
// at the provider in use said); a failed one stays failed.
func (l *lookState) cannotSpeak() {
	if l.retrying() {
		l.last = searchMuteThenFailed
		return
	}
	l.last = searchMute
}

// decisionState is what people decided and where the run is with it.
type decisionState struct {
	// pending is a decision a person made that the run has not taken
	// yet; applying is the one it took last, until it awaits again.
	pending, applying *contract.Decision
	// resends counts the resend keys used.
	resends int
	// ids are the ids of the decisions this run has applied, and of the
	// signals it refused: none is acted on again.
	ids map[string]bool
	// deferred is a resend a person decided (and was told was accepted)
	// that waits for a search of the provider's records that succeeds,
	// until deferredUntil, the deadline of the wait it was decided in.
	deferred      *contract.Decision
	deferredUntil time.Time
	// lastDeadline is the decision deadline of the last wait.
	lastDeadline time.Time
	// freshSearch is true while the search that just succeeded, and
	// found no live message, is the one a deferred resend waited for.
	freshSearch bool
}

// ledgerState is the event's claim in the ledger.
type ledgerState struct {
	// claimed is true once this run holds the event in the ledger; only
	// then may it settle it (a conflicting claim belongs to another
	// message).
	claimed bool
	// ledgerID is the ledger that claimed the event; every later activity
	// refuses to work against another.
	ledgerID string
	// takeovers counts the times the run took the event over from
	// another run of its workflow.
	takeovers int
	// settled is the settle a Send made when its first look found the
	// message delivered (activities.FirstLook): finish takes it instead
	// of settling again.
	settled *activities.SettleOutput
	// sendSettles is true once a Send was asked to settle a delivered
	// message itself: a settle the ledger holds before the run's own may
	// then be that Send's, one whose answer the run never got.
	sendSettles bool
}

// onQueue puts an activity of the provider in use on the provider's own
// task queue beside the run's, with priority (contract.PrioritySearch,
// PrioritySend or PriorityLookup).
func (r *run) onQueue(o workflow.ActivityOptions, priority int) workflow.ActivityOptions {
	// The provider's name as Prepare made it canonical ("Sendy " is
	// sendy): the workers poll the queues of the canonical names.
	name := string(r.sending.req.Provider)
	if name == "" {
		name = r.st.Provider
	}
	return r.onQueueOf(o, name, priority)
}

// onQueueOf is onQueue for an activity of provider p, which may be
// another than the one in use (a late look at a provider the run left).
func (r *run) onQueueOf(o workflow.ActivityOptions, p string, priority int) workflow.ActivityOptions {
	o.TaskQueue = contract.ProviderQueue(workflow.GetInfo(r.ctx).TaskQueueName, canonical(p))
	o.Priority.PriorityKey = priority
	return o
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
	if !r.sending.start.IsZero() && !workflow.Now(r.ctx).Before(r.sending.start.Add(r.policy.SendBudget())) {
		r.note(contract.KindSendUnknown, "an earlier run first tried %s at %s and its replay window has closed: reconciling before anything is sent", r.sending.req.Key, r.sending.start.Format(time.RFC3339))
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
