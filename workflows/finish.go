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
	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/sms"
)

func (r *run) fail(reason string) (contract.Result, error) {
	r.st.State, r.st.Reason = contract.Failed, reason
	r.note(contract.KindEnded, "%s", reason)
	return r.finish()
}

// finish settles the event in the ledger and ends the run: Completed for
// Delivered, Accepted and Duplicate, Canceled for Cancelled, Failed for
// Failed, each carrying the Result.
func (r *run) finish() (contract.Result, error) {
	// The reason goes to the ledger, which keeps it past the retention,
	// and to the result: no number in it in full.
	r.st.Reason = sms.MaskPhones(r.st.Reason)
	r.upsertSearch()
	if r.held.claimed {
		r.lastLook()
		r.lookAtLeft()
		r.settleKnown()
		// What the last looks found (a message that turned up) or the
		// ledger held may have changed the outcome: the search attributes
		// end equal to it.
		r.upsertSearch()
	}
	res := r.st.Result
	res.Reason = sms.MaskPhones(res.Reason)
	r.log.Info("sms run ended", "key", r.in.Key, "state", string(res.State), "reason", res.Reason,
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
	if r.look.lateAt.IsZero() || len(r.st.KeysUsed) == 0 {
		return
	}
	if wait := r.look.lateAt.Sub(workflow.Now(r.ctx)); wait > 0 {
		r.note(contract.KindWaiting, "waiting until %s before settling: an attempt without a certain answer could still take effect", r.look.lateAt.UTC().Format(time.RFC3339))
		_ = workflow.Sleep(r.ctx, wait)
	}
	alive := r.recheck("before settling")
	if alive && r.endedUnsent() {
		r.turnedUp(r.msgs.primary)
	}
}

// turnedUp makes a run that ended Cancelled or Failed say that message
// id of the event turned up after all: what was sent stands, whatever
// was decided before it showed up.
func (r *run) turnedUp(id string) {
	r.msgs.primary = id
	r.st.Reason = fmt.Sprintf("message %s of the event turned up after the run had ended %s (%s): the SMS was sent after all", id, r.st.State, r.st.Reason)
	r.st.State = contract.Unconfirmed // closed, delivery not followed
	r.st.OutcomeUnknown = false
	r.note(contract.KindFound, "%s", r.st.Reason)
}

// leftLook is a provider the run moved away from: its keys, and when its
// last uncertain attempt can no longer take effect (zero if none).
type leftLook struct {
	Provider string
	Keys     []string
	At       time.Time
}

// lookAtLeft looks once more at each provider the run moved away from,
// for a message that landed there late: with the message at the provider
// in use, it is a second one.
func (r *run) lookAtLeft() {
	for _, l := range r.look.left {
		if wait := l.At.Sub(workflow.Now(r.ctx)); wait > 0 {
			r.note(contract.KindWaiting, "waiting until %s before the last look at %s: an attempt there could take effect until then", l.At.UTC().Format(time.RFC3339), l.Provider)
			_ = workflow.Sleep(r.ctx, wait)
		}
		out, err := r.lookupAt(l.Provider, l.Keys)
		if err != nil {
			r.look.failed()
			r.note(contract.KindSearchFailed, "the last look at %s, which the run moved away from, failed (%s): a message there cannot be ruled out", l.Provider, errorMessage(err))
			continue
		}
		r.note(contract.KindSearched, "the last look at %s, which the run moved away from: %s", l.Provider, out.How)
		if cannotSpeak(out) {
			r.look.cannotSpeak()
		}
		for _, id := range out.Vanished {
			r.addMessageAt(id, l.Provider)
		}
		for _, m := range out.Messages {
			r.note(contract.KindFound, "found message %s at %s (status %s)", m.ID, l.Provider, m.Status)
			r.seen(m.ID, m.Status)
			if !m.Status.Failed() && r.endedUnsent() {
				r.turnedUp(m.ID)
			}
		}
	}
	r.look.left = nil
}

// settleKnown settles the event, once the ledger holds no key of it that
// the run does not know. Another run of the workflow (the one a Temporal
// reset replaced) may have sent under keys this run never saw: those are
// searched first, and what turns up there stands.
func (r *run) settleKnown() {
	if r.settledBySend() {
		return
	}
	for i := 0; ; i++ {
		r.reportUnresolved()
		out, ok := r.settleChecked(i < 3)
		if ok {
			return
		}
		r.searchUnknownKeys(out)
	}
}

// settledBySend takes the settle the Send made (ledgerState.settled)
// when the run ends as that Send saw it, Delivered with nothing owed
// before the settle; else the run settles itself, and the ledger keeps
// the first settle.
func (r *run) settledBySend() bool {
	s := r.held.settled
	r.held.settled = nil
	if s == nil || r.st.State != contract.Delivered || s.MessageID != r.msgs.primary {
		return false
	}
	if !r.look.lateAt.IsZero() || r.look.unresolved() {
		return false
	}
	defer r.countSettled()
	r.settled(*s, nil)
	return true
}

// endedUnsent reports an outcome that says nothing was sent: Cancelled
// or Failed.
func (r *run) endedUnsent() bool {
	return r.st.State == contract.Cancelled || r.st.State == contract.Failed
}

// reportUnresolved says, before the settle, what no search could rule
// out: an SMS that may have gone out of a run that ends unsent, or a
// second message beside the ones the run knows where the late look was
// owed and could not be made (Bird stores no 5xx answer, and its lock
// may expire under a running attempt).
func (r *run) reportUnresolved() {
	if !r.look.unresolved() {
		return
	}
	if r.endedUnsent() {
		r.mayHaveSent(true)
	}
	if r.look.lateAt.IsZero() || len(r.msgs.live) == 0 {
		return
	}
	if !r.st.PossibleDuplicate {
		r.possibleDuplicate("an attempt ended without a certain answer, and the last look for another message, once that attempt could no longer take effect, failed: it may have sent one beside the message the run follows")
	}
}

// searchUnknownKeys searches the keys a settle refused (out.UnknownKeys:
// another run of the workflow used them) at their providers, once the
// attempts under them can no longer take effect.
func (r *run) searchUnknownKeys(out activities.SettleOutput) {
	var names []string
	for _, k := range out.UnknownKeys {
		names = append(names, k.Key)
	}
	r.note(contract.KindLedger, "the ledger holds attempts under %s, which this run did not know (another run of the workflow made them, as before a reset): searching them before the run settles", strings.Join(names, ", "))
	r.learnKeys(out.UnknownKeys)
	r.uncertainSince(out.LastUncertainAt)
	if r.look.lateAt.IsZero() {
		r.look.lateAt = workflow.Now(r.ctx)
	}
	r.look.lateDone = false
	for _, k := range out.UnknownKeys {
		if p := r.providerOf(k.Key); !sameProvider(p, r.st.Provider) {
			r.oweLook(p, k.Key)
		}
	}
	r.look.last = searchSpoke
	r.lastLook()
	r.lookAtLeft()
	if !r.look.unresolved() || r.endedUnsent() {
		return
	}
	if !r.st.DuplicateSend {
		r.possibleDuplicate(fmt.Sprintf("the keys %s of another run of this workflow could not be searched: a second message under them cannot be ruled out", strings.Join(names, ", ")))
	}
}

// mayHaveSent makes a run that ends Cancelled or Failed say that an SMS
// may have gone out, when unresolved (an attempt ended without a certain
// answer that no search could resolve) and no live message is known:
// support must not read "Cancelled" as "nothing was sent".
func (r *run) mayHaveSent(unresolved bool) {
	if !unresolved || r.st.OutcomeUnknown {
		return
	}
	if len(r.msgs.live) > 0 {
		return
	}
	r.st.OutcomeUnknown = true
	r.st.Reason += "; the outcome is unknown: an attempt ended without a certain answer and no search of the provider's records could tell whether it sent the SMS, so one may have gone out"
	r.note(contract.KindOutcomeUnknown, "outcome unknown: an SMS of the event may have gone out (no search could rule it out)")
	if r.st.PossibleDuplicate {
		return
	}
	// Each uncertain attempt may have sent its own message (Bird stores
	// no 5xx answer; a lock may expire under a running attempt): more
	// than one, or one beside a message of the event whose status the
	// run never saw (none is known alive here), may mean more than one
	// SMS.
	rec := r.recall(r.sending.req.Key)
	n := rec.Uncertain
	for _, m := range rec.Messages {
		if !r.msgs.observed[m.ID] {
			n++
		}
	}
	if n > 1 {
		r.possibleDuplicate(fmt.Sprintf("%d attempts of the event ended without a certain answer or with a message, and no search could tell what they sent: more than one SMS may have gone out", n))
	}
}

// findings are what the run reports beside its outcome, as the ledger
// keeps them.
func (r *run) findings() []string {
	var f []string
	if r.st.DuplicateSend {
		f = append(f, ledger.FindingDuplicateSend)
	}
	if r.st.PossibleDuplicate {
		f = append(f, ledger.FindingPossibleDuplicate)
	}
	if r.st.OutcomeUnknown {
		f = append(f, ledger.FindingOutcomeUnknown)
	}
	return f
}

// takeRecord reports the messages and findings the ledger keeps for the
// event, which another run of the workflow recorded.
func (r *run) takeRecord(ids, findings []string) {
	var added []string
	for _, id := range ids {
		if !slices.Contains(r.st.MessageIDs, id) {
			r.addMessage(id)
			added = append(added, "message "+id)
		}
	}
	for _, f := range findings {
		var flag *bool
		switch f {
		case ledger.FindingDuplicateSend:
			flag = &r.st.DuplicateSend
		case ledger.FindingPossibleDuplicate:
			flag = &r.st.PossibleDuplicate
		case ledger.FindingOutcomeUnknown:
			flag = &r.st.OutcomeUnknown
		}
		if flag != nil && !*flag {
			*flag = true
			added = append(added, f)
		}
	}
	if len(added) > 0 {
		r.note(contract.KindLedger, "the ledger keeps what another run of the event reported: %s", strings.Join(added, ", "))
	}
}

// countSettled counts the run's settle, and a duplicate it reports.
func (r *run) countSettled() {
	mh := workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"provider": r.st.Provider})
	mh.WithTags(map[string]string{"state": string(r.st.State)}).Counter(name.Settled).Inc(1)
	switch {
	case r.st.DuplicateSend:
		mh.WithTags(map[string]string{"kind": "proven"}).Counter(name.Duplicates).Inc(1)
	case r.st.PossibleDuplicate:
		mh.WithTags(map[string]string{"kind": "possible"}).Counter(name.Duplicates).Inc(1)
	}
}

// settleChecked records the outcome in the ledger, retried until it is
// written; a ledger that stays unwritable for a day fails the run
// visibly rather than let it end as if the outcome were recorded. With
// check, the ledger refuses the settle while it holds keys of the event
// the run does not know, and ok is false with those keys in out.
func (r *run) settleChecked(check bool) (out activities.SettleOutput, ok bool) {
	in := activities.SettleInput{Key: r.in.Key, Outcome: string(r.st.State), Reason: r.st.Reason, MessageID: r.msgs.primary, LedgerID: r.held.ledgerID}
	in.MessageIDs, in.Findings = r.st.MessageIDs, r.findings()
	if check {
		in.KnownKeys, in.CheckKeys = r.st.KeysUsed, true
	}
	err := r.ledgerStep("Settle", settleOptions(), a.Settle, in, &out)
	if err == nil && len(out.UnknownKeys) > 0 {
		return out, false
	}
	defer r.countSettled()
	r.settled(out, err)
	return out, true
}

// settleOptions retry a settle for a day.
func settleOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute,
			MaximumAttempts: 24 * 12, // the day bounds it; explicit for the SDK's test environment
		},
	}
}

// settler says who settled the event before the run's own settle, and
// what this run is beside it: with no takeover, only a Send of this run
// asked to settle (one whose answer was lost, as when its attempt timed
// out) can have; else the run a reset replaced.
func (r *run) settler() (by, self string) {
	if r.held.takeovers == 0 && r.held.sendSettles {
		return "by an attempt of this run's Send whose answer the run did not get", "then found"
	}
	return "by another run of this workflow", "which replaced it, found"
}

// settled reads the answer of a settle.
func (r *run) settled(out activities.SettleOutput, err error) {
	switch {
	case err != nil:
		was := r.st.State
		r.st.State = contract.Failed
		r.st.Reason = fmt.Sprintf("the outcome %s (%s) could not be recorded in the ledger: %s. The ledger does not know the event settled: fix the ledger, then check the event with smsctl audit before starting it again",
			was, r.st.Reason, errorMessage(err))
		r.note(contract.KindEnded, "%s", r.st.Reason)
		r.upsertSearch()
	case out.Outcome != string(r.st.State) && out.Outcome != "":
		// Another run of the workflow (the one a reset replaced) settled
		// the event first, with an outcome that knows at least as much of
		// a message that went out as this run's (a lesser one this settle
		// would have replaced: ledger.Rank). That outcome, and its
		// message, are the event's; the run says what it found itself.
		by, self := r.settler()
		r.st.Reason = fmt.Sprintf("the ledger already held the outcome %s for the event, settled at %s %s (%s); this run %s: %s (%s)",
			out.Outcome, out.SettledAt.UTC().Format(time.RFC3339), by, out.Reason, self, r.st.State, r.st.Reason)
		r.st.State = contract.State(out.Outcome)
		if out.MessageID != "" {
			r.addMessage(out.MessageID)
			if r.msgs.primary == "" {
				r.msgs.primary = out.MessageID
			}
		}
		r.note(contract.KindEnded, "%s", r.st.Reason)
		r.upsertSearch()
	case out.Outcome != string(r.st.State):
		r.note(contract.KindLedger, "the ledger already held the outcome %s for the event (settled %s: %s); the first settle stands there",
			out.Outcome, out.SettledAt.UTC().Format(time.RFC3339), out.Reason)
	}
	if err == nil {
		// What every run of the event recorded with it: another run's
		// proven duplicate, or a message only it found, is this run's too.
		r.takeRecord(out.MessageIDs, out.Findings)
	}
}
