package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
)

// Failover reasons, as metrics and the timeline name them.
const (
	failoverNotExecuted  = "not_executed"
	failoverSearchedNone = "searched_none"
	failoverDecided      = "decided"
)

// providerOf is the provider a key of the event was sent through: the
// one a Via key names, else the event's first provider.
func (r *run) providerOf(k string) string {
	if _, p, ok := keys.SplitVia(keys.Key(k)); ok {
		return p
	}
	return r.in.Provider
}

// provKeys are the keys used at the provider in use, in order: what its
// records are searched for.
func (r *run) provKeys() []string {
	var out []string
	for _, k := range r.st.KeysUsed {
		if sameProvider(r.providerOf(k), r.st.Provider) {
			out = append(out, k)
		}
	}
	return out
}

// canonical is a provider's name as Prepare makes it ("Sendy " is sendy):
// the name of its task queues and of its keys.Via keys.
func canonical(p string) string { return strings.ToLower(strings.TrimSpace(p)) }

// sameProvider compares provider names as Prepare makes them canonical.
func sameProvider(a, b string) bool { return canonical(a) == canonical(b) }

// nextKey is the key of the next message at provider p: the event key
// there (the event key, or keys.Via at another provider) when it is
// unused, else its first unused resend key.
func (r *run) nextKey(p string) (keys.Key, error) {
	base := keys.Key(r.in.Key)
	if !sameProvider(p, r.in.Provider) {
		var err error
		if base, err = keys.Via(base, p); err != nil {
			return "", err
		}
	}
	if !slices.Contains(r.st.KeysUsed, string(base)) {
		return base, nil
	}
	for n := 1; ; n++ {
		k, err := keys.Resend(base, n)
		if err != nil || !slices.Contains(r.st.KeysUsed, string(k)) {
			return k, err
		}
	}
}

// failover moves the run to its fallback provider when the search that
// just ended (out, which found no live message) and the ledger prove
// that the provider in use holds no message of the event, and returns
// the next state: Sending at the fallback, Accepted when a message
// turned up after all. Without proof it says why in the timeline and the
// run awaits a decision, as without a fallback.
func (r *run) failover(out activities.ReconcileOutput) contract.State {
	to := canonical(r.in.Fallback)
	no := func(why string) contract.State {
		r.note(contract.KindMoved, "no failover to %s: %s; a person decides (a resend may name %s)", to, why, to)
		return contract.AwaitingDecision
	}
	if len(out.Messages) > 0 {
		return no(fmt.Sprintf("%s holds a message of the event (%s)", r.st.Provider, r.st.DeliveryStatus))
	}
	if len(out.Vanished) > 0 {
		return no(fmt.Sprintf("%s accepted message %s of the event and can no longer find it, so whether it went out is unknown", r.st.Provider, strings.Join(out.Vanished, ", ")))
	}
	keysHere := strings.Join(r.provKeys(), ", ")
	var reason, evidence string
	switch {
	case r.provenNotExecuted(out):
		reason = failoverNotExecuted
		evidence = fmt.Sprintf("every attempt under %s was answered without being executed (last answer: %s)", keysHere, orNone(r.sending.last))
	case out.ByKey:
		if r.recheckPending() {
			// An attempt without a certain answer could still take effect:
			// the search that proves nothing was sent comes after it cannot.
			if wait := r.look.lateAt.Sub(workflow.Now(r.ctx)); wait > 0 {
				r.note(contract.KindWaiting, "before a failover: an attempt without a certain answer could take effect until %s; searching %s's records again then", r.look.lateAt.UTC().Format(time.RFC3339), r.st.Provider)
				_ = workflow.Sleep(r.ctx, wait)
			}
			lateAt := r.look.lateAt
			again, err := r.lookup(r.provKeys())
			if err != nil {
				r.look.failed()
				return no(fmt.Sprintf("the search of %s's records after the late-effect horizon failed (%s)", r.st.Provider, errorMessage(err)))
			}
			r.searched(again)
			r.lateLookMade(lateAt)
			if r.adopt(again) {
				r.note(contract.KindFound, "a message of the event turned up at %s: following it, no failover", r.st.Provider)
				return contract.Accepted
			}
			if len(again.Messages) > 0 {
				return no(fmt.Sprintf("%s holds a message of the event (%s)", r.st.Provider, r.st.DeliveryStatus))
			}
			if cannotSpeak(again) {
				return no(fmt.Sprintf("the search of %s's records after the late-effect horizon cannot speak for the event (%s)", r.st.Provider, again.How))
			}
		}
		reason = failoverSearchedNone
		evidence = fmt.Sprintf("a search of %s's records by key, after the replay window and after every attempt could take effect, found no message under %s", r.st.Provider, keysHere)
	default:
		return no(fmt.Sprintf("an attempt at %s ended without a certain answer and %s cannot be searched by key, so whether it sent is unknown", r.st.Provider, r.st.Provider))
	}
	key, err := r.nextKey(to)
	if err != nil {
		return no("the key at " + to + " cannot be derived: " + err.Error())
	}
	if err := r.moveTo(to, key, "failover", evidence, reason); err != nil {
		return no(err.Error())
	}
	r.st.Resends = append(r.st.Resends, contract.Resend{Key: string(key), Provider: to, By: "failover", Reason: evidence, Basis: contract.BasisNoMessage})
	return contract.Sending
}

// moveBudget bounds the planning of a move: a worker without the other
// provider's settings, or a ledger down, leaves the run awaiting a
// decision after it instead of holding it in Reconciling.
const moveBudget = 10 * time.Minute

// planMove plans the event's request at provider p under key, recording
// sw in the ledger when set, and returns it with p's policy.
func (r *run) planMove(p string, key keys.Key, sw *ledger.Switch) (activities.MoveOutput, error) {
	opts := planOptions()
	opts.ScheduleToCloseTimeout = moveBudget
	var out activities.MoveOutput
	err := r.ledgerStep("PlanMove", opts, a.PlanMove, activities.PlanInput{
		EventKey: r.in.Key, SendKey: string(key), Provider: p, To: r.sending.req.To, From: strings.TrimSpace(r.in.From), Text: r.sending.req.Text,
		Switch: sw, LedgerID: r.held.ledgerID,
	}, &out)
	return out, err
}

// moveTo plans the event's request at provider p under key, records the
// switch and its evidence in the ledger, and makes p the provider in use,
// under p's own policy (replay window, retries, delays).
func (r *run) moveTo(p string, key keys.Key, by, evidence, reason string) error {
	from := r.st.Provider
	out, err := r.planMove(p, key, &ledger.Switch{EventKey: r.in.Key, SendKey: string(key), From: from, To: p, By: by, Evidence: evidence, At: workflow.Now(r.ctx)})
	if err != nil {
		return fmt.Errorf("the request at %s cannot be planned: %s", p, errorMessage(err))
	}
	// One late look at the provider left, before the run settles.
	r.leaveOthers(p)
	r.policy = out.Policy.WithDefaults()
	r.note(contract.KindMoved, "moving from %s to %s under %s (%s): %s", from, p, key, by, evidence)
	workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"from": from, "to": p, "reason": reason}).Counter(name.Failovers).Inc(1)
	r.st.Provider = p
	r.useKey(out.Request, string(key))
	// The uncertain attempts were the other provider's.
	r.look.lateAt, r.look.lateDone = time.Time{}, false
	r.upsertSearch()
	return nil
}

// checkMove reports a provider that a resend decision cannot move the run
// to: not known, Bird for an event with a sender name, or no key there.
func (r *run) checkMove(d contract.Decision) error {
	if err := d.CheckProvider(); err != nil {
		return err
	}
	if d.Provider == "" || sameProvider(d.Provider, r.st.Provider) {
		return nil
	}
	if sameProvider(d.Provider, "bird") && strings.TrimSpace(r.in.From) != "" {
		return fmt.Errorf("refused: Bird sends from the channel's own sender, and this event's sender is %q; resend at %s, or cancel", r.in.From, r.st.Provider)
	}
	if _, err := r.nextKey(d.Provider); err != nil {
		return fmt.Errorf("refused: the event has no key at %s (%v); resend at %s, or cancel", d.Provider, err, r.st.Provider)
	}
	return nil
}

// provenNotExecuted reports a search whose ledger rows prove that no
// attempt at the provider in use executed: each was answered without
// being executed, none ended without a certain answer, and the run knows
// no message of the event.
func (r *run) provenNotExecuted(out activities.ReconcileOutput) bool {
	if !out.NotExecutedOnly || len(r.st.MessageIDs) > 0 {
		return false
	}
	return out.LastUncertainAt.IsZero() && r.look.lateAt.IsZero()
}
