// Package audit puts an event's timeline from our ledger beside the
// provider's records and says what they prove. A message shown twice on a
// phone is not evidence by itself: several accepted message ids for one key
// prove several sends, while a single id in an incomplete log proves
// nothing. When a duplicate is proven, the report carries what a support
// request needs: the ids, the destination and the timestamps.
package audit

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/reconcile"
	"github.com/acme/smsorch/sms"
)

// Report is the audit of one event.
type Report struct {
	Key      string             `json:"key"`
	Event    ledger.Event       `json:"event"`
	Attempts []ledger.Attempt   `json:"attempts"`
	Messages []provider.Message `json:"providerMessages"`
	// Accepted are the accepted message ids per send key, from both sides.
	Accepted map[string][]string `json:"accepted"`
	// Duplicates are the send keys with more than one accepted id.
	Duplicates []string `json:"duplicates,omitempty"`
	// Switches are the event's moves to another provider, with who
	// decided and the evidence.
	Switches []ledger.Switch `json:"switches,omitempty"`
	// Searched is false when the provider's records could not be searched
	// (Sendy without any recorded id): then nothing is proven either way.
	Searched bool   `json:"searched"`
	How      string `json:"how"`
}

// Verdict says what the records prove, in a sentence.
func (r Report) Verdict() string {
	switch {
	case len(r.Duplicates) > 0:
		var parts []string
		for _, k := range r.Duplicates {
			parts = append(parts, fmt.Sprintf("key %s has %d accepted message ids (%s)", k, len(r.Accepted[k]), strings.Join(r.Accepted[k], ", ")))
		}
		return "PROVEN DUPLICATE SEND: " + strings.Join(parts, "; ")
	case !r.Searched:
		return "NOT PROVEN EITHER WAY: the provider's records could not be searched, and a single id in an incomplete log proves nothing"
	default:
		return "no duplicate: at most one accepted message id per key, in our ledger and in the provider's records"
	}
}

// Build audits an event: its ledger record and attempts, the switches
// of provider it made, and each provider's messages for every key it was
// sent under there (the event key and its resends at the first provider,
// keys.Via keys at another). clients holds the provider clients to ask;
// keys at a provider without one leave the report not searched.
func Build(ctx context.Context, led ledger.Ledger, clients map[provider.Name]provider.Client, key string, now time.Time) (Report, error) {
	e, err := led.Event(ctx, key)
	if err != nil {
		return Report{}, err
	}
	attempts, err := led.Attempts(ctx, key)
	if err != nil {
		return Report{}, err
	}
	switches, err := led.Switches(ctx, key)
	if err != nil {
		return Report{}, err
	}
	// The keys by provider, in the order first used.
	var order []provider.Name
	byProvider := map[provider.Name][]string{}
	addKey := func(k string) {
		p := provider.Name(e.Provider)
		if _, via, ok := keys.SplitVia(keys.Key(k)); ok {
			p = provider.Name(via)
		}
		if _, ok := byProvider[p]; !ok {
			order = append(order, p)
		}
		if !contains(byProvider[p], k) {
			byProvider[p] = append(byProvider[p], k)
		}
	}
	addKey(key)
	since := e.CreatedAt
	for _, a := range attempts {
		addKey(a.SendKey)
		if a.StartedAt.Before(since) {
			since = a.StartedAt
		}
	}
	var known []string
	if e.MessageID != "" {
		known = append(known, e.MessageID)
	}
	r := Report{Key: key, Event: e, Attempts: attempts, Switches: switches, Accepted: map[string][]string{}, Searched: true}
	var hows []string
	for _, p := range order {
		c := clients[p]
		if c == nil {
			r.Searched = false
			hows = append(hows, fmt.Sprintf("%s: not asked (no client for it was given) for %s", p, strings.Join(byProvider[p], ", ")))
			continue
		}
		found, err := reconcile.Search(ctx, led, c, reconcile.Query{EventKey: key, Keys: byProvider[p], KnownIDs: known, Since: since, Now: now})
		if err != nil {
			return Report{}, fmt.Errorf("search %s's records: %w", c.Name(), err)
		}
		r.Messages = append(r.Messages, found.Messages...)
		for k, ids := range reconcile.AcceptedByKey(found) {
			if contains(byProvider[p], k) {
				r.Accepted[k] = ids
			}
		}
		r.Searched = r.Searched && found.Searched
		hows = append(hows, fmt.Sprintf("%s: %s", p, found.How))
	}
	r.How = strings.Join(hows, "; ")
	for _, p := range order {
		for _, k := range byProvider[p] {
			ids := r.Accepted[k]
			sort.SliceStable(ids, func(i, j int) bool {
				ti, _ := r.acceptedTime(ids[i])
				tj, _ := r.acceptedTime(ids[j])
				return ti.Before(tj)
			})
			if len(ids) > 1 {
				r.Duplicates = append(r.Duplicates, k)
			}
		}
	}
	sort.Slice(r.Messages, func(i, j int) bool { return r.Messages[i].CreatedAt.Before(r.Messages[j].CreatedAt) })
	return r, nil
}

func contains(xs []string, x string) bool {
	for _, have := range xs {
		if have == x {
			return true
		}
	}
	return false
}

const stamp = "2006-01-02T15:04:05.000Z07:00"

// WriteText prints the report for a person, as it is: Masked first
// hides the number and the text, which only a support request needs.
func (r Report) WriteText(w io.Writer) error {
	e := r.Event
	var b strings.Builder
	fmt.Fprintf(&b, "Event %s via %s to %s\n", r.Key, e.Provider, e.Recipient)
	fmt.Fprintf(&b, "  text:    %q\n", e.Text)
	fmt.Fprintf(&b, "  created: %s\n", e.CreatedAt.UTC().Format(stamp))
	if e.Settled() {
		fmt.Fprintf(&b, "  settled: %s on %s (%s)\n", e.Outcome, e.SettledAt.UTC().Format(stamp), e.Reason)
	} else {
		b.WriteString("  settled: not yet\n")
	}
	b.WriteString("\nOur ledger, every attempt:\n")
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STARTED\tKEY\t#\tOUTCOME\tHTTP\tCODE\tMESSAGE\tREPLAY")
	for _, a := range r.Attempts {
		outcome := a.Outcome
		if a.Open() {
			outcome = "never ended (crash or cut off)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", a.StartedAt.UTC().Format(stamp), a.SendKey, a.Number, outcome,
			orDash(a.HTTPStatus), orDashS(a.Code), orDashS(a.MessageID), yes(a.Replay))
	}
	_ = tw.Flush()
	for _, sw := range r.Switches {
		fmt.Fprintf(&b, "\nMoved from %s to %s under %s on %s by %s: %s\n", sw.From, sw.To, sw.SendKey, sw.At.UTC().Format(stamp), sw.By, sw.Evidence)
	}
	if len(r.Switches) > 0 {
		fmt.Fprintf(&b, "\nThe providers' records (%s):\n", r.How)
	} else {
		fmt.Fprintf(&b, "\n%s's records (%s):\n", e.Provider, r.How)
	}
	if len(r.Messages) == 0 {
		b.WriteString("  none found\n")
	}
	tw = tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	for _, m := range r.Messages {
		fmt.Fprintf(tw, "  %s\t%s\t%s\tcreated %s\tto %s\n", m.ID, orDashS(m.Reference), m.RawStatus, m.CreatedAt.UTC().Format(stamp), m.To)
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nVerdict: %s\n", r.Verdict())
	if len(r.Duplicates) > 0 {
		b.WriteString("\nSupport request:\n")
		fmt.Fprintf(&b, "  Provider:        %s\n", e.Provider)
		fmt.Fprintf(&b, "  Destination:     %s\n", e.Recipient)
		for _, k := range r.Duplicates {
			fmt.Fprintf(&b, "  Idempotency-Key: %s\n", k)
			for _, id := range r.Accepted[k] {
				fmt.Fprintf(&b, "    message %s accepted %s\n", id, r.acceptedAt(id))
			}
		}
		b.WriteString("  Our attempts:    see the ledger above (times in UTC)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// acceptedTime is when a message was created at the provider, or else
// when our ledger saw it accepted (fromLedger).
func (r Report) acceptedTime(id string) (t time.Time, fromLedger bool) {
	for _, m := range r.Messages {
		if m.ID == id {
			return m.CreatedAt, false
		}
	}
	for _, a := range r.Attempts {
		if a.MessageID == id {
			return a.EndedAt, true
		}
	}
	return time.Time{}, false
}

// acceptedAt formats acceptedTime for the support request.
func (r Report) acceptedAt(id string) string {
	t, fromLedger := r.acceptedTime(id)
	switch {
	case t.IsZero():
		return "(time unknown)"
	case fromLedger:
		return t.UTC().Format(stamp) + " (our ledger)"
	default:
		return t.UTC().Format(stamp)
	}
}

func orDash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orDashS(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// Masked is the report without the personal data: the recipient masked
// (sms.MaskPhone) wherever it appears, and the texts replaced by their
// length. It is what `smsctl audit` prints unless asked to --reveal.
func (r Report) Masked() Report {
	hide := func(text string) string {
		if text == "" || text == ledger.Hidden {
			return text
		}
		return fmt.Sprintf("(%d characters: --reveal shows the text)", utf8.RuneCountInString(text))
	}
	r.Event.Recipient = maskedTo(r.Event.Recipient)
	r.Event.Text = hide(r.Event.Text)
	msgs := make([]provider.Message, len(r.Messages))
	for i, m := range r.Messages {
		m.To, m.Text = maskedTo(m.To), hide(m.Text)
		msgs[i] = m
	}
	r.Messages = msgs
	return r
}

func maskedTo(to string) string {
	if to == "" || to == ledger.Hidden {
		return to
	}
	return sms.MaskPhone(to)
}
