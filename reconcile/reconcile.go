// Package reconcile compares our own send records with the provider's: the
// message ids the ledger recorded are looked up by id, and where the
// provider can list its messages (Bird) the window of the attempts is
// searched by key. The Reconcile activity and the audit command both use it.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// ListSlack widens the listed window around the attempts: clocks differ.
const ListSlack = 5 * time.Minute

// Query says what to look for.
type Query struct {
	EventKey string
	// Keys are the send keys to look for (the event key, resend keys).
	Keys []string
	// KnownIDs are message ids known besides the ledger's.
	KnownIDs []string
	// Since is the first attempt under any of Keys.
	Since time.Time
	// Now ends the listed window.
	Now time.Time
}

// Found is what the search found.
type Found struct {
	// Messages are the provider's records of the event's messages, each once.
	Messages []provider.Message
	// Attempts are the ledger's attempts of the event (all keys).
	Attempts []ledger.Attempt
	// Searched is true when the provider's records could be searched for
	// the keys: a list, or at least one message id to look up.
	Searched bool
	// How says what was consulted, for timelines and reports.
	How string
	// ByKey is true when the provider was searched by key (it can list its
	// messages), not only by the ids we know.
	ByKey bool
	// Unsearchable are the keys no search can speak for (no list endpoint,
	// uncertain attempts, no message id).
	Unsearchable []Unsearchable
	// Vanished are the ids looked up that the provider answered "not
	// found" for. Every id asked for is one a provider gave us (the
	// ledger's, or the caller's known ids, which must be the provider's
	// own), so each is a message whose fate is unknown.
	Vanished []string
}

// Search runs the query against the ledger and the provider. A provider
// that cannot be reached is an error: the caller retries or reports it.
func Search(ctx context.Context, led ledger.Ledger, c provider.Client, q Query) (Found, error) {
	var out Found
	want := map[string]bool{}
	for _, k := range q.Keys {
		want[k] = true
	}
	attempts, err := led.Attempts(ctx, q.EventKey)
	if err != nil {
		return out, err
	}
	out.Attempts = attempts
	ids := append([]string(nil), q.KnownIDs...)
	fromLedger := 0
	for _, at := range attempts {
		if want[at.SendKey] && at.MessageID != "" {
			ids = append(ids, at.MessageID)
			fromLedger++
		}
	}
	seen := map[string]bool{}
	add := func(m provider.Message) {
		if !seen[m.ID] {
			seen[m.ID] = true
			out.Messages = append(out.Messages, m)
		}
	}
	looked := 0
	asked := map[string]bool{}
	for _, id := range ids {
		// Each id once: the run's known ids and the ledger's overlap, and
		// every lookup spends the provider's request budget.
		if seen[id] || asked[id] {
			continue
		}
		asked[id] = true
		m, err := c.Get(ctx, id)
		if errors.Is(err, provider.ErrNotFound) {
			// The provider gave us this id when it accepted a message, so
			// a message it can no longer show is one whose fate is
			// unknown, not one that was never sent.
			out.Vanished = append(out.Vanished, id)
			continue
		}
		if err != nil {
			return out, err
		}
		looked++
		add(m)
	}
	out.How = fmt.Sprintf("ledger: %d attempt(s), %d message id(s); looked up %d id(s) at %s", len(attempts), fromLedger, looked, c.Name())
	if len(out.Vanished) > 0 {
		out.How += fmt.Sprintf(" (%s cannot find %s)", c.Name(), strings.Join(out.Vanished, ", "))
	}
	out.Searched = len(ids) > 0
	if l, ok := c.(provider.Lister); ok {
		from, to := q.Since.Add(-ListSlack), q.Now.Add(ListSlack)
		listed, err := l.List(ctx, from, to)
		if err != nil {
			return out, err
		}
		for _, m := range listed {
			if want[m.Reference] {
				add(m)
			}
		}
		out.Searched, out.ByKey = true, true
		out.How += fmt.Sprintf("; searched %d %s message(s) from %s to %s by key", len(listed), c.Name(), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	} else {
		out.Unsearchable = unsearchableKeys(q.Keys, attempts)
		if !out.Searched {
			out.How += fmt.Sprintf("; %s has no list endpoint and no message id was recorded, so its records cannot be searched", c.Name())
		} else if len(out.Unsearchable) > 0 {
			// A key's message may exist without any id we know: looking up
			// the other keys' ids says nothing about it.
			out.Searched = false
			var blind []string
			for _, u := range out.Unsearchable {
				blind = append(blind, u.Key)
			}
			out.How += fmt.Sprintf("; %s cannot be searched for %s: an attempt ended without a certain answer and no message id was recorded under it", c.Name(), strings.Join(blind, ", "))
		}
	}
	return out, nil
}

// Unsearchable is a key, at a provider without a list endpoint, whose
// attempts include some without a certain answer and none with a message
// id: each of those attempts may have sent a message no search can find.
type Unsearchable struct {
	Key       string `json:"key"`
	Uncertain int    `json:"uncertain"`
}

// unsearchableKeys lists the unsearchable keys, in the order given.
func unsearchableKeys(keys []string, attempts []ledger.Attempt) []Unsearchable {
	var out []Unsearchable
	for _, k := range keys {
		hasID, uncertain := false, 0
		for _, at := range attempts {
			if at.SendKey == k {
				hasID = hasID || at.MessageID != ""
				if at.Uncertain() {
					uncertain++
				}
			}
		}
		if uncertain > 0 && !hasID {
			out = append(out, Unsearchable{Key: k, Uncertain: uncertain})
		}
	}
	return out
}

// AcceptedByKey groups the accepted message ids of an event by send key,
// from both sides: the ledger's accepted attempts, and the provider's
// messages that carry their key (Bird's reference). More than one id for
// one key proves a duplicate send.
func AcceptedByKey(f Found) map[string][]string {
	out := map[string][]string{}
	add := func(key, id string) {
		for _, have := range out[key] {
			if have == id {
				return
			}
		}
		out[key] = append(out[key], id)
	}
	for _, at := range f.Attempts {
		if at.MessageID != "" && provider.Outcome(at.Outcome).Sent() {
			add(at.SendKey, at.MessageID)
		}
	}
	for _, m := range f.Messages {
		if m.Reference != "" {
			add(m.Reference, m.ID)
		}
	}
	return out
}
