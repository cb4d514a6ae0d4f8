package simulation

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// check weighs the lifetime against the promises (docs/testing.md,
// "The deterministic simulation"), from the world's side: the messages
// the simulator created, the requests it received, the ledger's row.
func (lt *lifetime) check(l *Lifetime, acks []ack) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	res := l.Result
	sc := lt.sc
	msgs := lt.w.sim.Messages(simulator.Filter{})
	var ours []simulator.Message
	for _, m := range msgs {
		if ofEvent(sc.Input.Key, m) {
			ours = append(ours, m)
		} else {
			bad("message %s under key %q, which is not one of the event's", m.ID, m.Key)
		}
	}
	lt.tl.add(lt.w.clock.Now(), "check", "the providers hold %d message(s) of the event: %s", len(ours), describeMessages(ours, res))

	// The run closed, or awaits a decision; never stuck.
	if l.Open && l.OpenState != contract.AwaitingDecision {
		bad("the run is stuck: still %s at the horizon (%s after the start)", l.OpenState, sc.Horizon)
	}
	warned := res.DuplicateSend || res.PossibleDuplicate

	// At most one live message unless the run reports a duplicate.
	var live []simulator.Message
	for _, m := range ours {
		if alive(m) {
			live = append(live, m)
		}
	}
	if len(live) > 1 && !warned {
		bad("silent duplicate: %d live messages of the event (%s) and the run reports neither duplicateSend nor possibleDuplicate", len(live), ids(live))
	}
	// Two live messages the run names are a duplicate it can prove, not
	// one that is only possible, once a search of its succeeded after
	// both were made (an id the provider answers 404 for, or one the run
	// learned from the ledger and never read, it cannot see live).
	var named []simulator.Message
	var latest time.Time
	for _, m := range live {
		if slices.Contains(res.MessageIDs, m.ID) && !sc.lost(m.ID) {
			named = append(named, m)
			if m.CreatedAt.After(latest) {
				latest = m.CreatedAt
			}
		}
	}
	if len(named) > 1 && !res.DuplicateSend && !l.Open && lt.reconciledSince(latest) {
		bad("the run names %d messages that are live at the provider (%s), and does not report the proven duplicate (duplicateSend false, possibleDuplicate %t)",
			len(named), ids(named), res.PossibleDuplicate)
	}

	// Every message of the event is known to the run, or the run says
	// its outcome is unknown. A possible duplicate is a claim about one
	// message the run cannot see: it excuses at most one unknown message
	// under each key, not any number.
	if !res.OutcomeUnknown && !(l.Open && l.OpenState == contract.AwaitingDecision) {
		unknown := map[string]int{}
		for _, m := range ours {
			if slices.Contains(res.MessageIDs, m.ID) {
				continue
			}
			unknown[m.Key]++
			switch {
			case !res.PossibleDuplicate:
				bad("unknown message: %s (%s, key %s, %s) is not in the run's messageIds %v, and the run says neither that its outcome is unknown nor that a duplicate is possible (state %s)",
					m.ID, m.Provider, m.Key, m.Status, res.MessageIDs, res.State)
			case unknown[m.Key] == 2 && !(sc.SendyRetention > 0 && m.Provider == simulator.Sendy) && lt.reconciledSince(m.CreatedAt):
				// (Not where no run can count them: a Sendy that forgets
				// its answers before the window the workers assume makes
				// a message for each uncertain attempt past its
				// retention, and a message made after the last search
				// that succeeded was never seen. A possible duplicate is
				// all a run can say there.)
				bad("%d or more messages under %s unknown to the run (%s): a possible duplicate claims one at most (messageIds %v)",
					unknown[m.Key], m.Key, describeMessages(ours, res), res.MessageIDs)
			}
		}
	}
	// Every key a message of the event was sent under is one the run
	// names.
	if !l.Open {
		for _, m := range ours {
			if !slices.Contains(res.KeysUsed, m.Key) {
				bad("message %s was sent under %s, which is not among the run's keys %v", m.ID, m.Key, res.KeysUsed)
			}
		}
	}
	// A message the run's own last search found is in its result: an
	// unknown outcome excuses only what no search of its could read.
	if !l.Open && lt.lastSearch.ok && lt.lastSearch.runID == lt.endedRun {
		for _, m := range ours {
			if slices.Contains(lt.lastSearch.found, m.ID) && !slices.Contains(res.MessageIDs, m.ID) {
				bad("the run's last search found message %s (%s at %s), and its result (%s) does not list it: messageIds %v", m.ID, m.Status, m.Provider, res.State, res.MessageIDs)
			}
		}
	}
	// A run that knows of a live message does not end Cancelled or
	// Failed: a cancel that meets one ends Unconfirmed.
	if !l.Open && (res.State == contract.Cancelled || res.State == contract.Failed) {
		for _, m := range live {
			if !slices.Contains(res.MessageIDs, m.ID) {
				continue
			}
			if lt.sc.lost(m.ID) && res.OutcomeUnknown {
				continue // the provider denied it: the run may not know it went out, and says so
			}
			bad("the run ended %s though it knows message %s, which is %s at %s", res.State, m.ID, m.Status, m.Provider)
		}
	}
	// A blind resend is a possible duplicate, and the run says so.
	if len(res.BlindResends) > 0 && !res.PossibleDuplicate && !res.DuplicateSend {
		bad("blind resend(s) %v, and the run does not report a possible duplicate", res.BlindResends)
	}
	v = append(v, lt.checkRequests()...)
	v = append(v, lt.checkAttempts()...)
	v = append(v, checkSearchAttributes(l)...)
	// An unknown outcome is a claim that something may have gone out.
	if lt.w.tr.sends == 0 && (res.OutcomeUnknown || (l.Open && strings.Contains(res.Reason, "unknown"))) {
		bad("the run says its outcome is unknown, but it never made a send request (%s)", res.Reason)
	}
	// Delivered is what a provider's answer said, never the run's guess,
	// of a message the run names that the provider holds delivered; and
	// every status the providers give is one the clients read.
	if !l.Open && res.State == contract.Delivered {
		if !slices.ContainsFunc(ours, func(m simulator.Message) bool {
			return m.Status == "delivered" && slices.Contains(res.MessageIDs, m.ID)
		}) {
			bad("the run says Delivered but no message among its %v is delivered at the provider (%s)", res.MessageIDs, describeMessages(ours, res))
		}
		if lt.deliveredSeen.IsZero() {
			bad("the run says Delivered, but no answer of the providers said delivered")
		}
	}
	if res.DeliveryStatus == string(provider.StatusUnknown) {
		bad("the run reports delivery status %q: the providers only give statuses the clients know", res.DeliveryStatus)
	}
	// A failover on proof (the run's own, or a search that found no
	// live message) leaves a provider that holds no live message of the
	// event made before it, nor one a request that reached it before the
	// move made later (a hung request the move did not wait for): a flag
	// on the run does not excuse a move the proof should have stopped. A
	// person's forced move is theirs. (Not a message no run can see,
	// which forgotten says.)
	for _, r := range res.Resends {
		moved, ok := lt.w.sendKeys[r.Key]
		if r.Provider == "" || !ok || (r.Basis != contract.BasisNoMessage && r.Basis != contract.BasisReconciled) {
			continue
		}
		for _, m := range live {
			if m.Provider == r.Provider {
				continue
			}
			if m.CreatedAt.Before(moved) {
				if !forgotten(sc, m, ours, res) {
					bad("the run moved the event to %s at %s (%s), yet %s holds live message %s of it, made at %s under %s",
						r.Provider, at(sc, moved), r.Basis, m.Provider, m.ID, at(sc, m.CreatedAt), m.Key)
				}
			} else if q, ok := lt.w.tr.landedFrom(m, lt.proofBefore(moved)); ok {
				// Made after the move by a request that reached the
				// provider before the search the move stood on: the move
				// did not wait until that request could no longer take
				// effect. (Not one that came after that search: a
				// replaced run's Send acting late, which the moving run
				// could not know of then.)
				bad("the run moved the event to %s at %s (%s) while a request under %s that reached %s at %s could still take effect: it made live message %s at %s",
					r.Provider, at(sc, moved), r.Basis, m.Key, m.Provider, at(sc, q.arrived), m.ID, at(sc, m.CreatedAt))
			}
		}
	}

	// No send under a new key without a search that succeeded before
	// it, or a forced decision; the run records the resend's basis (a
	// resend that a run replaced by a reset made is at least a key the
	// run knows).
	for k, first := range lt.w.sendKeys {
		if k == sc.Input.Key {
			continue
		}
		var basis string
		for _, r := range res.Resends {
			if r.Key == k {
				basis = r.Basis
			}
		}
		switch basis {
		case contract.BasisBlind:
			if !lt.forcedBefore(first) {
				bad("blind resend under %s without a forced decision", k)
			}
		case contract.BasisReconciled:
			// (A run that replaced the one that first sent under the key,
			// by a reset, names its own basis: the first send had one of
			// the others, a forced one flagged as blind.)
			replaced := lt.failedBefore(first) || (lt.forcedBefore(first) && (res.PossibleDuplicate || res.DuplicateSend))
			if !lt.searchedBefore(first) && !(lt.resets > 0 && replaced) {
				bad("resend under %s on a reconciliation, with no search that succeeded before it", k)
			}
		case contract.BasisDeliveryFailed:
			if !lt.failedBefore(first) {
				bad("resend under %s on a failed delivery, with no failed status seen before it", k)
			}
		case contract.BasisNoMessage:
			// A failover on the proof of the ledger's answers (every
			// attempt not executed) or of a search.
		case "":
			// Sent by a run a reset replaced: still one of the bases.
			if !lt.searchedBefore(first) && !lt.forcedBefore(first) && !lt.failedBefore(first) {
				bad("a send under the new key %s at %s with no search that succeeded before it, no failed delivery and no forced decision", k, at(sc, first))
			}
			if !l.Open && !slices.Contains(res.KeysUsed, k) {
				bad("a send under the new key %s is neither among the run's resends %v nor its keys %v", k, res.Resends, res.KeysUsed)
			}
		default:
			bad("resend under %s on basis %q", k, basis)
		}
	}

	// A cancel acknowledged is the end of sending: "nothing more is
	// sent" (docs/decisions.md). No send under a new key reaches a
	// provider after it.
	for _, a := range acks {
		if a.d.Action != contract.ActionCancel {
			continue
		}
		acked := sc.Start.Add(a.at)
		for k, first := range lt.w.sendKeys {
			if first.After(acked) {
				bad("a send under the new key %s reached the provider at %s, after the cancel by %s was acknowledged at %s", k, at(sc, first), a.d.By, at(sc, acked))
			}
		}
	}
	// No decision acknowledged and then not carried out.
	if !l.Open {
		for i, a := range acks {
			if lt.carriedOut(a, acks[i+1:], res, l.notes) {
				continue
			}
			bad("the %s acknowledged at T+%s by %s was not carried out (state %s: %s)", describe(a.d), a.at, a.d.By, res.State, res.Reason)
		}
	}

	// A resend the run gave up for want of a search was given up no
	// sooner than the deadline the person saw when they decided it.
	for _, a := range acks {
		if l.Open || a.d.Action != contract.ActionResend || a.deadline.IsZero() || !l.ended.Before(a.deadline) {
			continue
		}
		if strings.Contains(res.Reason, "never carried out") && strings.Contains(res.Reason, a.d.By) {
			bad("the resend by %s, acknowledged at T+%s with the deadline %s shown, was given up at %s, before that deadline: %s",
				a.d.By, a.at, at(sc, a.deadline), at(sc, l.ended), res.Reason)
		}
	}

	// Every timeline entry says what it is about: a kind of the closed set.
	for _, n := range l.notes {
		if !n.Kind.Known() {
			bad("a timeline entry of kind %q, not one of contract.EntryKinds: %s", n.Kind, n.Text)
		}
	}

	// A decision applies once, and only to the event it names.
	applied := map[string]int{}
	for _, n := range l.notes {
		if n.Kind != contract.KindDecided {
			continue
		}
		// "<action> decided by <who>: <reason> (decision <id>)"
		if i := strings.LastIndex(n.Text, " (decision "); i >= 0 && strings.Contains(n.Text, " decided by ") {
			applied[strings.TrimSuffix(n.Text[i+len(" (decision "):], ")")]++
		}
	}
	for id, n := range applied {
		if n > 1 {
			bad("decision %s was applied %d times", id, n)
		}
		if strings.HasPrefix(id, foreignDecision) {
			bad("decision %s, made for another event, was applied", id)
		}
	}

	// The ledger settled once, agreeing with the result.
	ev, err := lt.w.led.Event(context.Background(), sc.Input.Key)
	switch {
	case err != nil:
		bad("the ledger has no event: %v", err)
	case l.Open && ev.Settled():
		bad("the ledger settled the event %s while the run is still %s", ev.Outcome, l.OpenState)
	case !l.Open && !ev.Settled():
		bad("the run ended %s but the ledger never settled the event", res.State)
	case !l.Open && res.State == contract.Duplicate && ev.Outcome != string(contract.Duplicate):
		// A run that found the event settled by another (a reset, a
		// second start) says so and sends nothing.
		if !strings.Contains(res.Reason, ev.Outcome) {
			bad("the run ended Duplicate without naming the ledger's outcome %s: %s", ev.Outcome, res.Reason)
		}
	case !l.Open && ev.Outcome != string(res.State):
		bad("the ledger settled the event %s, the run ended %s", ev.Outcome, res.State)
	case !l.Open && ev.MessageID != "" && !slices.Contains(res.MessageIDs, ev.MessageID):
		bad("the ledger's message %s is not among the run's %v", ev.MessageID, res.MessageIDs)
	case !l.Open && ev.MessageID != "" && !slices.ContainsFunc(ours, func(m simulator.Message) bool { return m.ID == ev.MessageID }):
		bad("the ledger settled on message %s, which no provider holds", ev.MessageID)
	case !l.Open && ev.Outcome == string(contract.Delivered) && !slices.ContainsFunc(ours, func(m simulator.Message) bool { return m.Status == "delivered" }):
		bad("the ledger settled the event Delivered, but no message of it is delivered at the provider")
	}
	return v
}

// watchLedger reads the ledger's record of the event after an activity
// call and checks that it never went back: a settled outcome is never
// replaced by one that knows less of a message that went out (ledger.Rank),
// and no message id it held leaves it (docs/design.md, the ledger). It
// reads the record again only after a write of it.
func (lt *lifetime) watchLedger(now time.Time, after string) {
	n := lt.w.dying.recordWrites()
	if n == lt.recordWrites {
		return // nothing wrote the record since it was read
	}
	lt.recordWrites = n
	e, err := lt.w.led.Event(context.Background(), lt.sc.Input.Key)
	if err != nil {
		return // not claimed yet
	}
	if p := lt.record; p != nil {
		switch {
		case p.Settled() && !e.Settled():
			lt.viol = append(lt.viol, fmt.Sprintf("after %s at %s the ledger's record of the event is no longer settled (was %s)", after, at(lt.sc, now), p.Outcome))
		case p.Settled() && ledger.Rank(e.Outcome) < ledger.Rank(p.Outcome):
			lt.viol = append(lt.viol, fmt.Sprintf("after %s at %s the ledger's outcome went back from %s (%s) to %s (%s): a settle replaced one that knew more of a message that went out",
				after, at(lt.sc, now), p.Outcome, p.MessageID, e.Outcome, e.MessageID))
		}
		for _, id := range append([]string{p.MessageID}, p.MessageIDs...) {
			if id != "" && id != e.MessageID && !slices.Contains(e.MessageIDs, id) {
				lt.viol = append(lt.viol, fmt.Sprintf("after %s at %s the ledger's record lost message %s", after, at(lt.sc, now), id))
			}
		}
	}
	lt.record = &e
}

// checkRequests reads what reached the providers: every attempt under a
// key carries the bytes of its first (path and body), so no provider
// ever has cause to answer a key conflict.
func (lt *lifetime) checkRequests() []string {
	var v []string
	first := map[string]simulator.Request{}
	opened := map[string]time.Time{} // the key's first request at the provider
	for _, q := range lt.w.sim.Requests(simulator.Filter{}) {
		if q.Method != http.MethodPost || q.Key == "" {
			continue
		}
		id := q.Provider + " " + q.Key
		f, ok := first[id]
		if !ok {
			first[id], opened[id] = q, q.At
			continue
		}
		// No attempt under a key once its replay window has closed at
		// the provider, counted from the key's first request there: a
		// provider that forgot the key makes a second SMS.
		if q.At.After(opened[id].Add(lt.sc.Policy.ReplayWindow)) {
			v = append(v, fmt.Sprintf("the send under %s at %s (request %d) reached %s after the key's replay window had closed: its first request there was at %s, the window is %s",
				q.Key, at(lt.sc, q.At), q.Seq, q.Provider, at(lt.sc, opened[id]), lt.sc.Policy.ReplayWindow))
		}
		if f.Path != q.Path || !bytes.Equal(f.Body, q.Body) {
			v = append(v, fmt.Sprintf("the send under %s at %s (request %d) carried other bytes than its first attempt at %s (request %d): %s %s, then %s %s",
				q.Key, at(lt.sc, q.At), q.Seq, at(lt.sc, f.At), f.Seq, f.Path, f.BodyText, q.Path, q.BodyText))
			first[id] = q // one line for each change
		}
	}
	return v
}

// checkAttempts weighs the ledger's record of each answered attempt
// against what the provider did with the requests made while it was
// open: an answer recorded with a message was given for that message,
// with that status, as new or as a replay as the provider gave it; an
// answer recorded as not executed made no message.
func (lt *lifetime) checkAttempts() []string {
	var v []string
	rows, err := lt.w.led.Attempts(context.Background(), lt.sc.Input.Key)
	if err != nil {
		return nil // the ledger's own check names a missing event
	}
	reqs := lt.w.sim.Requests(simulator.Filter{})
	for _, a := range rows {
		if a.EndedAt.IsZero() || a.HTTPStatus == 0 {
			continue
		}
		var during []simulator.Request
		for _, q := range reqs {
			// (The ledger keeps milliseconds.)
			if q.Method == http.MethodPost && q.Key == a.SendKey && !q.At.Before(a.StartedAt.Add(-time.Millisecond)) && !q.At.After(a.EndedAt.Add(time.Millisecond)) {
				during = append(during, q)
			}
		}
		what := fmt.Sprintf("attempt %d of run %s under %s (%s to %s)", a.Number, a.RunID, a.SendKey, at(lt.sc, a.StartedAt), at(lt.sc, a.EndedAt))
		if a.MessageID != "" && !slices.ContainsFunc(during, func(q simulator.Request) bool {
			return q.MessageID == a.MessageID && q.Status == a.HTTPStatus && q.Replay == a.Replay
		}) {
			v = append(v, fmt.Sprintf("the ledger records %s as %s, HTTP %d, message %s, replay %t; the provider's answers then: %s",
				what, a.Outcome, a.HTTPStatus, a.MessageID, a.Replay, lt.describeRequests(during)))
		}
		// A success that carried a message id is recorded with it.
		if a.MessageID == "" && a.HTTPStatus/100 == 2 && slices.ContainsFunc(during, func(q simulator.Request) bool {
			return q.Status == a.HTTPStatus && q.MessageID != ""
		}) {
			v = append(v, fmt.Sprintf("the ledger records %s as %s, HTTP %d, without the message the provider answered with: %s",
				what, a.Outcome, a.HTTPStatus, lt.describeRequests(during)))
		}
		// An answer that says the attempt ran nothing (a 409 may be
		// another request's, which the provider may have run).
		nothing := a.Outcome == string(provider.NotExecuted) || a.Outcome == string(provider.RateLimited) ||
			(a.Outcome == string(provider.Rejected) && a.HTTPStatus != http.StatusConflict)
		if nothing && slices.ContainsFunc(during, func(q simulator.Request) bool {
			return q.Status == a.HTTPStatus && q.MessageID != "" && !q.Replay
		}) {
			v = append(v, fmt.Sprintf("the ledger records %s as %s (HTTP %d), but the provider made a message for it: %s",
				what, a.Outcome, a.HTTPStatus, lt.describeRequests(during)))
		}
	}
	return v
}

func (lt *lifetime) describeRequests(qs []simulator.Request) string {
	if len(qs) == 0 {
		return "none"
	}
	var s []string
	for _, q := range qs {
		d := fmt.Sprintf("request %d at %s: %d", q.Seq, at(lt.sc, q.At), q.Status)
		if q.MessageID != "" {
			d += " " + q.MessageID
		}
		if q.Replay {
			d += " (replay)"
		}
		if q.Fault != "" {
			d += " [" + q.Fault + "]"
		}
		s = append(s, d)
	}
	return strings.Join(s, "; ")
}

// checkSearchAttributes compares the run's search attributes with its
// outcome: a person's query in the UI must find the run by its state.
func checkSearchAttributes(l *Lifetime) []string {
	state := l.Result.State
	if l.Open {
		state = l.OpenState
	}
	var v []string
	if l.search.state != string(state) {
		v = append(v, fmt.Sprintf("SmsState is %q, but the run is %s", l.search.state, state))
	}
	if l.provider != "" && l.search.provider != l.provider {
		v = append(v, fmt.Sprintf("SmsProvider is %q, but the run sends through %s", l.search.provider, l.provider))
	}
	return v
}

// forcedBefore reports whether a person decided a forced resend before t.
func (lt *lifetime) forcedBefore(t time.Time) bool {
	for _, s := range lt.sent {
		if s.d.Force && !lt.sc.Start.Add(s.at).After(t) {
			return true
		}
	}
	return false
}

func (lt *lifetime) failedBefore(t time.Time) bool {
	return !lt.failedSeen.IsZero() && !lt.failedSeen.After(t)
}

// searchedSince reports whether a search began at t or after it.
func (lt *lifetime) searchedSince(t time.Time) bool { return anySince(lt.searches, t) }

// reconciledSince reports whether a search succeeded at t or after it.
func (lt *lifetime) reconciledSince(t time.Time) bool { return anySince(lt.reconciled, t) }

func anySince(times []time.Time, t time.Time) bool {
	return slices.ContainsFunc(times, func(x time.Time) bool { return !x.Before(t) })
}

// proofBefore is when the last search that succeeded before t ran (t
// without one).
func (lt *lifetime) proofBefore(t time.Time) time.Time {
	proof := time.Time{}
	for _, r := range lt.reconciled {
		if !r.After(t) && r.After(proof) {
			proof = r
		}
	}
	if proof.IsZero() {
		return t
	}
	return proof
}

func (lt *lifetime) searchedBefore(t time.Time) bool {
	for _, r := range lt.reconciled {
		if !r.After(t) {
			return true
		}
	}
	return false
}

// carriedOut reports whether an acknowledged decision took effect, or
// the run says plainly why not: a resend was sent (it is among the
// resends), replaced by a later decision, made needless by a message of
// the event that is alive, or the result names it; a cancel ended the
// run Cancelled, or a live message overtook it, or the result names it.
func (lt *lifetime) carriedOut(a ack, later []ack, res contract.Result, notes []contract.Entry) bool {
	if len(later) > 0 {
		return true
	}
	if strings.Contains(res.Reason, a.d.By) {
		// A resend the result says was never carried out must have been
		// tried: a search after it was acknowledged.
		return !strings.Contains(res.Reason, "never carried out") || lt.searchedSince(lt.sc.Start.Add(a.at))
	}
	if a.d.Action == contract.ActionResend {
		for _, n := range notes {
			if n.At.Before(lt.sc.Start.Add(a.at)) || n.Kind != contract.KindResendHeld {
				continue
			}
			if strings.Contains(n.Text, "resend not needed") || // a message of the event was alive then
				strings.Contains(n.Text, "the resend decided by "+a.d.By+" is not carried out") || // refused with its reason (a later decision took the run on)
				strings.Contains(n.Text, "replaces the resend decided by "+a.d.By) { // a signal decided again
				return true
			}
		}
	}
	alive := len(res.MessageIDs) > 0 && (res.State == contract.Delivered || res.State == contract.Accepted || res.State == contract.Unconfirmed || res.State == contract.Duplicate)
	if a.d.Action == contract.ActionCancel {
		return res.State == contract.Cancelled || alive
	}
	for _, r := range res.Resends {
		if r.By == a.d.By {
			return true
		}
	}
	return alive
}

func ids(ms []simulator.Message) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.ID)
	}
	return strings.Join(s, ", ")
}

func describeMessages(ms []simulator.Message, res contract.Result) string {
	var s []string
	for _, m := range ms {
		known := "unknown to the run"
		if slices.Contains(res.MessageIDs, m.ID) {
			known = "known"
		}
		s = append(s, fmt.Sprintf("%s %s key %s %s (%s)", m.Provider, m.ID, m.Key, m.Status, known))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// timeline is what happened in a lifetime, in order, on the world's
// clock: the activities and their answers, the provider's side, the
// person's decisions, Temporal's operations and the checks.
type timeline struct {
	sc      *Scenario
	mu      sync.Mutex
	entries []entry
}

type entry struct {
	at        time.Time
	who, text string
}

func (t *timeline) add(at time.Time, who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, entry{at: at, who: who, text: fmt.Sprintf(format, args...)})
}

func (t *timeline) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, e := range t.entries {
		fmt.Fprintf(&b, "  %-16s %-9s %s\n", at(t.sc, e.at), e.who, e.text)
	}
	return b.String()
}

// ofEvent reports whether m was sent under one of the event's keys (the
// event's own, or a resend key made from it).
func ofEvent(key string, m simulator.Message) bool {
	return m.Key == key || strings.HasPrefix(m.Key, key+"~")
}

// alive reports whether m may still reach, or has reached, the phone.
func alive(m simulator.Message) bool { return m.Status != "failed" && m.Status != "undelivered" }

// forgotten reports a message at a Sendy that forgets its answers before
// the window the workers assume, which no run can see: the run does not
// name it, and a message the run names was made under its key at least
// Sendy's retention after it (the key's later attempt, answered with a
// new message where Sendy should have replayed m). Sendy has no list to
// find m by, and its id went with the answer that was lost. The
// unknown-message check says what a run must claim there.
func forgotten(sc *Scenario, m simulator.Message, ours []simulator.Message, res contract.Result) bool {
	if sc.SendyRetention == 0 || m.Provider != simulator.Sendy || slices.Contains(res.MessageIDs, m.ID) {
		return false
	}
	return slices.ContainsFunc(ours, func(o simulator.Message) bool {
		return o.Provider == simulator.Sendy && o.Key == m.Key && slices.Contains(res.MessageIDs, o.ID) &&
			o.CreatedAt.Sub(m.CreatedAt) >= sc.SendyRetention
	})
}
