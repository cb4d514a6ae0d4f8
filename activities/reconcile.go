package activities

// Reconcile: our records beside the provider's.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/reconcile"
)

// ReconcileInput asks what the ledger and the provider know about an
// event's keys.
type ReconcileInput struct {
	EventKey string   `json:"eventKey"`
	Provider string   `json:"provider"`
	Keys     []string `json:"keys"`
	// KnownIDs are message ids the workflow already has.
	KnownIDs []string `json:"knownIds,omitempty"`
	// Since is the first attempt under any of Keys; the provider's list is
	// searched from shortly before it.
	Since time.Time `json:"since"`
	// LedgerID is the ledger that claimed the event (PrepareOutput).
	LedgerID string `json:"ledgerId,omitempty"`
}

// ReconcileOutput is what was found.
type ReconcileOutput struct {
	// Messages are the provider's records of the event's messages.
	Messages []provider.Message `json:"messages,omitempty"`
	// Searched is true when the provider's records could be searched for
	// the keys (a list, or at least one message id to look up).
	Searched bool `json:"searched"`
	// How says what was consulted, for the timeline.
	How string `json:"how"`
	// ByKey is true when the provider's records were searched by key (a
	// list endpoint), so a message no attempt of ours answered with can
	// be found; false when only known ids could be looked up (Sendy).
	ByKey bool `json:"byKey"`
	// LastUncertainAt is the start of the latest attempt under the keys
	// that ended without a certain answer or never ended; zero if none.
	LastUncertainAt time.Time `json:"lastUncertainAt"`
	// Unsearchable are the keys the provider's records cannot speak for,
	// with how many of their attempts may have sent a message.
	Unsearchable []reconcile.Unsearchable `json:"unsearchable,omitempty"`
	// NotExecutedOnly is true when the ledger holds attempts under the
	// keys and every one of them ended with an answer that says it was
	// not executed (not executed, rate limited), with no message id: the
	// proof that the provider sent nothing, from the ledger alone.
	NotExecutedOnly bool `json:"notExecutedOnly,omitempty"`
	// NotSent is true when no attempt under the keys can have sent a
	// message: every one was answered without being executed, rate
	// limited or rejected, with no message id, or none was ever begun
	// (a send that never left the task queue). Nothing can be found then,
	// so a resend needs no search that speaks for the keys.
	NotSent bool `json:"notSent,omitempty"`
	// Vanished are message ids of ours (the ledger's or the run's) that
	// the provider answers "not found" for: each was a message the
	// provider accepted, so whether it went out is unknown, never proof
	// that nothing was sent.
	Vanished []string `json:"vanished,omitempty"`
}

// notSent reports whether no attempt under the wanted keys can have sent
// a message: each was answered without being executed, or rejected.
func notSent(attempts []ledger.Attempt, want map[string]bool) bool {
	for _, at := range attempts {
		if want[at.SendKey] && !unexecuted(at, true) {
			return false
		}
	}
	return true
}

// unexecuted reports an attempt whose answer says it sent nothing: not
// executed or rate limited, or, with rejected, refused. A 409 rejection
// says the key is bound to another request, which the provider may have
// sent, so it never counts.
func unexecuted(at ledger.Attempt, rejected bool) bool {
	if at.Open() || at.MessageID != "" {
		return false
	}
	switch provider.Outcome(at.Outcome) {
	case provider.NotExecuted, provider.RateLimited:
		return true
	case provider.Rejected:
		return rejected && at.HTTPStatus != http.StatusConflict
	}
	return false
}

// notExecutedOnly reports whether every attempt under the wanted keys
// ended certainly unexecuted, and there was at least one.
func notExecutedOnly(attempts []ledger.Attempt, want map[string]bool) bool {
	n := 0
	for _, at := range attempts {
		if !want[at.SendKey] {
			continue
		}
		n++
		if !unexecuted(at, false) {
			return false
		}
	}
	return n > 0
}

// ledgerProvesNotSent answers a search whose provider could not be read
// from the ledger alone, when that is enough: no attempt of the event,
// under any of its keys, can have sent a message (none began, or each
// was answered without being executed) and the run knows no message id,
// so the provider has nothing to find. Every key counts, not only the
// ones asked: a run that a reset replaced may have had a message
// accepted under a key this run does not know. Without it, a provider
// whose records are down for hours keeps a run that never sent from
// saying so, and holds a resend that is safe. Otherwise ok is false and
// the search's error stands.
func (a *Activities) ledgerProvesNotSent(ctx context.Context, in ReconcileInput, want map[string]bool, searchErr error) (ReconcileOutput, bool) {
	if len(in.KnownIDs) > 0 {
		return ReconcileOutput{}, false
	}
	attempts, err := a.Ledger.Attempts(ctx, in.EventKey)
	if err != nil || slices.ContainsFunc(attempts, func(at ledger.Attempt) bool { return !unexecuted(at, true) }) {
		return ReconcileOutput{}, false
	}
	n := 0
	for _, at := range attempts {
		if want[at.SendKey] {
			n++
		}
	}
	return ReconcileOutput{
		How: fmt.Sprintf("ledger: %d attempt(s) under the keys, none of which can have sent a message; %s's records could not be read (%s) and are not needed",
			n, in.Provider, searchErr),
		NotExecutedOnly: notExecutedOnly(attempts, want),
		NotSent:         true,
	}, true
}

// Reconcile looks for the event's messages in our ledger and in the
// provider's records (reconcile.Search).
func (a *Activities) Reconcile(ctx context.Context, in ReconcileInput) (ReconcileOutput, error) {
	c, err := a.client(in.Provider)
	if err != nil {
		return ReconcileOutput{}, err
	}
	if err := a.checkLedger(in.LedgerID); err != nil {
		return ReconcileOutput{}, err
	}
	// The search window ends at the ledger's clock, which the attempts'
	// times were taken from.
	now, err := a.Ledger.Now(ctx)
	if err != nil {
		return ReconcileOutput{}, err
	}
	found, err := reconcile.Search(ctx, a.Ledger, c, reconcile.Query{
		EventKey: in.EventKey, Keys: in.Keys, KnownIDs: in.KnownIDs, Since: in.Since, Now: now,
	})
	result := "none"
	switch {
	case err != nil:
		result = "failed"
	case len(found.Messages) > 0:
		result = "found"
	case !found.Searched:
		result = "unsearchable"
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": in.Provider, "result": result}).Counter(name.Reconciliations).Inc(1)
	tracing.Annotate(ctx, tracing.EventKey.String(in.EventKey), tracing.Provider.String(in.Provider), tracing.Outcome.String(result))
	want := map[string]bool{}
	for _, k := range in.Keys {
		want[k] = true
	}
	if err != nil {
		if out, ok := a.ledgerProvesNotSent(ctx, in, want, err); ok {
			return out, nil
		}
		return ReconcileOutput{}, err
	}
	for i := range found.Messages {
		found.Messages[i] = lean(found.Messages[i])
	}
	return ReconcileOutput{
		Messages: found.Messages, Searched: found.Searched, How: found.How, ByKey: found.ByKey, Unsearchable: found.Unsearchable,
		LastUncertainAt: lastUncertain(found.Attempts, func(at ledger.Attempt) bool { return want[at.SendKey] }),
		NotExecutedOnly: notExecutedOnly(found.Attempts, want),
		NotSent:         notSent(found.Attempts, want),
		Vanished:        found.Vanished,
	}, nil
}
